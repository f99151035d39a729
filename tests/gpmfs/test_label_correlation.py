"""The explicit label-correlation term rho Tr(W L_C W^T) (issue 39): off by default, exact W-step, monotone solver,
and it pulls co-occurring labels' weight columns together."""

import numpy as np
import pytest
import scipy.linalg

from hf_ext.gpmfs.config import GPMFSConfig
from hf_ext.gpmfs.selector import GPMFSSelector, gpmfs_objective, label_laplacian, w_step


def test_label_laplacian_closed_form():
    Y = np.array([[1, 1, 0], [1, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=float)
    L = label_laplacian(Y)
    C = np.array([[0, 2 / np.sqrt(6), 0], [2 / np.sqrt(6), 0, 0], [0, 0, 0]])
    c = C.sum(axis=1)
    W = np.random.default_rng(0).normal(size=(5, 3))
    # Tr(W L W^T) = 1/2 sum_jk C_jk || w_j / sqrt(c_j) - w_k / sqrt(c_k) ||^2 (label 2 co-occurs with none: free)
    expected = 0.5 * sum(
        C[j, k] * np.sum((W[:, j] / np.sqrt(c[j]) - W[:, k] / np.sqrt(c[k])) ** 2)
        for j in range(2)
        for k in range(2)
        if j != k
    )
    assert np.trace(W @ L @ W.T) == pytest.approx(expected)
    assert np.allclose(L, L.T) and np.linalg.eigvalsh(L).min() > -1e-12


def test_w_step_solves_the_sylvester_system():
    rng = np.random.default_rng(1)
    Xc, Vc = rng.normal(size=(40, 6)), rng.normal(size=(40, 3))
    Y = (rng.random((40, 3)) > 0.5).astype(float)
    H, W0 = Xc.T @ Xc, rng.normal(size=(6, 3))
    L_C = label_laplacian(Y)
    W = w_step(Xc, Vc, H, W0, lam=0.7, mu=0.1, eps=1e-8, rho=5.0, label_eig=scipy.linalg.eigh(L_C))
    D = 1.0 / (2.0 * np.sqrt(np.sum(W0**2, axis=1) + 1e-8))
    M = H + np.diag(0.7 * D + 0.1)
    ref = scipy.linalg.solve_sylvester(M, 5.0 * L_C, Xc.T @ Vc + 0.1 * W0)
    np.testing.assert_allclose(W, ref, rtol=1e-8, atol=1e-10)
    # rho = 0 is the plain ridge solve (today's step)
    np.testing.assert_allclose(w_step(Xc, Vc, H, W0, 0.7, 0.1, 1e-8), np.linalg.solve(M, Xc.T @ Vc + 0.1 * W0))


def test_default_keeps_todays_objective_and_fit(small):
    assert GPMFSConfig().rho == 0.0
    a = GPMFSSelector(budget=4, max_iter=10).fit(small.X, small.Y)
    b = GPMFSSelector(budget=4, max_iter=10, rho=0.0).fit(small.X, small.Y)
    np.testing.assert_array_equal(a.W_, b.W_)
    with pytest.raises(ValueError, match="rho"):
        GPMFSConfig(rho=-1.0)
    assert GPMFSConfig.from_dict(GPMFSConfig(rho=3.0).to_dict()).rho == 3.0


def test_rho_fit_is_monotone_and_ties_cooccurring_labels(small):
    # make labels 0 and 1 co-occur strongly, label 2 independent
    Y = small.Y.copy()
    Y[:, 1] = Y[:, 0]
    Y[:5, 1] = 1 - Y[:5, 1]
    L_C = label_laplacian(Y)
    gaps = []
    for rho in (0.0, 10.0, 1000.0):
        sel = GPMFSSelector(budget=4, rho=rho, max_iter=30).fit(small.X, Y)
        h = np.asarray(sel.objective_history_)
        assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1]))  # block updates never increase the objective
        gaps.append(float(np.trace(sel.W_ @ L_C @ sel.W_.T)))
    assert gaps[0] > gaps[1] > gaps[2]  # a larger weight pulls the correlated columns together
    # the objective the solver reports includes the term
    cfg = GPMFSConfig(rho=10.0)
    W = np.ones((small.X.shape[1], 3))
    base = gpmfs_objective(small.X, Y, W, np.zeros(3), Y, 0 * Y, np.zeros((len(Y),) * 2), np.zeros((12, 12)), cfg)
    no = gpmfs_objective(
        small.X, Y, W, np.zeros(3), Y, 0 * Y, np.zeros((len(Y),) * 2), np.zeros((12, 12)), GPMFSConfig()
    )
    assert base - no == pytest.approx(10.0 * np.trace(W @ L_C @ W.T))


def test_rho_round_trips_through_the_artifact(small, tmp_path):
    sel = GPMFSSelector(budget=4, rho=2.5, max_iter=5).fit(small.X, small.Y)
    sel.save_pretrained(tmp_path / "m")
    back = GPMFSSelector.from_pretrained(tmp_path / "m")
    assert back.rho == 2.5
    np.testing.assert_array_equal(back.W_, sel.W_)
