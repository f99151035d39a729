"""Baseline feature selections compared with [GPMFS](https://arxiv.org/abs/2504.12740) in `reproduce.py`.

- random subset (one subset for every label);
- per-label F-test (ANOVA F of each feature against each label; a per-label subset);
- l2,1-regression ("RFS-like" [INF]: `min ||X W + 1 b^T - Y||^2 + lam ||W||_{2,1}`, solved by the same IRLS step
  GPMFS uses, without pseudo-labels, graph or redundancy term), ranked by row norms;
- two information-theoretic greedy filters of the field, on features discretised into equal-width bins [INF: 5 bins
  of the min-max scaled feature]; criteria as the literature states them (no reference code was run):
  - LRFS (label redundancy, Zhang et al. 2019): `J(f) = sum_i sum_{j != i} I(f; y_j | y_i) - mean_{s in S} I(f; s)`;
  - SCLS (scalable criterion for large label sets, Lee & Kim 2017): `J(f) = R(f) (1 - sum_{s in S} I(f; s) / H(f))`
    with the relevance `R(f) = sum_j I(f; y_j)`.
  Both give one ranking (a global subset, the same for every label).
MIFS / MDFS / MSSL / LSMFS are not re-implemented.
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


def l21_regression(
    X: np.ndarray,
    Y: np.ndarray,
    lam: float = 1.0,
    max_iter: int = 50,
    tol: float = 1e-4,
    eps: float = 1e-8,
    scale: bool = True,
) -> tuple[np.ndarray, list[float]]:
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


# ------------------------------------------------------------------------------------- information-theoretic filters
def discretize(X: np.ndarray, n_bins: int = 5) -> np.ndarray:
    """Equal-width bins of each min-max scaled column (integer codes `0..n_bins-1`; constant columns are 0)."""
    Xs = minmax_scale(np.asarray(X, dtype=np.float64))[0]
    return np.minimum((Xs * n_bins).astype(np.int64), n_bins - 1)


def entropy(a: np.ndarray) -> float:
    """Shannon entropy (nats) of a discrete vector."""
    p = np.bincount(a) / a.size
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def mutual_info(a: np.ndarray, b: np.ndarray) -> float:
    """`I(a; b)` in nats of two non-negative integer vectors (the plug-in estimate of
    `sklearn.metrics.mutual_info_score`)."""
    nb = int(b.max()) + 1
    joint = np.bincount(a * nb + b, minlength=(int(a.max()) + 1) * nb).reshape(-1, nb) / a.size
    pa, pb = joint.sum(axis=1, keepdims=True), joint.sum(axis=0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log(joint[nz] / (pa @ pb)[nz])).sum())


def conditional_mutual_info(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """`I(a; b | c) = sum_v p(c = v) I(a; b | c = v)`."""
    return float(sum((c == v).mean() * mutual_info(a[c == v], b[c == v]) for v in np.unique(c)))


def conditional_mutual_info_all(D: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`I(D[:, f]; b | c)` for every column `f` at once (the same plug-in estimate as [`conditional_mutual_info`],
    from one joint count table of shape `(d, bins, |b|, |c|)`)."""
    n, d = D.shape
    na, nb, nc = int(D.max()) + 1, int(b.max()) + 1, int(c.max()) + 1
    codes = (np.arange(d) * na * nb * nc)[None, :] + D * (nb * nc) + (b * nc + c)[:, None]
    P = np.bincount(codes.ravel(), minlength=d * na * nb * nc).reshape(d, na, nb, nc) / n
    p_c = P.sum(axis=(1, 2), keepdims=True)
    p_ac = P.sum(axis=2, keepdims=True)
    p_bc = P.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = P * np.log(P * p_c / (p_ac * p_bc))
    return np.where(P > 0, terms, 0.0).sum(axis=(1, 2, 3))


def _greedy(D: np.ndarray, k: int, relevance: np.ndarray, score) -> np.ndarray:
    """Forward selection: first the most relevant feature, then `argmax score(relevance, redundancy_sums, H)`,
    where `redundancy_sums[f] = sum_{s in S} I(f; s)` is updated incrementally. Returns the order of selection."""
    d = D.shape[1]
    H = np.array([entropy(D[:, f]) for f in range(d)])
    chosen = [int(np.lexsort((np.arange(d), -relevance))[0])]
    red = np.zeros(d)
    while len(chosen) < k:
        last = chosen[-1]
        red += np.array([mutual_info(D[:, f], D[:, last]) if f not in chosen else 0.0 for f in range(d)])
        J = score(relevance, red, len(chosen), H)
        J[chosen] = -np.inf
        chosen.append(int(np.lexsort((np.arange(d), -J))[0]))
    return np.array(chosen, dtype=np.int64)


def lrfs_criterion(rel: np.ndarray, red_sum: np.ndarray, n_selected: int, H: np.ndarray) -> np.ndarray:
    """LRFS score: relevance minus the MEAN redundancy `sum_{s in S} I(f; s) / |S|` (`H` unused)."""
    return rel - red_sum / n_selected


def scls_criterion(rel: np.ndarray, red_sum: np.ndarray, n_selected: int, H: np.ndarray) -> np.ndarray:
    """SCLS score: relevance scaled by `1 - sum_{s in S} I(f; s) / H(f)` (a constant feature, H = 0, scores 0)."""
    return rel * (1.0 - np.where(H > 0, red_sum / np.where(H > 0, H, 1.0), 1.0))


def lrfs_order(X: np.ndarray, Y: np.ndarray, k: int, n_bins: int = 5) -> np.ndarray:
    """LRFS: the first `k` features in the order of greedy selection (see the module docstring)."""
    D, Y = discretize(X, n_bins), np.asarray(Y, dtype=np.int64)
    q = Y.shape[1]
    if q > 1:
        rel = sum(conditional_mutual_info_all(D, Y[:, j], Y[:, i]) for i in range(q) for j in range(q) if j != i)
    else:  # one label: the conditional terms do not exist; plain relevance
        rel = np.array([mutual_info(D[:, f], Y[:, 0]) for f in range(D.shape[1])])
    return _greedy(D, k, rel, lrfs_criterion)


def scls_order(X: np.ndarray, Y: np.ndarray, k: int, n_bins: int = 5) -> np.ndarray:
    """SCLS: the first `k` features in the order of greedy selection (see the module docstring)."""
    D, Y = discretize(X, n_bins), np.asarray(Y, dtype=np.int64)
    rel = np.array([sum(mutual_info(D[:, f], Y[:, j]) for j in range(Y.shape[1])) for f in range(D.shape[1])])
    return _greedy(D, k, rel, scls_criterion)
