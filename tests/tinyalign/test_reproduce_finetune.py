"""The fine-tuning axis (`hf-ext reproduce tinyalign --finetune`) on tiny parts: stage 1 once per arm and seed, LoRA
stage 2 from its state on shares of a separate fine-tuning split, the learning rate chosen on validation only, the
premise before the claim, and the honest bank checked against every split a model learns or is selected on."""

import copy
import json

import pytest
import torch

from hf_ext.core.gc_freeze import gc_frozen
from hf_ext.tinyalign.reproduce_finetune import (
    FinetuneRunArguments,
    check_bank_is_honest,
    check_run,
    choose_learning_rates,
    decide,
    report_tables,
    run_arm,
)


def _tiny_world():
    from datasets import DatasetDict

    from hf_ext.tinyalign.modeling_tinyalign import TinyAlignForConditionalGeneration
    from hf_ext.tinyalign.testing import tiny_config, tiny_data, tiny_processor

    splits = {}
    for i, (name, n) in enumerate((("memory", 12), ("stage1", 8), ("finetune", 10), ("validation", 8), ("test", 8))):
        splits[name] = tiny_data(n, seed=i).add_column("index", list(range(100 * i, 100 * i + n)))
    torch.manual_seed(0)
    parts = TinyAlignForConditionalGeneration(tiny_config(use_retrieval=False))
    tower, lm = parts.vision_tower.requires_grad_(False), parts.language_model.requires_grad_(False)

    def factory(variant, private_lm):
        kwargs = {"use_retrieval": False} if variant == "baseline" else {"use_retrieval": True, "memory_top_k": 1}
        config = tiny_config(**kwargs)
        model = TinyAlignForConditionalGeneration(
            config, vision_tower=tower, language_model=copy.deepcopy(lm) if private_lm else lm
        )
        return model, tiny_processor(config)

    return DatasetDict(splits), factory, lm


def test_stage2_lora_from_stage1_state_and_validation_only_selection(tmp_path):
    data, factory, shared_lm = _tiny_world()
    before = {k: v.clone() for k, v in shared_lm.state_dict().items()}
    run = FinetuneRunArguments(
        out=str(tmp_path),
        seeds=[0, 1],
        fractions=[0.4, 1.0],
        learning_rates=[1e-3, 3e-2],
        variant="k1",
        stage1_epochs=1,
        stage2_epochs=1,
        batch_size=4,
        lora_r=2,
        lora_alpha=4,
    )
    stage1, rows = [], []
    with gc_frozen():  # as main() runs it: the Trainer's full collection after each run skips the frozen heap
        for seed in run.seeds:
            for variant in ("baseline", "k1"):
                s1, r = run_arm(run, data, factory, variant, seed, ("red", "blue"), tmp_path / "jobs.jsonl")
                stage1.append(s1)
                rows += r
    for k, v in shared_lm.state_dict().items():  # LoRA went into private copies: the shared frozen LM is untouched
        assert torch.equal(v, before[k])
    logged = [json.loads(line) for line in (tmp_path / "jobs.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 2 * 2 * 2 and [r["stage"] for r in logged].count(2) == len(rows)
    assert [r["stage"] for r in logged].count(1) == len(stage1) == 4
    assert {r["n_finetune_rows"] for r in rows} == {4, 10}  # 40 % and 100 % of the fine-tuning split
    assert all(r["lora_parameters"] > 0 for r in rows)
    # stage 2 starts from stage 1: with a learning rate of ~0 its validation CE would equal stage 1's; here it moved
    assert any(
        abs(r["validation"]["loss"] - s["validation"]["loss"]) > 1e-4
        for r in rows
        for s in stage1
        if (s["variant"], s["seed"]) == (r["variant"], r["seed"])
    )
    decided = decide(run, stage1, rows)
    assert set(decided) == {"finetune_premise", "finetune_data_efficiency", "finetune_tinyalign_vs_baseline"}
    assert decided["finetune_data_efficiency"].difference.n == 2
    tables = report_tables(run, stage1, rows)
    assert tables[0]["rows"][0][:2] == ["baseline", "stage 1 only"] and len(tables[1]["rows"]) == 2


def test_learning_rate_is_chosen_on_validation_never_on_test():
    def row(lr, seed, val, test):
        return {
            "variant": "k4",
            "fraction": 0.4,
            "learning_rate": lr,
            "seed": seed,
            "validation": {"loss": val},
            "test": {"loss": test},
        }

    rows = [row(1e-3, 0, 1.0, 0.1), row(1e-3, 1, 1.2, 0.1), row(3e-3, 0, 0.9, 5.0), row(3e-3, 1, 1.0, 5.0)]
    assert choose_learning_rates(rows) == {("k4", 0.4): 3e-3}  # lower mean validation CE, whatever test says
    rows = [row(1e-3, 0, 1.0, 0), row(3e-3, 0, 1.0, 0)]
    assert choose_learning_rates(rows) == {("k4", 0.4): 1e-3}  # a tie: the smaller rate


def test_the_premise_gates_the_claim():
    from hf_ext.core.reporting import PREMISE_ABSENT

    run = FinetuneRunArguments(seeds=[0, 1, 2], fractions=[0.4, 1.0], learning_rates=[1e-3])

    def rows(variant, fraction, accs):
        return [
            {
                "variant": variant,
                "fraction": fraction,
                "learning_rate": 1e-3,
                "seed": s,
                "validation": {"loss": 1.0},
                "test": {"token_accuracy": a},
            }
            for s, a in enumerate(accs)
        ]

    stage1 = [
        {"variant": v, "seed": s, "test": {"token_accuracy": 0.80 + 0.01 * s}}
        for v in ("baseline", "k4")
        for s in range(3)
    ]
    stage2 = rows("baseline", 1.0, [0.70, 0.72, 0.71]) + rows("k4", 1.0, [0.9, 0.91, 0.92])
    stage2 += rows("k4", 0.4, [0.95, 0.96, 0.97]) + rows("baseline", 0.4, [0.7, 0.7, 0.7])
    decided = decide(run, stage1, stage2)  # stage 2 made the baseline worse: no claim is decided
    assert decided["finetune_premise"].verdict == "refuted"
    assert decided["finetune_data_efficiency"].verdict == PREMISE_ABSENT
    stage2[:3] = rows("baseline", 1.0, [0.85, 0.87, 0.86])
    decided = decide(run, stage1, stage2)
    assert decided["finetune_premise"].verdict == "confirmed"
    assert decided["finetune_data_efficiency"].verdict == "confirmed"  # 0.95.. vs 0.85.., paired


def test_a_bank_built_from_memory_and_finetune_rows_is_refused():
    from datasets import concatenate_datasets

    from hf_ext.tinyalign.memory import MemoryBank

    data, _, _ = _tiny_world()

    def bank(rows):
        b = MemoryBank(torch.randn(len(rows), 4), torch.randn(len(rows), 2, 3))
        b.source_ids = list(rows["index"])
        return b

    check_bank_is_honest(bank(data["memory"]), data)
    for leaked in ("stage1", "finetune", "validation"):
        with pytest.raises(RuntimeError, match=leaked):
            check_bank_is_honest(bank(concatenate_datasets([data["memory"], data[leaked]])), data)


def test_bad_settings_are_refused_naming_the_flag():
    with pytest.raises(ValueError, match="--fractions"):
        check_run(FinetuneRunArguments(fractions=[0.2, 1.0]))
    with pytest.raises(ValueError, match="--learning-rates"):
        check_run(FinetuneRunArguments(learning_rates=[]))
    with pytest.raises(ValueError, match="--variant"):
        check_run(FinetuneRunArguments(variant="baseline"))
    with pytest.raises(ValueError, match="--n-finetune"):
        check_run(FinetuneRunArguments(n_finetune=0))
    from hf_ext.tinyalign.reproduce_finetune import main

    with pytest.raises(ValueError, match="--arms"):  # one arm decides nothing: only for logging a share of the cells
        main(["--finetune", "--arms", "variant"])


def test_summarise_rebuilds_results_from_the_logs_of_a_cut_short_run(tmp_path):
    """`--summarise`: stage-1 and stage-2 rows from several jobs.jsonl files (older logs have no `stage` key: stage 2),
    the first row of a cell winning; the result passes the results schema. No model is loaded."""
    from hf_ext.core.results_schema import validate_results
    from hf_ext.tinyalign.fashion import FASHION_DIR
    from hf_ext.tinyalign.reproduce_finetune import main

    if not (FASHION_DIR / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST (apt-get install dataset-fashion-mnist) is not installed")

    def s2(variant, seed, fraction, acc):
        return {
            "variant": variant,
            "seed": seed,
            "fraction": fraction,
            "learning_rate": 1e-3,
            "validation": {"loss": 1.0, "token_accuracy": acc},
            "test": {"loss": 1.0, "token_accuracy": acc},
        }

    first = [s2(v, s, f, 0.5 + 0.1 * f + 0.01 * s) for v in ("baseline", "k4") for s in (0, 1) for f in (0.4, 1.0)]
    second = [
        {
            "stage": 1,
            "variant": v,
            "seed": s,
            "validation": {"loss": 2.0, "token_accuracy": 0.3},
            "test": {"loss": 2.0, "token_accuracy": 0.3 + 0.01 * s},
        }
        for v in ("baseline", "k4")
        for s in (0, 1)
    ]
    second.append({"stage": 2, **s2("baseline", 0, 1.0, 0.0)})  # a duplicate cell: the first log's row wins
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in second))
    out = main(
        [
            "--finetune",
            "--summarise",
            str(tmp_path / "a.jsonl"),
            str(tmp_path / "b.jsonl"),
            "--seeds",
            "0",
            "1",
            "--fractions",
            "0.4",
            "1.0",
            "--learning-rates",
            "0.001",
            "--out",
            str(tmp_path / "out"),
            "--n-memory",
            "8",
            "--n-stage1",
            "8",
            "--n-finetune",
            "8",
            "--n-validation",
            "8",
            "--n-test",
            "8",
        ]
    )
    validate_results(json.loads((tmp_path / "out" / "results.json").read_text()))
    assert out["verdicts"]["finetune_premise"]["difference"]["per_pair"] == pytest.approx([0.3, 0.3])
    assert len(out["stage1"]) == 4 and len(out["stage2"]) == 8
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["subset"]["fractions"] == {"full": [0.2, 0.4, 0.6, 1.0], "run": [0.4, 1.0]}  # labelled in code
    assert "partial" not in saved  # every cell of the summarised grid is there


def test_a_shrunk_or_unfinished_grid_is_labelled_by_the_code():
    """The page's "labelled subset" and "stopped early" come from the run: the knobs below the default grid (more
    seeds are no subset, fewer are) and the cells no log holds."""
    from hf_ext.tinyalign.reproduce_finetune import missing_cells, subset_of

    assert subset_of(FinetuneRunArguments()) == {}
    run = FinetuneRunArguments(seeds=[0, 1, 2, 3, 4], fractions=[0.4, 1.0], n_finetune=120, threads=1, out="x")
    assert subset_of(run) == {"fractions": {"full": [0.2, 0.4, 0.6, 1.0], "run": [0.4, 1.0]},
                              "n_finetune": {"full": 240, "run": 120}}  # fmt: skip
    assert subset_of(FinetuneRunArguments(seeds=[0, 1]))["seeds"] == {"full": [0, 1, 2], "run": [0, 1]}
    run = FinetuneRunArguments(seeds=[0], fractions=[0.4, 1.0], learning_rates=[1e-3, 3e-3])
    stage1 = [{"variant": "baseline", "seed": 0}, {"variant": "k4", "seed": 0}]
    rows = [{"variant": v, "seed": 0, "fraction": f, "learning_rate": lr}
            for v in ("baseline", "k4") for f in (0.4, 1.0) for lr in (1e-3, 3e-3)]  # fmt: skip
    assert missing_cells(run, stage1, rows) == []
    cut = [r for r in rows if not (r["variant"] == "baseline" and r["fraction"] == 0.4)]
    assert missing_cells(run, stage1[1:], cut) == [
        "baseline seed 0 (stage 1)",
        "baseline seed 0 at 40% (rate 0.001, 0.003)",
    ]


@pytest.mark.parametrize("run", ["--finetune", "--pretrained"])
def test_paper_setting_runs_take_device_and_refuse_a_missing_gpu_at_the_door(run, monkeypatch, tmp_path):
    import torch

    from hf_ext.core.devices import DEVICE_ENV
    from hf_ext.tinyalign.reproduce import main

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --device cuda is accepted")
    with pytest.raises(ValueError, match="--device cuda: no CUDA device"):
        main([run, "--device", "cuda", "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())  # refused before anything was loaded or written
