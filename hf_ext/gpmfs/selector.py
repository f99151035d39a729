"""GPMFS solver and its scikit-learn estimator [`GPMFSSelector`].

Paper: [GPMFS: Global Foundation and Personalized Optimization for Multi-Label Feature Selection](
https://arxiv.org/abs/2504.12740). No code was released; the objective below is assembled from the components a
third-party summary names, and each choice the paper does not fix is marked [INF].

Objective (smoothed l2,1, see [`gpmfs_objective`]):

    ||X W + 1 b^T - V||^2 + alpha ||V - (Y + B * U)||^2 + beta Tr(V^T L V) + gamma Tr(W^T A W)
    + lam sum_i sqrt(||w_i||^2 + eps) + rho Tr(W L_C W^T),      U >= 0,  B = 2 Y - 1.

The last term is the explicit label-correlation term ([`label_laplacian`]; `rho = 0` by default, i.e. absent).

Each block update does not increase it, so the objective decreases monotonically:
- W: one majorize-minimize (IRLS) step. The l2,1 term is majorized by a weighted ridge (D_ii = 1 / (2 sqrt(
  ||w_i||^2 + eps))); when `H = X_c^T X_c + gamma A` is indefinite (A has a zero diagonal, so it always has negative
  eigenvalues) a proximal term `mu ||W - W_t||^2` with `mu >= -lambda_min(H)` keeps the surrogate convex. With a
  positive-definite `H` (the usual case) `mu = eps` and the step is the spec's closed form
  `W = (X^T X + lam D + gamma A + eps I)^{-1} X^T V` up to the `eps W_t` term. With `rho > 0` the step solves the
  Sylvester system `M W + rho W L_C = R` exactly, column by column in the eigenbasis of `L_C` (convex quadratic
  added to the surrogate, so the decrease still holds).
- V: exact minimiser `((1 + alpha) I + beta L)^{-1} (X W + 1 b^T + alpha (Y + B * U))` (sparse SPD system, solved
  by warm-started conjugate gradients to 1e-10 relative residual).
- U: exact minimiser `max(B * (V - Y), 0)`.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field, fields

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.validation import check_is_fitted, validate_data

from .config import GPMFSConfig

# GPMFS builds d x d matrices (feature redundancy, normal equations) and an eigen-decomposition of one of them: beyond
# this many features a fit would take hours and tens of GB, so it is refused with a clear error instead of hanging.
MAX_FEATURES = 5_000


# --------------------------------------------------------------------------------------------------- building blocks
def minmax_scale(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Min-max scales the columns of `X` to [0, 1] (the spec's input scaling).

    Constant columns map to 0 (documented handling: they carry no information, so their cosine similarity and
    their regression weight are 0 and they rank last).

    Returns:
        `(X_scaled, constant_mask)`.
    """
    x_min = X.min(axis=0)
    span = X.max(axis=0) - x_min
    constant = span <= 1e-12 * np.maximum(1.0, np.abs(x_min))
    scale = np.where(constant, 1.0, span)
    Xs = (X - x_min) / scale
    Xs[:, constant] = 0.0
    return Xs, constant


def knn_laplacian(X: np.ndarray, k_neighbors: int = 5, sigma: float | None = None) -> sp.csr_matrix:
    """Laplacian `L = D - S` of the symmetrised heat-kernel kNN graph over the rows of `X`.

    Args:
        X (`np.ndarray` of shape `(n, d)`): scaled samples.
        k_neighbors (`int`): neighbours per sample (capped at `n - 1`).
        sigma (`float`, *optional*): kernel width; `None` uses the root mean squared kNN distance [INF].

    Returns:
        `scipy.sparse.csr_matrix` of shape `(n, n)`.
    """
    n = X.shape[0]
    k = min(k_neighbors, n - 1)
    # kneighbors() without a query excludes each point itself, also when rows are duplicated.
    dist, idx = NearestNeighbors(n_neighbors=k).fit(X).kneighbors()
    d2 = dist**2
    if sigma is None:
        mean_d2 = float(d2.mean())
        sigma2 = mean_d2 if mean_d2 > 0 else 1.0
    else:
        sigma2 = float(sigma) ** 2
    S = sp.csr_matrix((np.exp(-d2 / sigma2).ravel(), (np.repeat(np.arange(n), k), idx.ravel())), shape=(n, n))
    S = S.maximum(S.T)  # symmetric: i ~ j if either is among the other's k nearest
    return (sp.diags(np.asarray(S.sum(axis=1)).ravel()) - S).tocsr()


def redundancy_matrix(X: np.ndarray) -> np.ndarray:
    """`A_ij = |cos(x_i, x_j)|` between the columns of `X`, zero diagonal (spec [INF]); zero columns give 0."""
    norms = np.linalg.norm(X, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    Xn = X / safe
    A = np.abs(Xn.T @ Xn)
    A[:, norms == 0] = 0.0
    A[norms == 0, :] = 0.0
    np.fill_diagonal(A, 0.0)
    return A


def label_laplacian(Y: np.ndarray) -> np.ndarray:
    """Normalised Laplacian `L_C = I - C_d^{-1/2} C C_d^{-1/2}` of the label graph (q x q, eigenvalues in [0, 2]).

    `C_jk = cos(y_j, y_k)` between label columns of `Y` (co-occurrence / sqrt(n_j n_k); zero diagonal), `C_d` its
    degree matrix. A label that co-occurs with no other has degree 0 and a zero row/column (it is not tied to any
    other label). `Tr(W L_C W^T) = 1/2 sum_jk C_jk ||w_j / sqrt(c_j) - w_k / sqrt(c_k)||^2` [INF].
    """
    Y = np.asarray(Y, dtype=np.float64)
    norms = np.linalg.norm(Y, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    C = (Y.T @ Y) / np.outer(safe, safe)
    np.fill_diagonal(C, 0.0)
    deg = C.sum(axis=1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    L = np.diag((deg > 0).astype(np.float64)) - inv[:, None] * C * inv[None, :]
    return 0.5 * (L + L.T)


def gpmfs_objective(X, Y, W, b, V, U, L, A, config: GPMFSConfig, L_C=None) -> float:
    """Value of the (smoothed) GPMFS objective; see the module docstring (`L_C`: [`label_laplacian`], built from `Y`
    when `config.rho > 0` and not given)."""
    B = 2.0 * Y - 1.0
    fit = np.sum((X @ W + b - V) ** 2)
    relax = config.alpha * np.sum((V - (Y + B * U)) ** 2)
    manifold = config.beta * float(np.sum(V * (L @ V)))
    redundancy = config.gamma * float(np.sum(W * (A @ W)))
    sparsity = config.lam * float(np.sum(np.sqrt(np.sum(W**2, axis=1) + config.eps)))
    correlation = 0.0
    if config.rho > 0:
        L_C = label_laplacian(Y) if L_C is None else L_C
        correlation = config.rho * float(np.sum((W @ L_C) * W))
    return float(fit + relax + manifold + redundancy + sparsity + correlation)


@dataclass
class GPMFSSolution:
    """Output of [`solve_gpmfs`]: the weights `W` (d x q), bias `b` (q,), pseudo-labels `V`, relaxation `U`,
    the objective after every iteration and the proximal weight `mu` the W-step used."""

    W: np.ndarray
    b: np.ndarray
    V: np.ndarray
    U: np.ndarray
    objective: list[float] = field(default_factory=list)
    n_iter: int = 0
    mu: float = 0.0


def _spd_solve(M, rhs):
    try:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(M, check_finite=False), rhs, check_finite=False)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):  # numerically semi-definite: least squares instead
        return np.linalg.lstsq(M, rhs, rcond=None)[0]


def w_step(Xc, Vc, H, W_prev, lam, mu, eps, rho: float = 0.0, label_eig=None) -> np.ndarray:
    """One IRLS (majorize-minimize) W update: solves `(H + lam D + mu I) W + rho W L_C = X_c^T V_c + mu W_prev`.

    `label_eig = (evals, Q)` of `L_C` (needed when `rho > 0`): in the basis `W Q` the system splits into one SPD
    solve per label, `(M + rho evals_i I) (W Q)_i = (R Q)_i`.
    """
    D = 1.0 / (2.0 * np.sqrt(np.sum(W_prev**2, axis=1) + eps))
    M = H + np.diag(lam * D + mu)
    rhs = Xc.T @ Vc + mu * W_prev
    if rho <= 0:
        return _spd_solve(M, rhs)
    evals, Q = label_eig
    R = rhs @ Q
    Wt = np.column_stack(
        [_spd_solve(M + rho * max(ev, 0.0) * np.eye(M.shape[0]), R[:, i]) for i, ev in enumerate(evals)]
    )
    return Wt @ Q.T


def block_cg(matvec, R: np.ndarray, X0: np.ndarray, rtol: float = 1e-10, max_iter: int = 1000) -> np.ndarray:
    """Conjugate gradients on every column of `R` at once for a symmetric positive-definite operator.

    Used for the V-step: `(1 + alpha) I + beta L` is sparse, SPD and well conditioned (eigenvalues in
    `[1 + alpha, 1 + alpha + 2 beta max_degree]`), so warm-started CG needs few sweeps and avoids the fill-in of a
    sparse LU, which dominated the fit time on Yeast.
    """
    Xk = X0.copy()
    Rk = R - matvec(Xk)
    P = Rk.copy()
    rs = np.sum(Rk * Rk, axis=0)
    stop = (rtol * np.maximum(np.linalg.norm(R, axis=0), 1e-300)) ** 2
    for _ in range(max_iter):
        if np.all(rs <= stop):
            break
        MP = matvec(P)
        denom = np.sum(P * MP, axis=0)
        step = np.where(denom > 0, rs / np.where(denom > 0, denom, 1.0), 0.0)
        Xk += step * P
        Rk -= step * MP
        rs_new = np.sum(Rk * Rk, axis=0)
        P = Rk + np.where(rs > 0, rs_new / np.where(rs > 0, rs, 1.0), 0.0) * P
        rs = rs_new
    return Xk


def solve_gpmfs(X: np.ndarray, Y: np.ndarray, config: GPMFSConfig, L=None, A=None) -> GPMFSSolution:
    """Alternating closed-form minimisation of the GPMFS objective.

    Args:
        X (`np.ndarray` of shape `(n, d)`): min-max scaled features.
        Y (`np.ndarray` of shape `(n, q)`): binary label matrix.
        config ([`GPMFSConfig`]): weights and solver settings.
        L (`scipy.sparse` matrix, *optional*): precomputed graph Laplacian (else built from `X`).
        A (`np.ndarray`, *optional*): precomputed redundancy matrix (else built from `X`).

    Returns:
        [`GPMFSSolution`].
    """
    n, d = X.shape
    Y = Y.astype(np.float64)
    L = knn_laplacian(X, config.k_neighbors, config.sigma) if L is None else L
    A = redundancy_matrix(X) if A is None else A
    L_C = label_laplacian(Y) if config.rho > 0 else None
    label_eig = scipy.linalg.eigh(L_C) if L_C is not None else None
    B = 2.0 * Y - 1.0
    x_mean = X.mean(axis=0) if config.fit_intercept else np.zeros(d)
    Xc = X - x_mean
    H = Xc.T @ Xc + config.gamma * A
    H = 0.5 * (H + H.T)
    # Proximal weight: keeps the W-surrogate convex if gamma * A makes H indefinite (then the plain closed form
    # could increase the objective); otherwise only the tiny eps ridge of the spec remains.
    lam_min = float(scipy.linalg.eigvalsh(H, subset_by_index=[0, 0])[0]) if d > 0 else 0.0
    mu = max(0.0, -lam_min) * (1.0 + 1e-6) + config.eps
    M_v = ((1.0 + config.alpha) * sp.identity(n, format="csr") + config.beta * L).tocsr()

    # Init [INF]: ridge regression on Y, V = Y, U = 0.
    V, U = Y.copy(), np.zeros_like(Y)
    W = w_step(Xc, Y - Y.mean(axis=0) * config.fit_intercept, H + np.eye(d), np.zeros((d, Y.shape[1])), 0.0, mu, 1.0)
    b = (V.mean(axis=0) - x_mean @ W) if config.fit_intercept else np.zeros(Y.shape[1])
    history = [gpmfs_objective(X, Y, W, b, V, U, L, A, config, L_C)]
    it = 0
    for it in range(1, config.max_iter + 1):
        v_mean = V.mean(axis=0) if config.fit_intercept else np.zeros(Y.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):
            W = w_step(Xc, V - v_mean, H, W, config.lam, mu, config.eps, config.rho, label_eig)
            b = (v_mean - x_mean @ W) if config.fit_intercept else np.zeros(Y.shape[1])
            target = Y + B * U
            V = block_cg(M_v.dot, X @ W + b + config.alpha * target, V)
            U = np.maximum(B * (V - Y), 0.0)
            history.append(gpmfs_objective(X, Y, W, b, V, U, L, A, config, L_C))
        if not (np.isfinite(history[-1]) and np.all(np.isfinite(W))):
            # With an indefinite H the quadratic redundancy term beats the linear l2,1 penalty along a negative
            # eigenvector: the objective is unbounded below and the weights diverge; say so instead of returning
            # overflowed weights.
            raise ValueError(
                f"GPMFSConfig.gamma={config.gamma:g} makes the GPMFS objective unbounded below on this "
                f"data (X^T X + gamma A has eigenvalue {lam_min:.3g} < 0 and the weights diverged): "
                "use a smaller gamma"
            )
        if abs(history[-2] - history[-1]) <= config.tol * max(abs(history[-2]), 1e-12):
            break
    return GPMFSSolution(W=W, b=b, V=V, U=U, objective=history, n_iter=it, mu=mu)


@dataclass
class Selection:
    """Global and per-label feature sets computed from `W` by [`select_features`]."""

    ranking: np.ndarray  # all features by decreasing row norm
    global_indices: np.ndarray  # G: the top-`budget` features by row norm
    personal_indices: list[np.ndarray]  # P_j, label j's features outside G
    label_indices: list[np.ndarray]  # the final set of label j

    @property
    def label_specific_strength(self) -> float:
        """mean_j |P_j| / |G| (the spec's report of how label-specific a dataset is)."""
        return float(np.mean([len(p) for p in self.personal_indices]) / max(len(self.global_indices), 1))


def select_features(W: np.ndarray, budget: int, k_personal: int, theta: float, equal_budget: bool = True) -> Selection:
    """Threshold-controlled global + personalised selection [INF: the paper's exact rule is not public].

    - G: the top-`budget` features by `||w_i||_2` (stable ties: lower index first).
    - P_j: features outside G with `s_ij = |W_ij| / max_i |W_ij| >= theta`, best first, at most `k_personal`;
      `theta = 1` means global-only (P_j is empty by definition).
    - With `equal_budget`, each personal feature replaces the member of G that label j values least, and only while
      it is worth more to label j (`s_in > s_out`), so every label uses exactly `budget` features. Otherwise the
      label set is the spec's literal `G ∪ P_j`.

    Args:
        W (`np.ndarray` of shape `(d, q)`): fitted weights.
        budget (`int`): size of G, 1 <= budget <= d.
        k_personal (`int`): cap on |P_j|.
        theta (`float`): threshold in [0, 1].
        equal_budget (`bool`): see above.
    """
    d, q = W.shape
    norms = np.linalg.norm(W, axis=1)
    ranking = np.lexsort((np.arange(d), -norms))
    G = np.sort(ranking[:budget])
    in_G = np.zeros(d, dtype=bool)
    in_G[G] = True
    absW = np.abs(W)
    personal, labels = [], []
    for j in range(q):
        top = absW[:, j].max()
        s = absW[:, j] / top if top > 0 else np.zeros(d)
        if theta >= 1.0 or k_personal == 0:
            P = np.array([], dtype=np.int64)
        else:
            cand = np.flatnonzero(~in_G & (s >= theta) & (s > 0))
            cand = cand[np.lexsort((cand, -s[cand]))][:k_personal]
            if equal_budget:
                weakest = G[np.lexsort((-G, s[G]))][: len(cand)]  # members of G label j values least
                m = int(np.sum(s[cand] > s[weakest]))  # prefix: cand decreasing, weakest increasing
                P, drop = cand[:m], weakest[:m]
            else:
                P, drop = cand, np.array([], dtype=np.int64)
        personal.append(np.sort(P).astype(np.int64))
        if theta >= 1.0 or k_personal == 0 or len(P) == 0:
            labels.append(G.astype(np.int64))
        else:
            labels.append(np.sort(np.concatenate([np.setdiff1d(G, drop), P])).astype(np.int64))
    return Selection(
        ranking=ranking.astype(np.int64),
        global_indices=G.astype(np.int64),
        personal_indices=personal,
        label_indices=labels,
    )


def validate_targets(y, n_samples: int) -> np.ndarray:
    """Turns `y` into a float {0, 1} matrix of shape `(n, q)` or raises a `ValueError` that names `y`.

    Documented handling: a 2-D `y` (also `(n, 1)`) is a label indicator matrix and must hold only 0/1. A 1-D `y`
    holds class labels: a single binary label when it has two classes, one-hot encoded (multi-class as multi-label)
    when it has more, like scikit-learn's `LabelBinarizer`.
    """
    if y is None:
        raise ValueError("GPMFSSelector requires y to be passed, but the target y is None")
    if sp.issparse(y):
        y = y.toarray()
    y = np.asarray(y)
    if y.shape[0] != n_samples:
        raise ValueError(f"y has {y.shape[0]} rows but X has {n_samples} samples")
    if y.ndim == 1:
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"y has a single class {classes.tolist()}; GPMFS needs positives and negatives (1 class)")
        Y = LabelBinarizer().fit_transform(y).astype(np.float64)
    elif y.ndim == 2:
        if y.dtype.kind not in "biuf":
            raise ValueError(f"y must be a binary indicator matrix of 0/1 numbers, got dtype {y.dtype}")
        values = np.unique(y)
        if np.any(np.isnan(values.astype(np.float64))) or not np.all(np.isin(values, (0, 1))):
            bad = [v for v in values.tolist() if v not in (0, 1)][:5]
            raise ValueError(f"y must be binary (0/1) for every label; found values {bad}")
        Y = y.astype(np.float64)
    else:
        raise ValueError(f"y must be 1-D or 2-D, got {y.ndim} dimensions")
    empty = np.flatnonzero(Y.sum(axis=0) == 0)
    if empty.size:
        raise ValueError(f"y: label(s) {empty.tolist()} have no positive example; drop them before fitting")
    return Y


# ---------------------------------------------------------------------------------------------------------- estimator
class GPMFSSelector(SelectorMixin, BaseEstimator):
    """Global-plus-personalised multi-label feature selector (scikit-learn estimator).

    Fits the GPMFS objective (see the module docstring), ranks features by the row norms of `W` for the global set
    and picks each label's personal features by the threshold `theta`. `transform(X)` keeps the global set;
    `transform(X, label=j)` keeps label j's set. Paper: https://arxiv.org/abs/2504.12740.

    Args:
        alpha, beta, gamma, lam, rho, k_neighbors, sigma, fit_intercept, max_iter, tol, eps, budget, theta, k_personal,
        equal_budget, seed: the fields of [`GPMFSConfig`], with the same types, defaults and validation.

    Attributes:
        W_ (`np.ndarray` of shape `(d, q)`): label weights; intercept_ (`np.ndarray` of shape `(q,)`).
        ranking_ (`np.ndarray`): all features by decreasing `||w_i||`; feature_importances_: those norms.
        global_indices_ (`np.ndarray`): the global set G (`budget_` features).
        personal_indices_ / label_indices_ (`list[np.ndarray]`): P_j and the final set of each label.
        label_specific_strength_ (`float`): mean_j |P_j| / |G|.
        objective_history_ (`list[float]`), n_iter_ (`int`), n_labels_ (`int`), constant_features_ (`np.ndarray`).

    Example:

    ```python
    >>> sel = GPMFSSelector(budget=10, theta=0.6).fit(X, Y)
    >>> X_global = sel.transform(X)
    >>> X_label0 = sel.transform(X, label=0)
    ```
    """

    def __init__(
        self,
        *,
        alpha=1.0,
        beta=1.0,
        gamma=0.1,
        lam=1.0,
        rho=0.0,
        k_neighbors=5,
        sigma=None,
        fit_intercept=True,
        max_iter=50,
        tol=1e-4,
        eps=1e-8,
        budget=0.2,
        theta=0.5,
        k_personal=0.25,
        equal_budget=True,
        seed=0,
    ):
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.lam = lam
        self.rho = rho
        self.k_neighbors = k_neighbors
        self.sigma = sigma
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.eps = eps
        self.budget = budget
        self.theta = theta
        self.k_personal = k_personal
        self.equal_budget = equal_budget
        self.seed = seed

    # -- config <-> params
    @property
    def config(self) -> GPMFSConfig:
        """The current parameters as a validated [`GPMFSConfig`] (raises `ValueError` naming a bad field)."""
        return GPMFSConfig(**{f.name: getattr(self, f.name) for f in fields(GPMFSConfig)})

    @classmethod
    def from_config(cls, config: GPMFSConfig) -> GPMFSSelector:
        return cls(**{f.name: getattr(config, f.name) for f in fields(GPMFSConfig)})

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        return tags

    # -- fitting
    def fit(self, X, y):
        """Solves the GPMFS objective on `X` (n x d) and the binary label matrix `y` (n x q), then selects.

        Args:
            X (array-like of shape `(n, d)`): features; NaN/inf raise, constant columns rank last (with a warning).
            y (array-like of shape `(n, q)` or `(n,)`): binary labels; see [`validate_targets`].
        """
        config = self.config
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] > MAX_FEATURES:  # before any copy of a huge input
            raise ValueError(
                f"X has {shape[1]} features; GPMFS supports at most {MAX_FEATURES} (it builds d x d "
                "matrices): pre-select columns first"
            )
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        if X.shape[1] > MAX_FEATURES:
            raise ValueError(
                f"X has {X.shape[1]} features; GPMFS supports at most {MAX_FEATURES} (it builds d x d "
                "matrices): pre-select columns first"
            )
        Y = validate_targets(y, X.shape[0])
        budget = config.budget_for(X.shape[1])
        Xs, constant = minmax_scale(X)
        if constant.any():
            warnings.warn(
                f"X: features {np.flatnonzero(constant).tolist()[:10]} are constant; they get zero weight "
                "and rank last",
                UserWarning,
                stacklevel=2,
            )
        solution = solve_gpmfs(Xs, Y, config)
        W = solution.W.copy()
        W[constant] = 0.0  # exactly zero (not 1e-17) so they can never outrank an informative feature
        self.W_, self.intercept_ = W, solution.b
        self.objective_history_, self.n_iter_, self.mu_ = solution.objective, solution.n_iter, solution.mu
        self.n_labels_, self.constant_features_ = Y.shape[1], np.flatnonzero(constant)
        self._select(budget)
        return self

    def _select(self, budget: int | None = None) -> None:
        config = self.config
        budget = config.budget_for(self.n_features_in_) if budget is None else budget
        k_p = config.personal_cap_for(budget)
        sel = select_features(self.W_, budget, k_p, config.theta, config.equal_budget)
        self.budget_, self.k_personal_ = budget, k_p
        self.feature_importances_ = np.linalg.norm(self.W_, axis=1)
        self.ranking_, self.global_indices_ = sel.ranking, sel.global_indices
        self.personal_indices_, self.label_indices_ = sel.personal_indices, sel.label_indices
        self.label_specific_strength_ = sel.label_specific_strength

    def with_selection(self, **params) -> GPMFSSelector:
        """A copy with new selection parameters (`budget`, `theta`, `k_personal`, `equal_budget`) applied to the
        already fitted `W_`: no refit, so tuning `theta` costs one selection, not one solve."""
        check_is_fitted(self, "W_")
        allowed = {"budget", "theta", "k_personal", "equal_budget"}
        if set(params) - allowed:
            raise ValueError(f"with_selection only changes {sorted(allowed)}, got {sorted(set(params) - allowed)}")
        new = copy.deepcopy(self)
        new.set_params(**params)
        new._select()
        return new

    # -- selection API
    def _get_support_mask(self):
        check_is_fitted(self, "W_")
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.global_indices_] = True
        return mask

    def get_support(self, indices: bool = False, label: int | None = None):
        """Mask (or indices) of the global set, or of label `label`'s set when given.

        Args:
            indices (`bool`, defaults to `False`): return integer indices instead of a boolean mask.
            label (`int`, *optional*): label index in `[0, n_labels_)`.
        """
        if label is None:
            return super().get_support(indices=indices)
        check_is_fitted(self, "W_")
        if not isinstance(label, (int, np.integer)) or not 0 <= label < self.n_labels_:
            raise ValueError(f"label must be an integer in [0, {self.n_labels_}), got {label!r}")
        idx = self.label_indices_[int(label)]
        if indices:
            return idx.copy()
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[idx] = True
        return mask

    def transform(self, X, label: int | None = None):
        """Keeps the global set (or label `label`'s set) of columns of `X`."""
        if label is None:
            return super().transform(X)
        mask = self.get_support(label=label)
        X = validate_data(self, X, dtype=None, accept_sparse="csr", ensure_all_finite=False, reset=False)
        return X[:, mask]

    def label_feature_sets(self) -> list[np.ndarray]:
        """Feature indices of every label's final set (for per-label classifiers such as [`MLkNN`])."""
        check_is_fitted(self, "W_")
        return [idx.copy() for idx in self.label_indices_]

    # -- Hub artifact (see artifact.py)
    def save_pretrained(self, save_directory) -> None:
        """Writes `config.json` and `model.safetensors` (W, intercept and the selected indices); no pickle."""
        from .artifact import save_pretrained

        save_pretrained(self, save_directory)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **hub_kwargs) -> GPMFSSelector:
        """Loads a fitted selector from a folder or a Hub repo id (`hub_kwargs` go to `hf_hub_download`)."""
        from .artifact import from_pretrained

        return from_pretrained(pretrained_model_name_or_path, **hub_kwargs)
