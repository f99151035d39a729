"""`hf-ext reproduce tba` end to end at toy scale: the results JSON has every attack in every regime with a seed
spread and paired per-image differences, budgets are matched, the victims' held-out errors sit beside the
prior-mean predictor's, and the grid is written (numbers are reported, not asserted)."""

from __future__ import annotations

import json

import pytest

from hf_ext.core.pretrained import efficientnet_lite0_available
from hf_ext.core.reporting import VERDICTS
from hf_ext.tba.reproduce import BASELINES, METRICS, REGIMES, main

TOY = ["--num-train", "48", "--num-eval", "8", "--victim-input-size", "64", "--vae-epochs", "0.5", "--num-test", "3",
       "--steps", "2", "--seeds", "0", "1", "--reference-steps", "3"]  # fmt: skip


@pytest.mark.skipif(not efficientnet_lite0_available(), reason="EfficientNet-Lite0 weights not installed")
def test_reproduce_writes_all_attacks_in_all_regimes(tmp_path):
    out = tmp_path / "run"
    results = main([*TOY, "--out", str(out)])
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["summary"].keys() == results["summary"].keys()
    assert (out / "grid.png").stat().st_size > 0
    summary = results["summary"]
    attacks = {"clean", "fgsm", "pgd", "mifgsm", "tba", "tba_vae_only", "tba_controlnet_only",
               "tba_no_generator_grad", "pgd_3_steps"}  # fmt: skip
    for regime in REGIMES:
        assert attacks <= set(summary[regime]), regime
        for name in attacks - {"clean"}:
            for m in METRICS:
                entry = summary[regime][name][f"{m}_increase_pct"]
                assert len(entry["values"]) == 2 and entry["std"] >= 0
        assert set(summary[regime]["tba_improvement_pct"]) == set(BASELINES) | {"pgd_3_steps"}
        pairs = summary[regime]["tba_minus_paired"]
        assert set(pairs) == attacks - {"clean", "tba"} and all(d["n"] == 6 for d in pairs.values())
        lo, hi = pairs["pgd"]["ci95_mm"]  # a paired bootstrap interval around the mean difference
        assert lo <= pairs["pgd"]["mean_mm"] <= hi
        assert on_disk["summary"][regime]["verdict_vs_pgd"]["verdict"] in VERDICTS
    assert set(summary["ssim"]) == attacks - {"clean"} and all(0 < v["mean"] <= 1 for v in summary["ssim"].values())
    evals = results["victim_gradient_evaluations"]
    assert evals["fgsm"] == 1 and evals["pgd"] == evals["mifgsm"] == evals["tba"] == evals["tba_vae_only"] == 2
    assert evals["pgd_3_steps"] == 3
    victims = results["victims"]
    assert {"victim_a", "victim_b", "prior_mean_predictor"} <= set(victims)
    assert victims["victim_a"]["curve"][-1]["num_train"] == 48
    record = json.loads((next(out.glob("artifacts-*")) / "victim_a" / "training_record.json").read_text())
    assert {m["type"] for m in record["metrics"]} >= {"mpjpe", "pa_mpjpe", "pve", "prior_mean_mpjpe"}
    # Cached artifacts are reused on a second run with the same training arguments.
    again = main([*TOY[:-7], "--steps", "1", "--seeds", "0", "--reference-steps", "1", "--eps", "0.02", "0.04",
                  "--out", str(out)])  # fmt: skip
    assert again["artifacts_cached"] and set(again["by_eps"]) == {"5.1/255", "10.2/255"}
    assert "tuning" not in again and not again["setting"]["tuned"]  # quick scale: every arm at its defaults
    # --resume keeps the budget that run finished (read back, not attacked again) and attacks only the new one.
    from hf_ext.tba import reproduce

    attacked = []
    real_run_seed = reproduce.run_seed
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reproduce, "run_seed", lambda seed, eps, *a: attacked.append(eps) or real_run_seed(seed, eps, *a))
        resumed = main([*TOY[:-7], "--steps", "1", "--seeds", "0", "--reference-steps", "1", "--eps", "0.02", "0.06",
                        "--resume", "--out", str(out)])  # fmt: skip
    assert attacked == [0.06] and set(resumed["by_eps"]) == {"5.1/255", "15.3/255"}
    assert resumed["by_eps"]["5.1/255"]["per_seed"] == json.loads(json.dumps(again["by_eps"]["5.1/255"]["per_seed"]))
    assert resumed["resumed"]["earlier_wall_time_s"] > 0
    assert resumed["by_eps"]["5.1/255"]["timings_s"] == again["by_eps"]["5.1/255"]["timings_s"]  # kept per budget
    with pytest.raises(ValueError, match="--resume .* seeds"):  # another setting's budgets are not comparable
        main([*TOY[:-7], "--steps", "1", "--seeds", "1", "--reference-steps", "1", "--eps", "0.02", "--resume",
              "--out", str(out)])  # fmt: skip


@pytest.mark.skipif(not efficientnet_lite0_available(), reason="EfficientNet-Lite0 weights not installed")
def test_tuned_reproduction_records_the_chosen_settings_and_the_time_matched_pgd(tmp_path):
    """--tune: every arm tuned with a 4-point grid on the tuning split, the chosen values in results.json, the
    wall-time-matched PGD spending the steps the tuning split's timings gave it, and its verdicts."""
    from hf_ext.tba.tuning import GRIDS

    out = tmp_path / "run"
    results = main([*TOY[:-7], "--steps", "2", "--seeds", "0", "1", "--reference-steps", "3", "--tune",
                    "--num-tune", "2", "--out", str(out)])  # fmt: skip
    tuning = results["tuning"]["8/255"]
    assert {arm: len(rows) for arm, rows in tuning["grid"].items()} == {arm: 4 for arm in GRIDS}
    for arm, rows in tuning["grid"].items():
        assert tuning["chosen"][arm] == max(rows, key=lambda r: r["mpjpe_mm"])["config"]
    matched = tuning["time_matched_pgd_steps"]
    assert matched >= 2 and results["victim_gradient_evaluations"]["pgd_time_matched"] == matched
    white = results["summary"]["white_box"]
    assert "pgd_time_matched" in white["tba_minus_paired"]
    assert white["verdict_vs_pgd_time_matched"].verdict in VERDICTS
    assert set(white["tba_improvement_pct"]) == set(BASELINES) | {"pgd_3_steps"}  # the reference stays last
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["tuning"]["8/255"]["chosen"] == tuning["chosen"] and on_disk["setting"]["tuned"]


@pytest.mark.skipif(not efficientnet_lite0_available(), reason="EfficientNet-Lite0 weights not installed")
def test_a_run_stopped_while_the_dhng_trains_keeps_its_victims(tmp_path, monkeypatch):
    from hf_ext.tba import train
    from hf_ext.tba.train import TbaTrainingArguments

    args = TbaTrainingArguments(num_train=24, num_eval=6, victim_input_size=64, vae_epochs=0.25, denoiser_epochs=0.25)
    trained = []
    real_victim, real_dhng = train.train_efficientnet_victim, train.train_dhng
    monkeypatch.setattr(train, "train_efficientnet_victim", lambda *a, **k: trained.append(1) or real_victim(*a, **k))

    def stopped(*a, **k):
        raise KeyboardInterrupt("stopped while the DHNG trains")

    monkeypatch.setattr(train, "train_dhng", stopped)
    with pytest.raises(KeyboardInterrupt):
        train.train_all(args, tmp_path, reuse_victims=True)
    assert len(trained) == 2 and not (tmp_path / "training.json").exists()
    monkeypatch.setattr(train, "train_dhng", real_dhng)
    meta = train.train_all(args, tmp_path, reuse_victims=True)
    assert len(trained) == 2  # both victims kept, only the DHNG trained
    assert meta["victims"]["victim_a"]["eval"] == json.loads((tmp_path / "victim_a.record.json").read_text())[
        "record"]["eval"]  # fmt: skip
    train.train_all(args, tmp_path)  # the default (and --retrain): everything trains again
    assert len(trained) == 4
    other = TbaTrainingArguments(**{**vars(args), "num_train": 30})
    train.train_all(other, tmp_path, reuse_victims=True)  # other arguments: the saved victims are not theirs
    assert len(trained) == 6
