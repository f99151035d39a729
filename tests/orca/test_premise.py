"""ORCA's premise check (issue 39): before any verdict on the shortcut generator, the MTL baseline must be harmed —
worse DT cross-entropy than the single-task model, or fewer moderate-bin predictions than the oracle — beyond the
seed spread at every s >= 2; otherwise every rule guarded by it reads *premise absent*."""

from __future__ import annotations

from hf_ext.core.reporting import paired_difference
from hf_ext.orca.report import premise_p, verdict


def _cells(harm: list[float], share_gap: list[float], s: float = 3.0) -> dict:
    cells = {}
    for seed, (h, g) in enumerate(zip(harm, share_gap)):

        def m(ce, share):
            return {"dt_ce": ce, "moderate_share_pred": share, "ctr_auc": 0.7, "dt_macro_f1": 0.3}

        cells[(s, seed, "single-task")] = {"shifted": m(1.0, 0.5), "iid": m(1.0, 0.5)}
        cells[(s, seed, "baseline")] = {"shifted": m(1.0 + h, 0.5 - g), "iid": m(1.0, 0.5)}
        cells[(s, seed, "oracle")] = {"shifted": m(0.8, 0.5), "iid": m(0.8, 0.5)}
        cells[(s, seed, "trivial")] = {"shifted": m(1.4, 0.5), "iid": m(1.4, 0.5)}
    return cells


def test_harm_beyond_the_spread_holds_the_premise():
    ok, detail = premise_p(_cells([0.05, 0.06, 0.07], [0, 0, 0]), [0.0, 3.0], [0, 1, 2])
    assert ok and "harmed" in detail


def test_collapse_of_the_moderate_bins_alone_holds_it():
    ok, _ = premise_p(_cells([-0.01, 0.0, 0.01], [0.10, 0.12, 0.11]), [3.0], [0, 1, 2])
    assert ok


def test_no_harm_or_harm_inside_the_spread_is_premise_absent():
    assert not premise_p(_cells([-0.02, -0.01, -0.03], [0, 0, 0]), [3.0], [0, 1, 2])[0]  # MTL helps: no premise
    assert not premise_p(_cells([0.05, -0.04, 0.01], [0.02, -0.03, 0.0]), [3.0], [0, 1, 2])[0]  # inside the spread
    assert premise_p(_cells([0.05], [0.1]), [3.0], [0])[0] is False  # one seed: no interval, no premise
    assert premise_p({}, [0.0, 1.0], [0, 1])[1] == "no strength >= 2 was run"


def test_the_overall_verdict_is_premise_absent_when_p_fails():
    cells = _cells([-0.02, -0.01, -0.03], [0, 0, 0])
    for seed in range(3):  # ORCA rows, so the rules have something to decide
        cells[(3.0, seed, "orca")] = cells[(3.0, seed, "baseline")]
    diffs = {"orca vs baseline @ s=3": {"pair": ("baseline", "orca"), "strength": 3.0,
                                         "ce_gain": paired_difference([1.0, 1.0, 1.0], [0.9, 0.95, 0.92]),
                                         "auc_change": None}}  # fmt: skip
    lines, verdicts = verdict(cells, diffs, [3.0], [0, 1, 2])
    assert any(line.startswith("P: ") and "premise absent" in line for line in lines)
    overall = verdicts[-1]
    assert overall.verdict == "premise absent" and "P failed" in overall.reason
    gain = next(v for v in verdicts if v.claim.startswith("ORCA lowers"))
    assert gain.verdict == "premise absent"


def test_the_premise_is_read_on_the_families_test_set():
    """The reliance family judges on the i.i.d. test: harm there holds the premise with `test="iid"` only."""
    cells = _cells([0.0, 0.0, 0.0], [0, 0, 0])
    for seed, h in enumerate([0.05, 0.06, 0.07]):
        cells[(3.0, seed, "baseline")]["iid"]["dt_ce"] = 1.0 + h
    assert premise_p(cells, [3.0], [0, 1, 2], test="iid")[0]
    assert not premise_p(cells, [3.0], [0, 1, 2], test="shifted")[0]
