"""Inner-split tuning of GPMFS: the objective weights alpha, beta, gamma, lam (coordinate search over the spec's grid
1e-3 ... 1e3) and the threshold theta per budget, scored by ML-kNN average precision on a held-out part of the
training data. Used by `hf-ext reproduce gpmfs` and `hf-ext gpmfs fit --tune`.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740). The spec says only "grid-search alpha, beta, gamma, lam in
{1e-3 ... 1e3}"; the full 7^4 = 2,401-point grid is out of any budget here, so the search is coordinate-wise [INF]:
starting from the [`GPMFSConfig`] defaults, each weight in turn takes the grid value that maximises the criterion
with the others fixed (`sweeps` passes). Each fit is cheap; theta and the budget only re-select from a fitted `W`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.model_selection import train_test_split

from .metrics import average_precision
from .mlknn import SplitScorer
from .selector import GPMFSSelector

SPEC_GRID = (1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)
HYPER = ("alpha", "beta", "gamma", "lam")
DEFAULTS = {"alpha": 1.0, "beta": 1.0, "gamma": 0.1, "lam": 1.0}


@dataclass
class TuneResult:
    """What [`tune`] chose: the weights and per-budget theta of GPMFS, the weights of the global-only arm, and the
    inner-validation criterion of every weight setting tried (`trials`: params tuple -> (criterion, criterion at
    theta = 1))."""

    params: dict[str, float]
    theta: dict[int, float]
    params_global: dict[str, float]
    inner_ap: dict[int, float]
    trials: dict[tuple, tuple[float, float]] = field(default_factory=dict)


def inner_split(X, Y, seed: int, test_size: float = 0.25):
    """A train/validation split of the training data; labels without positives on either side are dropped."""
    Xa, Xv, Ya, Yv = train_test_split(X, Y, test_size=test_size, random_state=seed)
    keep = (Ya.sum(axis=0) > 0) & (Yv.sum(axis=0) > 0) & (Ya.sum(axis=0) < len(Ya))
    if not keep.any():
        raise ValueError("y: no label has positives in both parts of the inner split; too few positives to tune")
    return Xa, Xv, Ya[:, keep], Yv[:, keep]


def tune(X, Y, budgets: list[int], thetas, hyper_grid: dict[str, tuple] | None = None, sweeps: int = 1,
         seed: int = 0, max_iter: int = 50) -> TuneResult:
    """Tunes the GPMFS weights (criterion: mean over `budgets` of the best-over-`thetas` inner AP) and, at the chosen
    weights, theta per budget; the global-only arm (theta = 1) gets its own weights by the same search.

    Args:
        X (`np.ndarray` of shape `(n, d)`), Y (`np.ndarray` of shape `(n, q)`): training data (not the test fold).
        budgets (`list[int]`): features per label.
        thetas (iterable of `float`): candidate thresholds (1.0 is global-only; ties keep the larger theta).
        hyper_grid (`dict`, *optional*): weight name -> candidate values; `None` or `{}` keeps the defaults.
        sweeps (`int`): passes of the coordinate search. seed (`int`): the inner split.
    """
    Xa, Xv, Ya, Yv = inner_split(X, Y, seed)
    scorer = SplitScorer(Xa, Ya, Xv)
    thetas = sorted({float(t) for t in thetas} | {1.0}, reverse=True)
    fitted: dict[tuple, dict] = {}

    def evaluate(params: dict[str, float]) -> dict:
        key = tuple(params[h] for h in HYPER)
        if key not in fitted:
            try:
                sel = GPMFSSelector(**params, budget=1, theta=1.0, max_iter=max_iter).fit(Xa, Ya)
            except ValueError as err:  # e.g. a gamma that makes the objective unbounded: not a candidate
                if "unbounded" not in str(err):
                    raise
                fitted[key] = {"per_budget": {}, "crit": -np.inf, "crit_global": -np.inf}
                return fitted[key]
            per_budget = {}
            for k in budgets:
                scores = {t: average_precision(Yv, scorer.predict_proba(
                    sel.with_selection(budget=k, theta=t).label_feature_sets())) for t in thetas}
                best_t = max(thetas, key=lambda t: (scores[t], t))  # ties: the larger theta
                per_budget[k] = (scores[best_t], best_t, scores[1.0])
            fitted[key] = {"per_budget": per_budget,
                           "crit": float(np.mean([v[0] for v in per_budget.values()])),
                           "crit_global": float(np.mean([v[2] for v in per_budget.values()]))}
        return fitted[key]

    def search(criterion: str) -> dict[str, float]:
        params = dict(DEFAULTS)
        best = evaluate(params)[criterion]
        for _ in range(sweeps):
            for name, values in (hyper_grid or {}).items():
                for v in values:
                    trial = {**params, name: float(v)}
                    c = evaluate(trial)[criterion]
                    if c > best + 1e-12:
                        best, params = c, trial
        return params

    params = search("crit")
    params_global = search("crit_global")
    chosen = evaluate(params)["per_budget"]
    return TuneResult(params=params, theta={k: chosen[k][1] for k in budgets}, params_global=params_global,
                      inner_ap={k: chosen[k][0] for k in budgets},
                      trials={k: (v["crit"], v["crit_global"]) for k, v in fitted.items()})
