"""The GPMFS verdict (issue 39): equal tuning budgets chosen on validation only, the rules' decisions on constructed
results (Friedman gate, Nemenyi interval, premises), and a tiny end-to-end `--verdict` run."""

import json

import numpy as np
import pytest

from hf_ext.gpmfs import reproduce as R
from hf_ext.gpmfs import reproduce_verdict as V
from hf_ext.gpmfs.grids import COMPARED, GRID_SIZE, GRIDS, FamilyCache
from hf_ext.gpmfs.planted import make_planted


def test_every_compared_selector_has_the_same_grid_size_and_ablations_restrict_gpmfs():
    assert {len(GRIDS[m]) for m in COMPARED} == {GRID_SIZE}
    gp = [tuple(sorted(c.items())) for c in GRIDS["gpmfs"]]
    for ablation in ("gpmfs_global", "gpmfs_corr", "gpmfs_no_corr"):
        assert {tuple(sorted(c.items())) for c in GRIDS[ablation]} < set(gp)
    assert all(c["theta"] == 1.0 for c in GRIDS["gpmfs_global"])
    assert {c["rho"] for c in GRIDS["gpmfs_no_corr"]} == {0.0} and 0.0 not in {c["rho"] for c in GRIDS["gpmfs_corr"]}


def test_family_sets_have_the_budget_and_differ_across_a_grid(small):
    cache = FamilyCache(small.X, small.Y, k_max=6, seed=0)
    for arm in ("gpmfs", "ftest", "rfs", "lrfs", "scls", "random"):
        per_cfg = [cache.sets(arm, cfg)(4) for cfg in GRIDS[arm]]
        assert all(len(sets) == small.Y.shape[1] and all(len(s) == 4 for s in sets) for sets in per_cfg), arm
        assert len({tuple(map(tuple, sets)) for sets in per_cfg}) > 1, f"{arm}: the grid changes nothing"
    with pytest.raises(ValueError, match="selector"):
        cache.sets("mifs", {})


def test_tuning_reads_validation_never_test():
    data = make_planted(n_samples=400, seed=0)
    Xtr, Ytr, Xte, Yte = data.X[:300], data.Y[:300], data.X[300:], data.Y[300:]
    arms = ("gpmfs", "ftest", "random")
    a = V.run_split(Xtr, Ytr, Xte, Yte, [10, 30], seed=0, arms=arms)
    rng = np.random.default_rng(1)
    b = V.run_split(Xtr, Ytr, rng.normal(size=Xte.shape), 1 - Yte, [10, 30], seed=0, arms=arms)
    assert a["chosen"] == b["chosen"] and a["validation_ap"] == b["validation_ap"]
    assert a["metrics"]["gpmfs"][10] != b["metrics"]["gpmfs"][10]  # the test data does reach the scores
    for arm in arms:
        for k in (10, 30):
            assert a["chosen"][arm][k] in GRIDS[arm]
    assert set(a["metrics"]) == {*arms, "all", "prior"}


def _fake_dataset(means: dict, informative=True, budgets=("10%", "30%", "50%"), runs=3, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    arms = [*V.ARMS, *V.REFERENCES]
    results = {}
    for m in arms:
        results[m] = {}
        for i, b in enumerate(budgets):
            mu = means.get(m, 0.5) + 0.01 * i
            vals = list(mu + noise * rng.normal(size=runs))
            results[m][b] = {
                met: {"mean": float(np.mean(vals)), "sd": 0.0, "n": runs, "values": vals} for met in V.METRICS
            }
    return {"informative": {"name": "x", "passed": informative, "detail": ""}, "results": results}


def _control(passed=True):
    return {"premise": {"name": "planted positive control", "passed": passed, "detail": "d"}}


def test_decide_confirms_a_dominant_gpmfs_and_refutes_a_dominated_one():
    strong = {"gpmfs": 0.9, "gpmfs_global": 0.6, "gpmfs_corr": 0.9, "gpmfs_no_corr": 0.6}
    data = {f"d{i}": _fake_dataset(strong, budgets=[f"{p}%" for p in range(10, 60, 5)]) for i in range(3)}
    verdicts, tables = V.decide(data, _control())
    by = {v.claim: v for v in verdicts}
    assert tables["friedman"]["average_precision"]["rejects"]
    assert by[V.RULES["rank"].claim].verdict == "confirmed"  # rank 1 everywhere: beyond the Nemenyi CD
    assert by[V.RULES["ftest"].claim].verdict == "confirmed"
    assert by[V.RULES["personal"].claim].verdict == "confirmed"
    assert by[V.RULES["correlation"].claim].verdict == "confirmed"
    weak = {"gpmfs": 0.1, "gpmfs_global": 0.3}
    data = {f"d{i}": _fake_dataset(weak, budgets=[f"{p}%" for p in range(10, 60, 5)]) for i in range(3)}
    by = {v.claim: v for v in V.decide(data, _control())[0]}
    assert by[V.RULES["rank"].claim].verdict == "refuted"
    assert by[V.RULES["personal"].claim].verdict == "refuted"


def test_decide_inconclusive_without_friedman_rejection_and_premises():
    noisy = {f"d{i}": _fake_dataset({}, noise=0.05, seed=i) for i in range(2)}
    verdicts, tables = V.decide(noisy, _control())
    rank = next(v for v in verdicts if v.claim == V.RULES["rank"].claim)
    assert not tables["friedman"]["average_precision"]["rejects"]  # equal means, noise only
    assert rank.verdict == "inconclusive" and "Friedman does not reject" in rank.reason
    # only one informative data set: every rule's premise fails
    one = {"a": _fake_dataset({"gpmfs": 0.9}), "b": _fake_dataset({"gpmfs": 0.9}, informative=False)}
    assert {v.verdict for v in V.decide(one, _control())[0]} == {"premise absent"}
    # a failed positive control voids only the personal-feature rule
    two = {"a": _fake_dataset({"gpmfs": 0.9}), "b": _fake_dataset({"gpmfs": 0.9})}
    by = {v.claim: v.verdict for v in V.decide(two, _control(passed=False))[0]}
    assert by[V.RULES["personal"].claim] == "premise absent"
    assert by[V.RULES["ftest"].claim] != "premise absent"


def test_tiny_verdict_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(V.SCALES, "verdict", {"folds": 2, "repeats": 1, "budgets": (0.3,), "planted_seeds": 2})
    res = R.main(["--verdict", "--datasets", "flare,digits", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    # the rules are printed before the first data set runs
    assert out.index("[rule] GPMFS ranks ahead") < out.index("flare:") < out.index("verdicts (rules stated")
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["mode"] == "verdict" and stored["environment"]["date"]
    assert len(stored["verdicts"]) == len(V.RULES)
    assert {v["verdict"] for v in stored["verdicts"]} <= {"confirmed", "refuted", "inconclusive", "premise absent"}
    digits = stored["datasets"]["digits"]
    assert digits["informative"]["passed"] and not stored["datasets"]["flare"]["informative"]["passed"]
    for arm in (*COMPARED, "gpmfs_global", "gpmfs_corr", "gpmfs_no_corr"):
        assert len(digits["chosen"][arm]["30%"]) == 2 and digits["chosen"][arm]["30%"][0] in GRIDS[arm]
    assert set(digits["results"]["gpmfs"]["30%"]) == set(V.METRICS)
    # one informative data set: the premise of every rule is absent (an honest outcome, not a crash)
    assert {v["verdict"] for v in stored["verdicts"]} == {"premise absent"}
    assert (tmp_path / "artifact" / "config.json").exists()
    assert res["verdict_tables"]["informative"] == ["digits"]
    md = V.format_verdict_markdown(stored)
    assert "| digits | 30% |" in md and "premise absent" in md
    R.main(["--markdown", str(tmp_path / "results.json")])
    assert "| flare | 30% |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="exclusive"):
        R.main(["--full", "--verdict"])


def test_theta_strictly_inside_0_1_changes_the_tuned_family_sets(planted):
    # the GPMFS grid's interior thetas must select different per-label sets from each other and from theta = 1,
    # or tuning theta would be tuning nothing (issue 39: "theta in (0, 1) barely acts")
    cache = FamilyCache(planted.X, planted.Y, k_max=20, seed=0)
    sets = {t: cache.sets("gpmfs", {"rho": 0.0, "theta": t})(20) for t in (0.4, 0.7, 1.0)}
    as_tuples = {t: tuple(map(tuple, s)) for t, s in sets.items()}
    assert len(set(as_tuples.values())) == 3
    assert len({tuple(s) for s in sets[1.0]}) == 1  # theta = 1: one global set for every label
    assert len({tuple(s) for s in sets[0.4]}) > 1  # theta = 0.4: label-specific sets
