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
from hf_ext.orca.training import OrcaTrainer, OrcaTrainingArguments

REPO_ROOT = Path(__file__).resolve().parents[2]


def _trainer(tmp_path, **kwargs):
    from datasets import Dataset

    batch = tiny_batch(64, seed=1)
    args = OrcaTrainingArguments(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=32, seed=0, **kwargs)
    model = OrcaModel(tiny_config())
    return OrcaTrainer(model=model, args=args, train_dataset=Dataset.from_dict({k: v.tolist() for k, v in batch.items()}))


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


@pytest.mark.parametrize("kwargs,field", [(dict(mask_fea_ratio=1.5), "mask_fea_ratio"), (dict(nde_lr_ratio=0), "nde_lr_ratio")])
def test_training_arguments_validation(tmp_path, kwargs, field):
    with pytest.raises(ValueError, match=field):
        OrcaTrainingArguments(output_dir=str(tmp_path), **kwargs)


def test_reproduce_end_to_end_small(tmp_path, capsys):
    from hf_ext.orca.reproduce import main

    results = main(["--out", str(tmp_path), "--strengths", "0", "3", "--seeds", "0", "1", "--backbones", "mmoe",
                    "--num-impressions", "4000", "--epochs", "1", "--workers", "1"])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [(r["strength"], r["variant"]) for r in saved["rows"]] == [
        (0.0, "baseline"), (0.0, "orca"), (3.0, "baseline"), (3.0, "orca")]
    for row in saved["rows"]:
        assert len(row["per_seed"]) == 2
        for key in ("moderate_share_pred", "js_distance", "dt_macro_f1", "dt_mae_s", "ndcg@5", "ctr_auc"):
            values = [m[key] for m in row["per_seed"]]
            assert row["metrics"][key]["mean"] == pytest.approx(np.mean(values))
            assert row["metrics"][key]["std"] == pytest.approx(np.std(values))
    assert (tmp_path / "heatmaps.png").stat().st_size > 1000
    assert (tmp_path / "artifact" / "model.safetensors").is_file()
    assert "moderate%(true)" in capsys.readouterr().out and "moderate%(true)" in results["table"]


def test_two_process_training_stays_in_sync_and_shards_data(tmp_path):
    """`hf-ext train orca` under `accelerate launch --multi_gpu --num_processes 2` (gloo on CPU)."""
    report = tmp_path / "sync.json"
    accelerate = Path(sys.executable).with_name("accelerate")
    cmd = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29517",
           "-m", "hf_ext.core.cli", "train", "orca", "--output_dir", str(tmp_path / "out"),
           "--num_impressions", "3200", "--num_train_epochs", "1", "--per_device_train_batch_size", "64",
           "--sync_report", str(report)]
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
