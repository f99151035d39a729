"""Inner-split tuning of GPMFS: the objective weights alpha, beta, gamma, lam (coordinate search over the spec's grid
1e-3 ... 1e3) and the threshold theta per budget, scored by ML-kNN average precision on a held-out part of the
training data. Used by `hf-ext reproduce gpmfs` and `hf-ext train gpmfs --tune`.

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


def tune(
    X,
    Y,
    budgets: list[int],
    thetas,
    hyper_grid: dict[str, tuple] | None = None,
    sweeps: int = 1,
    seed: int = 0,
    max_iter: int = 50,
    search_thetas=None,
    search_budgets: list[int] | None = None,
) -> TuneResult:
    """Tunes the GPMFS weights (criterion: mean over the search budgets of the best-over-thetas inner AP) and, at the
    chosen weights, theta per budget over all `thetas`; the global-only arm (theta = 1) gets its own weights by the
    same search.

    Args:
        X (`np.ndarray` of shape `(n, d)`), Y (`np.ndarray` of shape `(n, q)`): training data (not the test fold).
        budgets (`list[int]`): features per label.
        thetas (iterable of `float`): candidate thresholds (1.0 is always added: global-only; ties keep the larger).
        hyper_grid (`dict`, *optional*): weight name -> candidate values; `None` or `{}` keeps the defaults.
        sweeps (`int`): passes of the coordinate search. seed (`int`): the inner split.
        search_thetas, search_budgets (*optional*): a coarser theta grid and fewer budgets for the weight search
            (the budget of the search); `None` uses `thetas` / `budgets`.
    """
    Xa, Xv, Ya, Yv = inner_split(X, Y, seed)
    scorer = SplitScorer(Xa, Ya, Xv)
    thetas = sorted({float(t) for t in thetas} | {1.0}, reverse=True)
    s_thetas = thetas if search_thetas is None else sorted({float(t) for t in search_thetas} | {1.0}, reverse=True)
    s_budgets = budgets if search_budgets is None else list(search_budgets)
    fits: dict[tuple, object] = {}
    scores: dict[tuple, dict[tuple[int, float], float]] = {}

    def ap(params: dict[str, float], k: int, t: float) -> float:
        key = tuple(params[h] for h in HYPER)
        if key not in fits:
            try:
                fits[key] = GPMFSSelector(**params, budget=1, theta=1.0, max_iter=max_iter).fit(Xa, Ya)
            except ValueError as err:  # e.g. a gamma that makes the objective unbounded: not a candidate
                if "unbounded" not in str(err):
                    raise
                fits[key] = None
            scores[key] = {}
        if fits[key] is None:
            return -np.inf
        if (k, t) not in scores[key]:
            sets = fits[key].with_selection(budget=k, theta=t).label_feature_sets()
            scores[key][(k, t)] = average_precision(Yv, scorer.predict_proba(sets))
        return scores[key][(k, t)]

    def best_theta(params, k, grid) -> tuple[float, float]:
        return max(((ap(params, k, t), t) for t in grid), key=lambda v: (v[0], v[1]))  # ties: the larger theta

    def criterion(params, global_only: bool) -> float:
        return float(
            np.mean([ap(params, k, 1.0) if global_only else best_theta(params, k, s_thetas)[0] for k in s_budgets])
        )

    def search(global_only: bool) -> dict[str, float]:
        params = dict(DEFAULTS)
        best = criterion(params, global_only)
        for _ in range(sweeps):
            for name, values in (hyper_grid or {}).items():
                for v in values:
                    trial = {**params, name: float(v)}
                    c = criterion(trial, global_only)
                    if c > best + 1e-12:
                        best, params = c, trial
        return params

    params = search(False)
    params_global = search(True)
    chosen = {k: best_theta(params, k, thetas) for k in budgets}
    trials = {key: (criterion(dict(zip(HYPER, key)), False), criterion(dict(zip(HYPER, key)), True)) for key in fits}
    return TuneResult(
        params=params,
        theta={k: chosen[k][1] for k in budgets},
        params_global=params_global,
        inner_ap={k: chosen[k][0] for k in budgets},
        trials=trials,
    )
