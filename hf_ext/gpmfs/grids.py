"""Every selector of the GPMFS verdict as a tunable family with the same small grid (issue 39: "the same tuning budget
for every selector").

A family is fitted once per configuration on a training set and then answers `sets(k)`: one feature subset per label
at a budget of `k` features per label. Grids ([`GRIDS`]) hold exactly [`GRID_SIZE`] configurations for every
selector in the comparison; the GPMFS ablations use restrictions of GPMFS's own grid (a component fixed).

| selector | grid (6 configurations) |
|---|---|
| `gpmfs` | label-correlation weight rho in {0, 10} x theta in {0.4, 0.7, 1.0} (other weights at the defaults) |
| `ftest` | score in {ANOVA F, chi2 on min-max scaled X, plug-in MI on 5 bins} x {per label, pooled over labels} |
| `rfs` | l2,1 weight lam in {1e-2, 1e-1, 1, 10, 100, 1e3} |
| `lrfs`, `scls` | discretisation bins in {2, 3, 4, 5, 7, 10} |
| `random` | 6 random permutations (the best draw on validation) |
| `gpmfs_global` (ablation: no personal features) | rho in {0, 10}, theta = 1 |
| `gpmfs_corr` (ablation: term on) | rho = 10, theta in {0.4, 0.7, 1.0} |
| `gpmfs_no_corr` (ablation: term off) | rho = 0, theta in {0.4, 0.7, 1.0} |

Like theta (whose grid holds 1.0, global-only), the label-correlation weight's grid holds its "off" value, so GPMFS
may switch either component off on validation; `gpmfs_corr` vs `gpmfs_no_corr` (3 configurations each) is the
ablation of the term at equal grids.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.feature_selection import chi2, f_classif

from .baselines import discretize, l21_regression, lrfs_order, mutual_info, rank_by_row_norm, scls_order
from .selector import GPMFSSelector, minmax_scale

GRID_SIZE = 6
RHOS, THETAS, BINS = (0.0, 10.0), (0.4, 0.7, 1.0), (2, 3, 4, 5, 7, 10)
GRIDS: dict[str, list[dict]] = {
    "gpmfs": [{"rho": r, "theta": t} for r in RHOS for t in THETAS],
    "ftest": [{"score": s, "pool": p} for s in ("f", "chi2", "mi") for p in ("per_label", "pooled")],
    "rfs": [{"lam": v} for v in (1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3)],
    "lrfs": [{"n_bins": b} for b in BINS],
    "scls": [{"n_bins": b} for b in BINS],
    "random": [{"draw": i} for i in range(GRID_SIZE)],
    "gpmfs_global": [{"rho": r, "theta": 1.0} for r in RHOS],
    "gpmfs_corr": [{"rho": RHOS[1], "theta": t} for t in THETAS],
    "gpmfs_no_corr": [{"rho": 0.0, "theta": t} for t in THETAS],
}
COMPARED = ("gpmfs", "ftest", "rfs", "lrfs", "scls", "random")  # the Friedman set: equal grids
ABLATIONS = ("gpmfs_global", "gpmfs_corr", "gpmfs_no_corr")

Sets = Callable[[int], list[np.ndarray]]


def univariate_scores(X: np.ndarray, Y: np.ndarray, score: str) -> np.ndarray:
    """(d, q) per-label relevance of each feature: `"f"` ANOVA F, `"chi2"` chi2 of the min-max scaled feature,
    `"mi"` plug-in mutual information on 5 equal-width bins. Constant features (undefined score) get 0."""
    d, q = X.shape[1], Y.shape[1]
    out = np.zeros((d, q))
    with np.errstate(divide="ignore", invalid="ignore"):
        if score == "f":
            for j in range(q):
                out[:, j] = f_classif(X, Y[:, j])[0]
        elif score == "chi2":
            Xs = minmax_scale(X)[0]
            for j in range(q):
                out[:, j] = chi2(Xs, Y[:, j])[0]
        elif score == "mi":
            D = discretize(X, 5)
            Yi = np.asarray(Y, dtype=np.int64)
            for j in range(q):
                out[:, j] = [mutual_info(D[:, f], Yi[:, j]) for f in range(d)]
        else:
            raise ValueError(f"score must be 'f', 'chi2' or 'mi', got {score!r}")
    return np.where(np.isfinite(out), out, 0.0)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    return np.sort(np.lexsort((np.arange(scores.size), -scores))[:k])


class FamilyCache:
    """Fits shared between configurations on one training set (one GPMFS solve per rho, one score table per score
    type), so a grid of 6 costs at most 6 fits and usually fewer."""

    def __init__(self, X: np.ndarray, Y: np.ndarray, k_max: int, seed: int):
        self.X, self.Y, self.k_max, self.seed = X, np.asarray(Y), k_max, seed
        self._fits: dict[tuple, object] = {}

    def _get(self, key, build):
        if key not in self._fits:
            self._fits[key] = build()
        return self._fits[key]

    def sets(self, selector: str, config: dict) -> Sets:
        """`k -> list of per-label feature subsets` for `selector` at `config` (an entry of [`GRIDS`])."""
        X, Y, q = self.X, self.Y, self.Y.shape[1]
        if selector.startswith("gpmfs"):
            sel = self._get(("gpmfs", config["rho"]), lambda: GPMFSSelector(rho=config["rho"], budget=1).fit(X, Y))
            theta = config["theta"]
            return lambda k: sel.with_selection(budget=k, theta=theta).label_feature_sets()
        if selector == "ftest":
            S = self._get(("score", config["score"]), lambda: univariate_scores(X, Y, config["score"]))
            if config["pool"] == "per_label":
                return lambda k: [_top(S[:, j], k) for j in range(q)]
            # pooled: each label's scores scaled to a maximum of 1, then summed (every label counts equally)
            pooled = (S / np.where(S.max(axis=0) > 0, S.max(axis=0), 1.0)).sum(axis=1)
            return lambda k: [_top(pooled, k)] * q
        if selector == "rfs":
            W = self._get(("rfs", config["lam"]), lambda: l21_regression(X, Y, lam=config["lam"])[0])
            return lambda k: [rank_by_row_norm(W, k)] * q
        if selector in ("lrfs", "scls"):
            order_fn = lrfs_order if selector == "lrfs" else scls_order
            order = self._get((selector, config["n_bins"]), lambda: order_fn(X, Y, self.k_max, config["n_bins"]))
            return lambda k: [np.sort(order[:k])] * q
        if selector == "random":
            perm = np.random.default_rng([self.seed, config["draw"]]).permutation(X.shape[1])
            return lambda k: [np.sort(perm[:k])] * q
        raise ValueError(f"unknown selector {selector!r}; choose from {sorted(GRIDS)}")
