"""The GPMFS updates against their closed forms, monotone objective, the selection rule, planted recall."""

import numpy as np
import pytest

from hf_ext.gpmfs.config import GPMFSConfig
from hf_ext.gpmfs.selector import (
    GPMFSSelector,
    gpmfs_objective,
    knn_laplacian,
    minmax_scale,
    redundancy_matrix,
    select_features,
    solve_gpmfs,
    w_step,
)


def _scaled(data, n=200):
    return minmax_scale(data.X[:n])[0], data.Y[:n].astype(float)


def test_laplacian_and_redundancy_structure(small):
    X, _ = _scaled(small)
    L = knn_laplacian(X, 5).toarray()
    np.testing.assert_allclose(L, L.T)
    np.testing.assert_allclose(L.sum(axis=1), 0, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(L) > -1e-10)  # a graph Laplacian is PSD
    assert np.all((L != 0).sum(axis=1) >= 6)  # self + at least k neighbours after symmetrising
    A = redundancy_matrix(np.column_stack([X, np.zeros(len(X))]))
    assert np.all(np.diag(A) == 0) and np.all(A >= 0) and np.all(A[-1] == 0)
    i, j = 0, 1
    cos = X[:, i] @ X[:, j] / np.linalg.norm(X[:, i]) / np.linalg.norm(X[:, j])
    assert A[i, j] == pytest.approx(abs(cos))


def test_w_update_is_the_normal_equation_solution(small, rng):
    X, Y = _scaled(small)
    Xc = X - X.mean(axis=0)
    V = Y + 0.1 * rng.standard_normal(Y.shape)
    Vc = V - V.mean(axis=0)
    # lam = gamma = 0: the W-step is ordinary least squares
    W = w_step(Xc, Vc, Xc.T @ Xc, np.ones((X.shape[1], Y.shape[1])), 0.0, 1e-12, 1e-12)
    np.testing.assert_allclose(W, np.linalg.lstsq(Xc, Vc, rcond=None)[0], atol=1e-6)
    # lam > 0: (X^T X + gamma A + lam D + mu I) W = X^T V + mu W_prev with D_ii = 1 / (2 sqrt(||w_i||^2 + eps))
    A, W_prev = redundancy_matrix(X), rng.standard_normal((X.shape[1], Y.shape[1]))
    lam, gamma, mu, eps = 2.0, 0.3, 1.5, 1e-8
    H = Xc.T @ Xc + gamma * A
    W = w_step(Xc, Vc, H, W_prev, lam, mu, eps)
    D = np.diag(1 / (2 * np.sqrt((W_prev**2).sum(axis=1) + eps)))
    np.testing.assert_allclose(
        np.linalg.solve(H + lam * D + mu * np.eye(len(H)), Xc.T @ Vc + mu * W_prev), W, rtol=1e-8, atol=1e-10
    )


def test_first_iteration_v_and_u_are_closed_forms(small):
    X, Y = _scaled(small)
    cfg = GPMFSConfig(max_iter=1, alpha=0.7, beta=2.0)
    sol = solve_gpmfs(X, Y, cfg)
    L = knn_laplacian(X, cfg.k_neighbors).toarray()
    B = 2 * Y - 1
    # U starts at 0, so V_1 = ((1+alpha) I + beta L)^{-1} (X W_1 + b_1 + alpha Y)
    V = np.linalg.solve((1 + cfg.alpha) * np.eye(len(X)) + cfg.beta * L, X @ sol.W + sol.b + cfg.alpha * Y)
    np.testing.assert_allclose(sol.V, V, atol=1e-7)
    np.testing.assert_allclose(sol.U, np.maximum(B * (sol.V - Y), 0))
    assert np.all(sol.U >= 0)
    # the intercept is the exact minimiser given W
    np.testing.assert_allclose(sol.b, Y.mean(axis=0) - X.mean(axis=0) @ sol.W, atol=1e-10)


@pytest.mark.parametrize("gamma", [0.1, 20.0])  # 20: H = X^T X + gamma A is indefinite, the proximal term is used
def test_objective_decreases_monotonically(yeast, gamma):
    X, Y = _scaled(yeast, n=400)
    cfg = GPMFSConfig(gamma=gamma, max_iter=25, tol=1e-12)
    sol = solve_gpmfs(X, Y, cfg)
    h = np.array(sol.objective)
    assert len(h) > 5
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1])), np.diff(h)
    assert h[-1] < h[0]
    if gamma == 20.0:
        assert sol.mu > 1e-3
    L, A = knn_laplacian(X, 5), redundancy_matrix(X)
    assert gpmfs_objective(X, Y, sol.W, sol.b, sol.V, sol.U, L, A, cfg) == pytest.approx(h[-1])


def test_selection_rule_by_hand():
    # 5 features, 2 labels. Row norms rank 0 > 1 > 2 > 3 > 4 (ties by index).
    W = np.array([[3.0, 3.0], [2.0, 2.0], [0.1, 1.5], [1.2, 0.0], [0.05, 0.0]])
    g = select_features(W, budget=2, k_personal=1, theta=1.0)
    np.testing.assert_array_equal(g.global_indices, [0, 1])
    assert all(len(p) == 0 for p in g.personal_indices) and g.label_specific_strength == 0
    s = select_features(W, budget=2, k_personal=1, theta=0.45)
    # label 1: s = [1, .67, .5, 0, 0]; feature 2 (0.5 >= 0.45) replaces G's weakest for label 1 (feature 1, 0.67)?
    # no: 0.5 < 0.67, so no swap. label 0: s = [1, .67, .03, .4, .02]: feature 3 (0.4) is below theta.
    assert [p.tolist() for p in s.personal_indices] == [[], []]
    s = select_features(W, budget=2, k_personal=1, theta=0.3, equal_budget=False)
    assert [p.tolist() for p in s.personal_indices] == [[3], [2]]
    assert [x.tolist() for x in s.label_indices] == [[0, 1, 3], [0, 1, 2]]
    assert s.label_specific_strength == pytest.approx(0.5)
    W2 = W.copy()
    W2[2, 1] = 2.9  # now feature 2 beats G's weakest member for label 1 (feature 1: 2/3 < 2.9/3)
    e = select_features(W2, budget=2, k_personal=1, theta=0.3)
    assert [x.tolist() for x in e.label_indices] == [[0, 1], [0, 2]]
    assert all(len(x) == 2 for x in e.label_indices)  # equal budget


def test_planted_private_features_are_recovered(planted):
    sel = GPMFSSelector(budget=20, theta=0.4).fit(planted.X, planted.Y)
    recall = np.mean([np.isin(p, s).mean() for p, s in zip(planted.private_features, sel.label_feature_sets())])
    glob = sel.with_selection(theta=1.0)
    recall_g = np.mean([np.isin(p, s).mean() for p, s in zip(planted.private_features, glob.label_feature_sets())])
    assert recall >= 0.85 and recall_g <= 0.4, (recall, recall_g)
    assert np.isin(planted.shared_features, sel.global_indices_).all()  # the shared features lead the global set
    assert sel.label_specific_strength_ > 0 == glob.label_specific_strength_


def test_unbounded_objective_is_a_clear_error():
    """Fewer samples than features: X^T X is singular, so gamma A (zero diagonal, negative eigenvalues) makes the
    objective unbounded below and the weights diverge. The fit says so instead of returning overflowed weights."""
    from hf_ext.gpmfs.planted import make_planted
    from hf_ext.gpmfs.selector import GPMFSSelector

    data = make_planted(n_samples=60, n_features=100, n_shared=4, n_labels=3, n_private=2, seed=0)
    with pytest.raises(ValueError, match=r"gamma=1000 makes the GPMFS objective unbounded below"):
        GPMFSSelector(gamma=1e3).fit(data.X, data.Y)
    sel = GPMFSSelector(gamma=0.0).fit(data.X, data.Y)  # without the redundancy term it is bounded
    assert np.all(np.isfinite(sel.W_))
