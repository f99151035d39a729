"""Baseline feature selections compared with [GPMFS](https://arxiv.org/abs/2504.12740) in `reproduce.py`.

- random subset (one subset for every label);
- per-label F-test (ANOVA F of each feature against each label; a per-label subset);
- l2,1-regression ("RFS-like" [INF]: `min ||X W + 1 b^T - Y||^2 + lam ||W||_{2,1}`, solved by the same IRLS step
  GPMFS uses, without pseudo-labels, graph or redundancy term), ranked by row norms.
The field's MIFS / MDFS / SCLS / MSSL / LRFS / LSMFS are not re-implemented.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.feature_selection import f_classif

from .selector import minmax_scale, w_step


def random_subset(n_features: int, budget: int, seed: int = 0) -> np.ndarray:
    """`budget` distinct feature indices drawn uniformly (sorted)."""
    if not 1 <= budget <= n_features:
        raise ValueError(f"budget must be in [1, {n_features}], got {budget}")
    return np.sort(np.random.default_rng(seed).choice(n_features, size=budget, replace=False))


def ftest_scores(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """(d, q) ANOVA F statistics; constant features (NaN F) score -inf so they rank last."""
    scores = np.empty((X.shape[1], Y.shape[1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(Y.shape[1]):
            scores[:, j] = f_classif(X, Y[:, j])[0]
    return np.where(np.isfinite(scores), scores, -np.inf)


def ftest_per_label(X: np.ndarray, Y: np.ndarray, budget: int, scores: np.ndarray | None = None) -> list[np.ndarray]:
    """Per label, the `budget` features with the highest F statistic (ties: lower index first)."""
    scores = ftest_scores(X, Y) if scores is None else scores
    d = scores.shape[0]
    return [np.sort(np.lexsort((np.arange(d), -scores[:, j]))[:budget]) for j in range(scores.shape[1])]


def l21_regression(X: np.ndarray, Y: np.ndarray, lam: float = 1.0, max_iter: int = 50, tol: float = 1e-4,
                   eps: float = 1e-8, scale: bool = True) -> tuple[np.ndarray, list[float]]:
    """RFS-like l2,1-regularised least squares with an unpenalised bias, by IRLS.

    Args:
        X (`np.ndarray` of shape `(n, d)`), Y (`np.ndarray` of shape `(n, q)`): data.
        lam (`float`): l2,1 weight. max_iter (`int`), tol (`float`), eps (`float`): as in [`GPMFSConfig`].
        scale (`bool`): min-max scale `X` first (as GPMFS does).

    Returns:
        `(W, objective_history)`.
    """
    X = minmax_scale(np.asarray(X, dtype=np.float64))[0] if scale else np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    H = Xc.T @ Xc
    W = w_step(Xc, Yc, H + np.eye(X.shape[1]), np.zeros((X.shape[1], Y.shape[1])), 0.0, eps, 1.0)

    def objective(W):
        return float(np.sum((Xc @ W - Yc) ** 2) + lam * np.sum(np.sqrt(np.sum(W**2, axis=1) + eps)))

    history = [objective(W)]
    for _ in range(max_iter):
        W = w_step(Xc, Yc, H, W, lam, eps, eps)
        history.append(objective(W))
        if abs(history[-2] - history[-1]) <= tol * max(abs(history[-2]), 1e-12):
            break
    return W, history


def rank_by_row_norm(W: np.ndarray, budget: int) -> np.ndarray:
    """The `budget` rows of `W` with the largest l2 norms (sorted indices; ties: lower index first)."""
    norms = np.linalg.norm(W, axis=1)
    return np.sort(np.lexsort((np.arange(W.shape[0]), -norms))[:budget])


def timed(fn, *args, **kwargs):
    """`(result, seconds)` of one call (used by the scaling benchmark)."""
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start
