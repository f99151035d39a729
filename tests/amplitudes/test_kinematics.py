"""Planar kinematics: variable counts, the spec's Mandelstam examples, inverses, momenta, u-variables."""

import numpy as np
import pytest

from hf_ext.amplitudes import kinematics as K


def test_counts_and_spec_examples():
    assert [len(K.planar_variables(N)) for N in range(4, 9)] == [N * (N - 3) // 2 for N in range(4, 9)]
    assert K.x_labels(5) == ["X13", "X14", "X24", "X25", "X35"]
    s = K.mandelstams(np.array([0.7, 1.9]), 4)
    # N = 4: s12 = s34 = X13, s23 = s14 = X24, s13 = -X13 - X24
    assert s[0, 1] == s[2, 3] == 0.7 and s[1, 2] == s[0, 3] == 1.9 and s[0, 2] == pytest.approx(-2.6)
    X = K.random_planar_kinematics(6, rng=np.random.default_rng(3))
    s, x = K.mandelstams(X, 6), lambda i, j: float(K.x_value(X, 6, i, j))
    assert s[2, 4] == pytest.approx(x(3, 6) - x(3, 5) - x(4, 6))  # s35
    assert s[3, 5] == pytest.approx(x(1, 4) - x(1, 5) - x(4, 6))  # s46
    assert s[2, 5] == pytest.approx(x(1, 3) - x(1, 4) - x(3, 6) + x(4, 6))  # s36
    assert (s[3, 4], s[2, 3], s[4, 5]) == pytest.approx((x(4, 6), x(3, 5), x(1, 5)))  # s45, s34, s56


@pytest.mark.parametrize("N", [4, 5, 6, 8])
def test_mandelstams_conserve_momentum_and_invert(N):
    X = K.random_planar_kinematics(N, 5, rng=np.random.default_rng(N), low=-3, high=3)
    s = K.mandelstams(X, N)
    np.testing.assert_allclose(s.sum(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(K.planar_from_mandelstams(s), X, atol=1e-12)


def test_momenta_to_planar_matches_dot_products():
    p = K.random_massless_momenta(6, np.random.default_rng(0))
    metric = np.diag([1.0, -1, -1, -1])
    np.testing.assert_allclose(p.sum(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(np.einsum("ai,ij,aj->a", p, metric, p), 0, atol=1e-12)
    X = K.momenta_to_planar(p)
    s = 2 * p @ metric @ p.T
    np.fill_diagonal(s, 0)
    np.testing.assert_allclose(K.mandelstams(X, 6), s, atol=1e-12)
    P = p[0] + p[1]  # X13 = (p1 + p2)^2
    assert K.x_value(X, 6, 1, 3) == pytest.approx(P @ metric @ P)


@pytest.mark.parametrize("N", [4, 6, 8])
def test_u_equations_and_koba_nielsen_pointwise(N):
    rng = np.random.default_rng(N)
    z = np.sort(rng.uniform(-2, 5, N))
    u = K.u_variables_from_z(z)
    assert np.all((u > 0) & (u < 1))
    idx = K.variable_index(N)
    for chord, crossing in K.crossing_variables(N).items():
        assert u[idx[chord]] + np.prod([u[idx[c]] for c in crossing]) == pytest.approx(1, abs=1e-12)
    X = K.random_planar_kinematics(N, rng=rng, low=-2, high=2)
    assert K.koba_nielsen(z, K.mandelstams(X, N), 0.7) == pytest.approx(np.prod(u ** (0.7 * X)), rel=1e-12)


def test_dict_input_and_clear_errors():
    X = K.as_planar_array({"X13": 1.0, "X14": 2.0, (2, 4): 3.0, "X25": 4.0, "X35": 5.0}, 5)
    assert X.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(ValueError, match="missing planar variables.*X35"):
        K.as_planar_array({"X13": 1, "X14": 2, "X24": 3, "X25": 4}, 5)
    with pytest.raises(ValueError, match="X1,5 vanishes identically"):
        K.as_planar_array({"X15": 1}, 5)
    with pytest.raises(ValueError, match="N = 5 has 5 planar variables"):
        K.as_planar_array(np.ones(4), 5)
    with pytest.raises(ValueError, match="N \\(number of points\\) must be an integer"):
        K.planar_variables(3)
    with pytest.raises(ValueError, match="momentum conservation"):
        K.planar_from_mandelstams(np.ones((4, 4)) - np.eye(4))
    with pytest.raises(ValueError, match="massless"):
        K.momenta_to_planar(np.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0], [1, 0, 0, 1], [-1, 0, 0, -1]]))
