"""ORCA training: optimiser groups, the counterfactual (masked) step, TrainingArguments validation, the reproduce
script end to end, and 2-process data-parallel training under `accelerate launch`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_ext.orca import OrcaModel
from hf_ext.orca.testing import tiny_batch, tiny_config
from hf_ext.orca.train import OrcaTrainingArguments
from hf_ext.orca.trainer import OrcaTrainer

REPO_ROOT = Path(__file__).resolve().parents[2]


def _trainer(tmp_path, **kwargs):
    from datasets import Dataset

    batch = tiny_batch(64, seed=1)
    args = OrcaTrainingArguments(
        output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=32, seed=0, **kwargs
    )
    model = OrcaModel(tiny_config())
    return OrcaTrainer(
        model=model, args=args, train_dataset=Dataset.from_dict({k: v.tolist() for k, v in batch.items()})
    )


def test_optimizer_has_nde_group_at_scaled_lr(tmp_path):
    trainer = _trainer(tmp_path, nde_lr_ratio=0.5, learning_rate=2e-3)
    opt = trainer.create_optimizer()
    assert isinstance(opt, torch.optim.Adam) and len(opt.param_groups) == 2
    nde = {id(p) for p in trainer.model.nde_parameters()}
    assert {id(p) for p in opt.param_groups[1]["params"]} == nde
    assert opt.param_groups[0]["lr"] == 2e-3 and opt.param_groups[1]["lr"] == 1e-3
    assert all(g["weight_decay"] == 1e-4 for g in opt.param_groups)


def test_counterfactual_step_updates_only_the_nde_branch(tmp_path):
    trainer = _trainer(tmp_path)
    model = trainer.model.train()
    inputs = tiny_batch(32, seed=3)
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.125)  # pending main-step gradients must survive the masked step
    params_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    stats_before = {n: b.clone() for n, b in model.named_buffers() if "running" in n}
    trainer._counterfactual_step(inputs)
    nde = {n for n, _ in model.named_parameters() if n.startswith(("nde_tower.", "nde_head."))}
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, params_before[n])}
    assert changed and changed <= nde
    assert all(torch.equal(p.grad, torch.full_like(p, 0.125)) for p in model.parameters())
    for n, b in model.named_buffers():
        if "running" in n and not n.startswith("nde_"):
            assert torch.equal(b, stats_before[n]), f"masked pass moved BatchNorm statistics {n}"


def test_mask_ratio_zero_never_runs_the_masked_step(tmp_path, monkeypatch):
    calls = []
    trainer = _trainer(tmp_path, mask_fea_ratio=0.0)
    monkeypatch.setattr(trainer, "_counterfactual_step", lambda inputs: calls.append(1))
    trainer.train()
    assert calls == []
    trainer = _trainer(tmp_path, mask_fea_ratio=1.0)
    monkeypatch.setattr(trainer, "_counterfactual_step", lambda inputs: calls.append(1))
    trainer.train()
    assert len(calls) == 2


@pytest.mark.parametrize(
    "kwargs,field", [(dict(mask_fea_ratio=1.5), "mask_fea_ratio"), (dict(nde_lr_ratio=0), "nde_lr_ratio")]
)
def test_training_arguments_validation(tmp_path, kwargs, field):
    with pytest.raises(ValueError, match=field):
        OrcaTrainingArguments(output_dir=str(tmp_path), **kwargs)


def test_reproduce_end_to_end_small(tmp_path, capsys):
    from hf_ext.orca.report import REFERENCE_ORDER
    from hf_ext.orca.reproduce import ABLATIONS, ARMS, main

    main(
        [
            "--out",
            str(tmp_path),
            "--strengths",
            "0",
            "3",
            "--seeds",
            "0",
            "1",
            "--num-impressions",
            "1500",
            "--test-impressions",
            "3000",
            "--epochs",
            "1",
            "--workers",
            "1",
            "--device",
            "cpu",
        ]
    )
    saved = json.loads((tmp_path / "results.json").read_text())["backbones"]["mmoe"]
    cells = {(c["strength"], c["seed"], c["row"]): c for c in saved["cells"]}
    for s in (0.0, 3.0):
        for seed in (0, 1):
            # the --arms and --ablations rows are not trained here
            for row in (r for r in REFERENCE_ORDER if r not in ARMS and r not in ABLATIONS):
                tests = {"shifted"} if row == "oracle@train" else {"iid", "shifted"}
                assert tests <= set(cells[(s, seed, row)]), (s, seed, row)
            # Oracle and oracle@train coincide when there is no shift in the posterior (s = 0 = test strength).
            if s == 0.0:
                assert cells[(s, seed, "oracle@train")]["shifted"]["dt_ce"] == pytest.approx(
                    cells[(s, seed, "oracle")]["shifted"]["dt_ce"]
                )
            assert cells[(s, seed, "oracle")]["iid"]["num_clicked"] > 500
    # Paired differences are per-seed differences of the same cells.
    d = saved["paired_shifted"]["orca vs baseline @ s=3"]
    expect = [
        cells[(3.0, seed, "baseline")]["shifted"]["dt_ce"] - cells[(3.0, seed, "orca")]["shifted"]["dt_ce"]
        for seed in (0, 1)
    ]
    assert d["ce_gain"]["per_pair"] == pytest.approx(expect)
    assert d["ce_gain"]["mean"] == pytest.approx(np.mean(expect))
    assert d["ce_gain"]["sd"] == pytest.approx(np.std(expect, ddof=1))  # the sample SD, not the population one
    assert d["ce_gain"]["ci_low"] < d["ce_gain"]["mean"] < d["ce_gain"]["ci_high"]
    assert any(line.startswith("verdict:") for line in saved["verdict"])
    words = {v["verdict"] for v in saved["verdicts"]}
    assert words and words <= {"confirmed", "refuted", "inconclusive", "premise absent"}
    top = json.loads((tmp_path / "results.json").read_text())
    assert [r["claim"] for r in top["rules"]] and top["environment"]["date"]
    out = capsys.readouterr().out
    # The rules are printed before the run starts, i.e. before any table.
    assert out.index("Stated before the runs") < out.index("[rule]") < out.index("| oracle |")
    assert (tmp_path / "heatmaps.png").stat().st_size > 1000
    assert (tmp_path / "artifact" / "model.safetensors").is_file()


def test_two_process_training_stays_in_sync_and_shards_data(tmp_path):
    """`hf-ext train orca` under `accelerate launch --multi_gpu --num_processes 2` (gloo on CPU)."""
    report = tmp_path / "sync.json"
    accelerate = Path(sys.executable).with_name("accelerate")
    cmd = [
        str(accelerate),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        "29517",
        "-m",
        "hf_ext.core.cli",
        "train",
        "orca",
        "--output_dir",
        str(tmp_path / "out"),
        "--num_impressions",
        "3200",
        "--num_train_epochs",
        "1",
        "--per_device_train_batch_size",
        "64",
        "--sync_report",
        str(report),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    data = json.loads(report.read_text())
    assert data["world_size"] == 2
    assert data["checksums"][0] == data["checksums"][1], "ranks diverged"
    rank0, rank1 = (set(r) for r in data["rows_per_rank"])
    n = data["train_size"]
    assert n % 128 == 0  # 2 ranks x 64: no batch is padded with repeated rows, so the shards are disjoint
    assert not rank0 & rank1
    assert rank0 | rank1 == set(range(n))
    assert abs(len(rank0) - len(rank1)) <= 1 and len(rank0) <= n // 2 + 1
    assert (tmp_path / "out" / "artifact" / "model.safetensors").is_file()


def test_masked_step_feeds_the_masked_batch(tmp_path):
    """The counterfactual pass must see the post-click fields blocked and the other fields as they are (fails if
    the unmasked batch is fed at the masked step)."""
    trainer = _trainer(tmp_path, mask_fea_ratio=1.0)
    model = trainer.model.train()
    seen = []
    handle = model.embeddings.register_forward_pre_hook(lambda mod, args: seen.append(args[0].clone()))
    inputs = tiny_batch(32, seed=4)
    try:
        trainer._counterfactual_step(inputs)
    finally:
        handle.remove()
    assert len(seen) == 1
    cols = [model.config.field_names.index(f) for f in model.config.post_click_fields]
    vocab = torch.tensor(model.config.field_vocab_sizes)
    assert torch.all(seen[0][:, cols] == vocab[cols]), "the masked step saw unmasked post-click fields"
    other = [j for j in range(model.config.num_fields) if j not in cols]
    assert torch.equal(seen[0][:, other], inputs["input_ids"][:, other])


def _eval_dataset(n=256, seed=5):
    from datasets import Dataset

    batch = tiny_batch(n, seed=seed)
    data = {k: v.tolist() for k, v in batch.items()}
    data["dwell_seconds"] = [30.0 if c > 0 else 0.0 for c in data["click_labels"]]
    return Dataset.from_dict(data)


def test_evaluate_returns_the_orca_metrics(tmp_path):
    from hf_ext.orca.metrics import ctr_metrics

    trainer = _trainer(tmp_path)
    ds = _eval_dataset()
    metrics = trainer.evaluate(eval_dataset=ds)
    for key in (
        "eval_ctr_auc",
        "eval_dt_macro_f1",
        "eval_dt_mae_s",
        "eval_moderate_share_pred",
        "eval_js_distance",
        "eval_dt_ce",
        "eval_raw_dt_ce",
    ):
        assert key in metrics and np.isfinite(metrics[key]), key
    # The numbers are those of the model's own predictions.
    model = trainer.model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ds["input_ids"]))
    clicks = np.asarray(ds["click_labels"])
    assert metrics["eval_ctr_auc"] == pytest.approx(ctr_metrics(clicks, out.click_probs.numpy())["ctr_auc"], abs=1e-6)
    clicked = clicks > 0.5
    y = np.asarray(ds["dwell_labels"])[clicked]
    p = out.dt_logits.softmax(-1).numpy()[clicked]
    assert metrics["eval_dt_ce"] == pytest.approx(-np.mean(np.log(p[np.arange(y.size), y])), rel=1e-4)
    pred_s = np.asarray(model.config.bin_seconds)[p.argmax(1)]
    assert metrics["eval_dt_mae_s"] == pytest.approx(np.mean(np.abs(pred_s - 30.0)), rel=1e-5)


def test_early_stopping_stops_and_restores_the_best_weights():
    from types import SimpleNamespace

    from transformers import TrainerControl

    from hf_ext.orca.trainer import OrcaEarlyStoppingCallback

    model = OrcaModel(tiny_config())
    cb = OrcaEarlyStoppingCallback(patience=1)
    control, state = TrainerControl(), SimpleNamespace(global_step=1)
    cb.on_evaluate(None, state, control, metrics={"eval_dt_ce": 1.0}, model=model)
    best = {k: v.clone() for k, v in model.state_dict().items()}
    assert not control.should_training_stop
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    state.global_step = 2
    cb.on_evaluate(None, state, control, metrics={"eval_dt_ce": 1.2}, model=model)  # worse: stop (patience 1)
    assert control.should_training_stop and cb.best_step == 1
    cb.on_train_end(None, state, control, model=model)
    assert all(torch.equal(v, best[k]) for k, v in model.state_dict().items())


def test_trainer_adds_early_stopping_with_an_eval_strategy(tmp_path):
    from datasets import Dataset

    from hf_ext.orca.trainer import OrcaEarlyStoppingCallback

    batch = tiny_batch(64, seed=1)
    train = Dataset.from_dict({k: v.tolist() for k, v in batch.items()})
    args = OrcaTrainingArguments(
        output_dir=str(tmp_path),
        num_train_epochs=6,
        per_device_train_batch_size=32,
        eval_strategy="epoch",
        seed=0,
        learning_rate=0.3,
        report_to="none",
    )
    trainer = OrcaTrainer(model=OrcaModel(tiny_config()), args=args, train_dataset=train, eval_dataset=_eval_dataset())
    cbs = [c for c in trainer.callback_handler.callbacks if isinstance(c, OrcaEarlyStoppingCallback)]
    assert len(cbs) == 1
    trainer.train()
    assert cbs[0].best is not None and cbs[0].best_step is not None
    # The weights at the end are those of the best validation CE, restored by the callback.
    state = trainer.model.state_dict()
    assert all(torch.equal(v, state[k]) for k, v in cbs[0]._best_state.items())


def test_paired_models_share_their_common_initialisation():
    torch.manual_seed(3)
    base = OrcaModel(tiny_config(use_orca=False))
    torch.manual_seed(3)
    orca = OrcaModel(tiny_config(use_orca=True))
    common = base.state_dict()
    other = orca.state_dict()
    assert all(torch.equal(v, other[k]) for k, v in common.items())


def test_training_arguments_do_not_force_the_cpu(tmp_path):
    args = OrcaTrainingArguments(output_dir=str(tmp_path))
    assert args.use_cpu is False


def test_full_arm_is_tuned_on_validation_and_reads_ctr_at_its_own_stop(tmp_path):
    """Issue 39 (`--full`): every arm tries the same lr grid and keeps the lowest validation DT CE (recorded with
    the grid); ORCA as released (`orca-code`) trains h_T through the NDE loss; CTR AUC is also read with the weights
    of the best validation AUC."""
    from hf_ext.orca.reproduce import OrcaReproduceArguments, _run_job

    run = OrcaReproduceArguments(
        out=str(tmp_path), family="reliance", num_impressions=3_000, test_impressions=2_000, epochs=2.0, workers=1
    )
    run.grid_lr, run.ctr_own_stopping, run.device = [1e-3, 3e-2], True, "cpu"
    _, scores, _ = _run_job(run, 3.0, 0, "mmoe", "orca-code", False)
    m = scores[("orca-code", "iid")]
    grid = dict(map(tuple, m["grid_val_dt_ce"]))
    assert set(grid) == {1e-3, 3e-2} and m["chosen_lr"] == min(grid, key=grid.get)
    assert m["val_dt_ce"] == pytest.approx(min(grid.values()))
    assert 0.0 < m["ctr_auc_own_stop"] < 1.0 and 0.0 < m["ctr_auc"] < 1.0
    assert ("orca-code", "shifted") in scores


def test_reference_rows_are_computed_alongside_the_workers_with_the_same_numbers(tmp_path, monkeypatch):
    """With worker processes the main process computes the reference rows (oracle, oracle@train, trivial) in a
    thread while the workers train, instead of before starting them; the rows are the ones computed in line."""
    import threading

    from hf_ext.orca import reproduce_data
    from hf_ext.orca.reproduce import OrcaReproduceArguments

    run = OrcaReproduceArguments(
        out=str(tmp_path), strengths=[0.0, 3.0], seeds=[0, 1], num_impressions=1_000, test_impressions=1_000
    )
    threads, inline = [], reproduce_data._references

    def spy(*args):
        threads.append(threading.current_thread().name)
        return inline(*args)

    monkeypatch.setattr(reproduce_data, "_references", spy)
    expected = {k: inline(run, *k) for k in ((0.0, 0), (0.0, 1), (3.0, 0), (3.0, 1))}
    alongside = reproduce_data.references_alongside(run).result()
    assert list(alongside) == list(expected)  # sweep order: the cells keep their order in results.json

    def text(rows):  # NaN (the NDCG without user ids) equals itself only as text
        return json.dumps({str(k): {str(r): v for r, v in cell.items() if r != "heatmap"} for k, cell in rows.items()})

    assert text(alongside) == text(expected)
    np.testing.assert_array_equal(alongside[(3.0, 0)]["heatmap"], expected[(3.0, 0)]["heatmap"])
    assert len(threads) == 4 and all(t.startswith("orca-references") for t in threads)
    run.workers, threads[:] = 1, []  # in-process jobs: computed at once, in this thread
    assert reproduce_data.references_alongside(run).done() and threads == [threading.current_thread().name] * 4


def test_both_adams_run_foreach_with_the_per_tensor_loops_numbers(tmp_path):
    """The main and the NDE optimiser use Adam's foreach implementation (torch's CPU default is the per-tensor
    loop, slower); a few main and counterfactual steps leave bit-identical weights and optimiser states either way."""
    from hf_ext.orca import trainer as trainer_module

    results = {}
    for foreach in (False, True):
        trainer_module.ADAM_FOREACH = foreach
        try:
            torch.manual_seed(0)
            trainer = _trainer(tmp_path / str(foreach), weight_decay=1e-4)
            model = trainer.model.train()
            opt = trainer.create_optimizer()
            for step in range(4):
                batch = tiny_batch(32, seed=10 + step)
                model.zero_grad()
                model(**batch).loss.backward()
                opt.step()
                trainer._counterfactual_step(batch)
        finally:
            trainer_module.ADAM_FOREACH = True
        assert all(g["foreach"] is foreach for g in opt.param_groups + trainer._nde_optimizer.param_groups)
        results[foreach] = (model.state_dict(), opt.state_dict()["state"], trainer._nde_optimizer.state_dict()["state"])
    (w0, s0, n0), (w1, s1, n1) = results[False], results[True]
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    for a, b in ((s0, s1), (n0, n1)):
        assert a.keys() == b.keys() and all(torch.equal(a[i][k], b[i][k]) for i in a for k in a[i])
