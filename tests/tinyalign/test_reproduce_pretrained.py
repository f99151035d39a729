"""The pretrained run's bookkeeping (no model is loaded): variant parsing and the paired summary."""

import pytest

from hf_ext.tinyalign.report_pretrained import format_table
from hf_ext.tinyalign.reproduce_pretrained import summarise, variant_kwargs

# image-blind references as `constant_references` returns them (the premise compares the baseline to the first)
REFS = {
    "majority_class": "tshirt",
    "majority_class_word_accuracy": 0.1,
    "best_constant_caption": "a light narrow trouser , small",
    "best_constant_caption_test_bleu": 13.9,
    "best_constant_caption_class_word_accuracy": 0.09,
}


def test_variant_kwargs():
    assert variant_kwargs("baseline", 8) == {"use_retrieval": False}
    assert variant_kwargs("k4", 8) == {
        "use_retrieval": True,
        "memory_top_k": 4,
        "value_num_latents": 8,
        "query_includes_answer": False,
    }
    assert variant_kwargs("released-k1", 4)["query_includes_answer"] is True
    with pytest.raises(ValueError, match="variant must be baseline"):
        variant_kwargs("retrieval", 8)


def _job(variant, seed, test_loss, acc, fraction=1.0, losses=(3.0, 2.0, 1.0, 1.0, 1.0, 1.0), class_word=None):
    return {
        "variant": variant,
        "seed": seed,
        "fraction": fraction,
        "losses": list(losses),
        "metrics": {
            "test_loss": test_loss,
            "token_accuracy": acc,
            "final_train_loss": losses[-1],
            "class_word_accuracy": 0.5 + 0.01 * seed if class_word is None else class_word,
            "bleu": 0.0,
        },
    }


def test_summary_pairs_by_seed_and_reports_data_efficiency():
    jobs = [
        _job("baseline", 0, 2.0, 0.5),
        _job("baseline", 1, 3.0, 0.4),
        _job("k4", 1, 2.5, 0.45),
        _job("k4", 0, 1.0, 0.7, losses=(1.0,) * 6),
        _job("baseline", 0, 2.5, 0.3, fraction=0.5),
    ]
    s = summarise(jobs, REFS)
    paired = s["rows"]["k4"]["paired_minus_baseline"]
    assert paired["test_loss"] == pytest.approx([-0.5, -1.0])  # seed 1 then seed 0, each against its own seed
    assert paired["token_accuracy"] == pytest.approx([0.05, 0.2])
    # mean ± sample SD (ddof = 1): [2.0, 3.0] -> 0.5 * sqrt(2)
    assert s["rows"]["baseline"]["test_loss"] == {"mean": 2.5, "std": pytest.approx(0.5**0.5), "n": 2}
    assert s["rows"]["k4"]["steps_to_baseline_final_loss"] == [None, 5]
    assert s["data_efficiency_token_accuracy"]["baseline"] == {"1.0": pytest.approx(0.45), "0.5": 0.3}
    table = format_table(s)
    assert "k4 | 2 |" in table and "-0.500,-1.000" in table and "50% 0.300" in table


def test_data_efficiency_match_curve_and_verdict():
    jobs = [
        _job("baseline", 0, 2.0, 0.60),
        _job("baseline", 1, 2.2, 0.62),
        _job("k4", 0, 1.9, 0.63),
        _job("k4", 1, 2.1, 0.65),
        _job("k4", 0, 2.5, 0.55, fraction=0.2),
        _job("k4", 1, 2.5, 0.57, fraction=0.2),
        _job("k4", 0, 2.2, 0.61, fraction=0.4),
        _job("k4", 1, 2.2, 0.63, fraction=0.4),
        _job("baseline", 0, 2.6, 0.50, fraction=0.4),
        _job("baseline", 1, 2.6, 0.52, fraction=0.4),
    ]
    s = summarise(jobs, REFS)
    eff = s["data_efficiency"]
    assert eff["k4"]["reaches_baseline_full_at"] == 0.4  # 0.62 >= 0.61 (the baseline's 100 % mean); 0.2 gives 0.56
    assert eff["baseline"]["reaches_baseline_full_at"] == 1.0
    sd = pytest.approx(0.02**0.5 / 10)  # sample SD of [0.55, 0.57]
    assert eff["k4"]["token_accuracy"]["0.2"] == {"mean": pytest.approx(0.56), "std": sd, "n": 2}
    # paired k4 - baseline: test CE -0.1, -0.1 and token accuracy +0.03, +0.03 (both intervals exclude 0)
    assert s["verdict"]["k4"].startswith("confirmed")
    assert s["verdict"]["paired_test_ce"]["mean"] == pytest.approx(-0.1)
    assert s["verdict"]["data_efficiency"]["fraction"] == 0.2  # k4 at 20 % is 0.05 below the baseline: refuted
    assert s["verdict"]["data_efficiency"]["verdict"] == "refuted"
    assert s["loss_curve"]["k4"] == {"1": 3.0}  # 6-step curves: only step 1 is listed; the 5-step mean ending there
    assert "k4 reaches the baseline's 100 % token accuracy at: 40% of the train split" in format_table(s)
    jobs[2]["metrics"]["test_loss"] = 2.5  # seed 0 now worse than its baseline on test CE, seed 1 better
    assert summarise(jobs, REFS)["verdict"]["k4"].startswith("inconclusive")
    jobs[3]["metrics"]["test_loss"] = 2.1 + 0.3  # seed 0 +0.5, seed 1 +0.3: interval [-2.0, +2.8] spans 0
    assert summarise(jobs, REFS)["verdict"]["k4"].startswith("inconclusive")  # the old sign rule said "refuted" here
    jobs[2]["metrics"]["test_loss"], jobs[3]["metrics"]["test_loss"] = 3.0, 3.2  # +1.0 in both seeds
    assert summarise(jobs, REFS)["verdict"]["k4"].startswith("refuted")


def _efficiency_jobs():
    return [
        _job("baseline", 0, 2.0, 0.60),
        _job("baseline", 1, 2.2, 0.62),
        _job("baseline", 2, 2.1, 0.61),
        _job("k4", 0, 1.9, 0.63),
        _job("k4", 1, 2.1, 0.65),
        _job("k4", 2, 2.0, 0.62),
        _job("released-k4", 0, 2.0, 0.60),
        _job("released-k4", 1, 2.2, 0.62),
        _job("released-k4", 2, 2.1, 0.61),
        *(_job("k4", s, 2.5, 0.55 + 0.01 * s, fraction=0.2) for s in range(3)),
        *(_job("baseline", s, 2.6, 0.50 + 0.01 * s, fraction=0.2) for s in range(3)),
    ]


def test_a_baseline_that_learned_nothing_leaves_every_claim_premise_absent():
    jobs = _efficiency_jobs()
    s = summarise(jobs, REFS)
    assert s["verdict"]["decisions"]["premise"]["verdict"] == "confirmed"  # 0.50-0.52 vs the majority's 0.10
    assert s["verdict"]["decisions"]["test_ce"]["verdict"] == "confirmed"
    for j in jobs:  # the baseline's class-word accuracy at the training-majority class's: no premise
        if j["variant"] == "baseline" and j["fraction"] == 1.0:
            j["metrics"]["class_word_accuracy"] = 0.1 + 0.01 * (j["seed"] - 1)
    v = summarise(jobs, REFS)["verdict"]
    assert v["decisions"]["premise"]["verdict"] == "inconclusive"
    assert {k: d["verdict"] for k, d in v["decisions"].items() if k != "premise"} == {
        "test_ce": "premise absent",
        "token_accuracy": "premise absent",
        "data_efficiency": "premise absent",
    }
    assert v["k4"].startswith("premise absent")


def test_results_json_is_in_the_rendered_schema_and_summarise_rebuilds_it(tmp_path):
    """The run writes `results.json` the docs render (rules, verdicts, tables); `--summarise` rebuilds the same
    verdicts from `jobs.jsonl` and `references.json` alone."""
    import json

    from hf_ext.core.reporting import write_results
    from hf_ext.core.results_render import load_results, render_section
    from hf_ext.tinyalign.reproduce_pretrained import PretrainedRunArguments, main, write_run_results

    run = PretrainedRunArguments(out=str(tmp_path), fractions=[0.2, 1.0], variants=["baseline", "k4", "released-k4"])
    jobs = [{**j, "steps": 6, "seconds": {"train": 1.0}} for j in _efficiency_jobs()]
    written = write_run_results(run, jobs, REFS, {"train": 600, "test": 100}, seconds=12.0)
    results = load_results(tmp_path / "results.json")  # validates the schema
    assert [v["verdict"] for v in results["verdicts"]] == ["confirmed", "confirmed", "inconclusive", "refuted"]
    assert results["scale"] == "pretrained"
    assert results["command"].endswith("--pretrained --variants baseline k4 released-k4 --fractions 0.2 1.0")
    section = render_section(results, source="docs/results/tinyalign/pretrained/results.json")
    assert "training-majority class | tshirt | 0.100" in section
    assert "| k4 | class-word acc | 0.510±0.010 | 0.510±0.010 |" in section  # 20 % and 100 % columns
    assert "| k4 | 3 | 1.000±0.000 | 2.000±0.100 | 0.633±0.015 |" in section
    assert "| -0.100, -0.100, -0.100 | +0.030, +0.030, +0.010 |" in section  # k4's Δs, per seed (seeds 0, 1, 2)
    with pytest.raises(FileNotFoundError, match="jobs.jsonl"):
        main(["--summarise", "--out", str(tmp_path)])
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps(j) + "\n" for j in jobs))
    with pytest.raises(FileNotFoundError, match="references.json"):
        main(["--summarise", "--out", str(tmp_path)])
    write_results(tmp_path / "references.json", {"references": REFS, "data_sizes": {"train": 600, "test": 100}})
    again = main(["--summarise", "--out", str(tmp_path), "--fractions", "0.2", "1.0"])
    assert again["verdicts"] == written["verdicts"] and again["report"] == written["report"]
    assert again["summarised_from"].endswith("jobs.jsonl")
