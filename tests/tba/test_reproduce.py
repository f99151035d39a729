"""`hf-ext reproduce tba` end to end at toy scale: the results JSON has every attack in every regime with a seed
spread, budgets are matched, and the grid is written (numbers are reported, not asserted)."""

from __future__ import annotations

import json

from hf_ext.tba.reproduce import BASELINES, METRICS, REGIMES, main


def test_reproduce_writes_all_attacks_in_all_regimes(tmp_path):
    out = tmp_path / "run"
    main(["--num-train", "64", "--victim-epochs", "1", "--vae-epochs", "0.5", "--num-test", "3", "--steps", "2",
          "--seeds", "0", "1", "--reference-steps", "3", "--out", str(out)])  # fmt: skip
    results = json.loads((out / "results.json").read_text())
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
    evals = results["victim_gradient_evaluations"]
    assert evals["fgsm"] == 1 and evals["pgd"] == evals["mifgsm"] == evals["tba"] == evals["tba_vae_only"] == 2
    assert evals["pgd_3_steps"] == 3
    # Cached artifacts are reused on a second run with the same training arguments.
    again = main(["--num-train", "64", "--victim-epochs", "1", "--vae-epochs", "0.5", "--num-test", "3", "--steps",
                  "1", "--seeds", "0", "--reference-steps", "1", "--out", str(out)])  # fmt: skip
    assert again["artifacts_cached"]
