"""ML-kNN (Zhang & Zhou, 2007) and binary-relevance kNN, both with optional per-label feature subsets.

scikit-multilearn 0.2.0's `MLkNN` breaks on modern scikit-learn (positional `NearestNeighbors` arguments), so ML-kNN
is implemented here. A per-label subset means label j's neighbours are searched in `X[:, subsets[j]]`; ML-kNN's
statistics are per label anyway, so this is exact ML-kNN run label by label. Labels that share a subset share one
neighbour search. Used to evaluate [GPMFS](https://arxiv.org/abs/2504.12740) selections.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.neighbors import NearestNeighbors


def _groups(subsets: Sequence[np.ndarray] | None, d: int, q: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(feature indices, label indices) pairs, one per distinct subset."""
    if subsets is None:
        return [(np.arange(d), np.arange(q))]
    if len(subsets) != q:
        raise ValueError(f"feature_subsets must have one entry per label ({q}), got {len(subsets)}")
    by_key: dict[tuple[int, ...], list[int]] = {}
    for j, idx in enumerate(subsets):
        idx = np.unique(np.asarray(idx, dtype=np.int64))
        if idx.size == 0 or idx.min() < 0 or idx.max() >= d:
            raise ValueError(f"feature_subsets[{j}] must be non-empty indices in [0, {d})")
        by_key.setdefault(tuple(idx.tolist()), []).append(j)
    return [(np.array(k, dtype=np.int64), np.array(v, dtype=np.int64)) for k, v in by_key.items()]


class _KNNBase:
    def __init__(self, k: int = 10, algorithm: str = "auto"):
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        self.k = int(k)
        self.algorithm = algorithm

    def _fit_neighbours(self, X, Y, feature_subsets):
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(Y)
        if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
            raise ValueError(f"X must be (n, d) and Y (n, q) with the same n, got {X.shape} and {Y.shape}")
        if X.shape[0] < 2:
            raise ValueError("X needs at least 2 samples")
        self.k_ = min(self.k, X.shape[0] - 1)
        self.Y_ = (Y > 0).astype(np.int64)
        self.n_features_in_, self.n_labels_ = X.shape[1], Y.shape[1]
        self.groups_ = _groups(feature_subsets, X.shape[1], Y.shape[1])
        self.nn_ = [
            NearestNeighbors(n_neighbors=self.k_, algorithm=self.algorithm).fit(X[:, f]) for f, _ in self.groups_
        ]

    def _neighbour_counts(self, X=None) -> np.ndarray:
        """(m, q) number of each label's k neighbours that carry the label; `X=None` is leave-one-out on training."""
        q = self.n_labels_
        m = self.Y_.shape[0] if X is None else X.shape[0]
        C = np.zeros((m, q), dtype=np.int64)
        for (f, labels), nn in zip(self.groups_, self.nn_):
            idx = nn.kneighbors()[1] if X is None else nn.kneighbors(X[:, f])[1]
            C[:, labels] = self.Y_[idx][:, :, labels].sum(axis=1)
        return C

    def _check_X(self, X):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} features, got shape {X.shape}")
        return X

    def predict(self, X) -> np.ndarray:
        """{0, 1} predictions of shape `(m, q)` (score above 0.5)."""
        return (self.predict_proba(X) > 0.5).astype(np.int64)


class MLkNN(_KNNBase):
    """ML-kNN: a Bayesian decision on the number of a sample's k neighbours that carry each label.

    Args:
        k (`int`, defaults to 10): neighbours (the spec's k = 10).
        s (`float`, defaults to 1.0): Laplace smoothing (the spec's smoothing 1).
        algorithm (`str`, defaults to `"auto"`): `NearestNeighbors` algorithm (`"brute"` is faster for the few
            columns of a selected subset and gives the same neighbours up to exact distance ties).

    Example:

    ```python
    >>> clf = MLkNN(k=10).fit(X_train, Y_train, feature_subsets=selector.label_feature_sets())
    >>> scores = clf.predict_proba(X_test)
    ```
    """

    def __init__(self, k: int = 10, s: float = 1.0, algorithm: str = "auto"):
        super().__init__(k, algorithm)
        if s < 0:
            raise ValueError(f"s must be >= 0, got {s!r}")
        self.s = float(s)

    def fit(self, X, Y, feature_subsets: Sequence[np.ndarray] | None = None) -> MLkNN:
        """Estimates the priors and the count likelihoods from leave-one-out neighbour counts.

        Args:
            X (`np.ndarray` of shape `(n, d)`), Y (`np.ndarray` of shape `(n, q)`): training data.
            feature_subsets (`list[np.ndarray]`, *optional*): label j's neighbours use `X[:, feature_subsets[j]]`.
        """
        self._fit_neighbours(X, Y, feature_subsets)
        n, k, s, Y = self.Y_.shape[0], self.k_, self.s, self.Y_
        self.prior_ = (s + Y.sum(axis=0)) / (2 * s + n)  # P(H1_j)
        C = self._neighbour_counts()
        # c1[r, j]: training samples WITH label j whose neighbours hold label j exactly r times; c0: WITHOUT.
        c1 = np.zeros((k + 1, Y.shape[1]))
        c0 = np.zeros((k + 1, Y.shape[1]))
        for j in range(Y.shape[1]):
            c1[:, j] = np.bincount(C[Y[:, j] == 1, j], minlength=k + 1)
            c0[:, j] = np.bincount(C[Y[:, j] == 0, j], minlength=k + 1)
        self.like1_ = (s + c1) / (s * (k + 1) + c1.sum(axis=0))  # P(E_r | H1_j)
        self.like0_ = (s + c0) / (s * (k + 1) + c0.sum(axis=0))  # P(E_r | H0_j)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Posterior `P(H1_j | E_{C_j})` of shape `(m, q)`, the ranking scores."""
        C = self._neighbour_counts(self._check_X(X))
        cols = np.arange(self.n_labels_)
        p1 = self.prior_ * self.like1_[C, cols]
        p0 = (1 - self.prior_) * self.like0_[C, cols]
        total = p1 + p0
        return np.where(total > 0, p1 / np.where(total > 0, total, 1.0), 0.5)


class BRkNN(_KNNBase):
    """Binary-relevance kNN: label j's score is the fraction of its k neighbours (in its own subset) that carry it.

    Args:
        k (`int`, defaults to 10): neighbours.
    """

    def fit(self, X, Y, feature_subsets: Sequence[np.ndarray] | None = None) -> BRkNN:
        self._fit_neighbours(X, Y, feature_subsets)
        return self

    def predict_proba(self, X) -> np.ndarray:
        return self._neighbour_counts(self._check_X(X)) / self.k_


def mlknn_posterior(
    counts_train: np.ndarray, y_train: np.ndarray, counts_test: np.ndarray, k: int, s: float = 1.0
) -> np.ndarray:
    """ML-kNN's posterior for ONE label from neighbour counts (the same estimate as [`MLkNN`], label by label).

    Args:
        counts_train (`np.ndarray` of shape `(n,)`): leave-one-out count of training neighbours carrying the label.
        y_train (`np.ndarray` of shape `(n,)`): the label (0/1).
        counts_test (`np.ndarray` of shape `(m,)`): count among each test sample's neighbours.
        k (`int`): neighbours; s (`float`): Laplace smoothing.
    """
    n = y_train.shape[0]
    prior = (s + y_train.sum()) / (2 * s + n)
    c1 = np.bincount(counts_train[y_train == 1], minlength=k + 1).astype(np.float64)
    c0 = np.bincount(counts_train[y_train == 0], minlength=k + 1).astype(np.float64)
    like1 = (s + c1) / (s * (k + 1) + c1.sum())
    like0 = (s + c0) / (s * (k + 1) + c0.sum())
    p1, p0 = prior * like1[counts_test], (1 - prior) * like0[counts_test]
    total = p1 + p0
    return np.where(total > 0, p1 / np.where(total > 0, total, 1.0), 0.5)


class SplitScorer:
    """ML-kNN scores of many per-label feature subsets on one train/test split, with the neighbour search of each
    distinct subset cached: tuning theta and the GPMFS weights revisits the same subsets (the global set, a label's
    top features) many times, and the search is what costs.

    Equal to `MLkNN(k, s, algorithm).fit(scale(Xtr), Ytr, subsets).predict_proba(scale(Xte))` with the training
    fold's min-max scaling (the tests pin it).

    Args:
        X_train, Y_train, X_test (`np.ndarray`): the split (unscaled; min-max scaled here on the training part).
        k (`int`), s (`float`), algorithm (`str`): as [`MLkNN`]. max_cache (`int`): subsets kept (oldest dropped).
    """

    def __init__(
        self, X_train, Y_train, X_test, k: int = 10, s: float = 1.0, algorithm: str = "brute", max_cache: int = 512
    ):
        lo = X_train.min(axis=0)
        span = X_train.max(axis=0) - lo
        span = np.where(span > 0, span, 1.0)
        self.Xtr, self.Xte = (X_train - lo) / span, (X_test - lo) / span
        self.Ytr = (np.asarray(Y_train) > 0).astype(np.int64)
        self.k, self.s, self.algorithm, self.max_cache = min(k, X_train.shape[0] - 1), s, algorithm, max_cache
        self._cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def _neighbours(self, cols) -> tuple[np.ndarray, np.ndarray]:
        key = tuple(np.unique(np.asarray(cols, dtype=np.int64)).tolist())
        hit = self._cache.get(key)
        if hit is None:
            f = np.array(key, dtype=np.int64)
            nn = NearestNeighbors(n_neighbors=self.k, algorithm=self.algorithm).fit(self.Xtr[:, f])
            hit = (nn.kneighbors()[1], nn.kneighbors(self.Xte[:, f])[1])
            if len(self._cache) >= self.max_cache:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = hit
        return hit

    def predict_proba(self, subsets=None) -> np.ndarray:
        """(m, q) ML-kNN posteriors, label j searching its neighbours in `subsets[j]` (`None`: all features)."""
        q = self.Ytr.shape[1]
        if subsets is None:
            subsets = [np.arange(self.Xtr.shape[1])] * q
        if len(subsets) != q:
            raise ValueError(f"subsets must have one entry per label ({q}), got {len(subsets)}")
        out = np.empty((self.Xte.shape[0], q))
        for j, cols in enumerate(subsets):
            idx_tr, idx_te = self._neighbours(cols)
            y = self.Ytr[:, j]
            out[:, j] = mlknn_posterior(y[idx_tr].sum(axis=1), y, y[idx_te].sum(axis=1), self.k, self.s)
        return out
