"""The pretrained run's bookkeeping (no model is loaded): variant parsing and the paired summary."""

import pytest

from hf_ext.tinyalign.reproduce_pretrained import format_table, summarise, variant_kwargs


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


def _job(variant, seed, test_loss, acc, fraction=1.0, losses=(3.0, 2.0, 1.0, 1.0, 1.0, 1.0)):
    return {
        "variant": variant,
        "seed": seed,
        "fraction": fraction,
        "losses": list(losses),
        "metrics": {
            "test_loss": test_loss,
            "token_accuracy": acc,
            "final_train_loss": losses[-1],
            "class_word_accuracy": 0.0,
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
    s = summarise(jobs)
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
    s = summarise(jobs)
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
    assert summarise(jobs)["verdict"]["k4"].startswith("inconclusive")
    jobs[3]["metrics"]["test_loss"] = 2.1 + 0.3  # seed 0 +0.5, seed 1 +0.3: interval [-2.0, +2.8] spans 0
    assert summarise(jobs)["verdict"]["k4"].startswith("inconclusive")  # the old sign rule said "refuted" here
    jobs[2]["metrics"]["test_loss"], jobs[3]["metrics"]["test_loss"] = 3.0, 3.2  # +1.0 in both seeds
    assert summarise(jobs)["verdict"]["k4"].startswith("refuted")


def test_summarise_without_a_run_names_the_missing_log(tmp_path):
    from hf_ext.tinyalign.reproduce_pretrained import main

    with pytest.raises(FileNotFoundError, match="jobs.jsonl"):
        main(["--summarise", "--out", str(tmp_path)])
