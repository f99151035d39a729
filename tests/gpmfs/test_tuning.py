"""Inner-split tuning: the cached split scorer equals ML-kNN, and the coordinate search picks the inner optimum."""

import numpy as np
import pytest

from hf_ext.gpmfs.mlknn import MLkNN, SplitScorer
from hf_ext.gpmfs.tuning import DEFAULTS, tune


def test_split_scorer_equals_mlknn(small):
    X, Y = small.X, small.Y
    lo, span = X[:80].min(axis=0), np.ptp(X[:80], axis=0)
    scorer = SplitScorer(X[:80], Y[:80], X[80:])
    subsets = [np.array([0, 1, 2]), np.array([3, 4]), np.array([0, 1, 2])]
    for sets in (subsets, None):
        ref = MLkNN(k=10, algorithm="brute").fit((X[:80] - lo) / span, Y[:80], sets).predict_proba((X[80:] - lo) / span)
        np.testing.assert_allclose(scorer.predict_proba(sets), ref)
    assert len(scorer._cache) == 3  # two distinct subsets and "all": the repeated subset is searched once


def test_coordinate_search_keeps_the_best_inner_criterion(small):
    grid = {"lam": (1e-3, 1e3), "gamma": (1e-3,)}
    res = tune(small.X, small.Y, [4], (0.3, 1.0), grid, sweeps=1, seed=0, max_iter=10)
    crit = {k: v[0] for k, v in res.trials.items()}
    chosen = tuple(res.params[h] for h in ("alpha", "beta", "gamma", "lam"))
    # 1 start + 2 lam values + 1 gamma value (at the best lam), all scored; the winner is their maximum
    assert len(crit) == 4 and crit[chosen] == max(crit.values())
    assert res.theta[4] in (0.3, 1.0) and res.inner_ap[4] == pytest.approx(crit[chosen])
    assert set(res.params) == set(DEFAULTS)
    # no grid: the defaults
    assert tune(small.X, small.Y, [4], (1.0,), None, max_iter=5).params == DEFAULTS


def test_diverging_weights_are_skipped_not_chosen():
    from hf_ext.gpmfs.planted import make_planted

    data = make_planted(n_samples=80, n_features=100, n_shared=4, n_labels=3, n_private=2, seed=0)
    res = tune(data.X, data.Y, [10], (1.0,), {"gamma": (0.0, 1e3)}, max_iter=50)
    assert res.params["gamma"] != 1e3
    assert (1.0, 1.0, 1e3, 1.0) in res.trials and res.trials[(1.0, 1.0, 1e3, 1.0)][0] == -np.inf
