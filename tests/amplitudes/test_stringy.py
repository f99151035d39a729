"""The stringy Tr(φ³) amplitude: Beta at 4 points, the 5-point amplitude three ways, continuation, bad input."""

import mpmath as mp
import numpy as np
import pytest

from hf_ext.amplitudes import closed_forms as C
from hf_ext.amplitudes.kinematics import random_planar_kinematics
from hf_ext.amplitudes.stringy import CurveRule, g_vectors, stringy_amplitude, u_curve

X5 = np.array([0.9, 1.7, 1.2, 0.8, 1.4])
REF_A5 = {1.0: 0.9153869469374066018, 0.5: 9.340923926751950027}


def test_chart_u_variables_and_g_vectors():
    y = np.array([[0.3], [2.0]])
    np.testing.assert_allclose(u_curve(y, 4), np.c_[1 / (1 + y), y / (1 + y)])  # spec §2.3
    assert g_vectors(4) == {(1, 3): (1,), (2, 4): (-1,)}
    assert len(g_vectors(6)) == 9


@pytest.mark.parametrize("method", ["curve", "closed_form", "mpmath_curve", "mpmath_closed_form"])
def test_four_point_is_beta(method):
    value = stringy_amplitude(np.array([0.7, 1.3]), 1.0, method=method)
    assert float(value.value) == pytest.approx(1.16496662323528, rel=1e-12)
    assert float(value.error) < 1e-10


def test_four_point_curve_batch_and_error_estimates():
    X = random_planar_kinematics(4, 300, rng=np.random.default_rng(1), low=0.02, high=8)
    for alpha in (0.3, 1.0, 3.0):
        ev = stringy_amplitude(X, alpha, method="curve")
        exact = C.beta_amplitude(alpha * X[:, 0], alpha * X[:, 1])
        np.testing.assert_allclose(ev.value, exact, rtol=1e-12)
        assert np.all(ev.error >= 0.5 * np.abs(ev.value - exact))  # estimates are not below the actual error


@pytest.mark.parametrize("alpha", [1.0, 0.5])
@pytest.mark.parametrize("method", ["closed_form", "curve", "worldsheet"])
def test_five_point_three_ways_match_spec_reference(alpha, method):
    ev = stringy_amplitude(X5, alpha, method=method)
    assert float(ev.value) == pytest.approx(REF_A5[alpha], rel=1e-11)
    assert float(ev.error) < 1e-9 * REF_A5[alpha]


def test_five_point_mpmath_closed_form_reference():
    assert float(stringy_amplitude(X5, 1.0, method="mpmath_closed_form").value) == pytest.approx(REF_A5[1.0], rel=1e-15)


def test_five_point_vectorised_paths_agree_on_random_points():
    rng = np.random.default_rng(2)
    X = np.concatenate(
        [
            random_planar_kinematics(5, 60, rng=rng, low=0.03, high=0.6),
            random_planar_kinematics(5, 60, rng=rng, low=0.5, high=15),
        ]
    )
    cf = stringy_amplitude(X, 1.0, method="closed_form")
    curve = stringy_amplitude(X, 1.0, method="curve")
    ws = stringy_amplitude(X, 1.0, method="worldsheet")
    np.testing.assert_allclose(curve.value, cf.value, rtol=1e-11)
    np.testing.assert_allclose(ws.value, cf.value, rtol=1e-10)


def test_hyp3f2_unit_against_mpmath_including_small_excess():
    rng = np.random.default_rng(3)
    for excess in (0.7,):
        a = rng.uniform(-2, 3, 3)
        b = rng.uniform(0.3, 3, 2)
        b[0] += a.sum() - b.sum() + excess
        with mp.workdps(20):
            ref = float(mp.hyp3f2(*a, *b, 1))
        assert C.hyp3f2_unit(*a, *b) == pytest.approx(ref, rel=1e-12)
    # excess 0.02, where mpmath's series acceleration gives up: Thomae's relation moves the excess to a2 = 1.2
    a1, a2, a3, b1 = 0.7, 1.2, 0.5, 1.4
    b2 = a1 + a2 + a3 - b1 + 0.02
    with mp.workdps(25):
        s = b1 + b2 - a1 - a2 - a3
        ref = float(
            mp.gamma(b1)
            * mp.gamma(b2)
            * mp.gamma(s)
            / (mp.gamma(a2) * mp.gamma(s + a1) * mp.gamma(s + a3))
            * mp.hyp3f2(b1 - a2, b2 - a2, s, s + a1, s + a3, 1)
        )
    assert C.hyp3f2_unit(a1, a2, a3, b1, b2) == pytest.approx(ref, rel=1e-13)


def test_analytic_continuation_matches_gamma_functions_and_rotations():
    # 4 points: Γ(a)Γ(b)/Γ(a+b) off the Euclidean region
    with mp.workdps(30):
        assert float(stringy_amplitude(np.array([-0.5, 1.3]), 1.0).value) == pytest.approx(
            float(mp.beta(-0.5, 1.3)), rel=1e-13
        )
    # 5 points with X14, X25 < 0: the rotation with the largest α′X as excess (mpmath series on that rotation)
    aX = np.array([0.5, -0.3, 1.2, -0.7, 0.9])
    A13, A14, A24, A25, A35 = aX[C.PENTAGON_ROTATIONS[2]]
    assert A25 == 1.2
    with mp.workdps(30):
        ref = float(
            mp.beta(A13, A24) * mp.beta(A14, A35) * mp.hyp3f2(A13, A14, A24 + A35 - A25, A13 + A24, A14 + A35, 1)
        )
    assert float(stringy_amplitude(aX, 1.0).value) == pytest.approx(ref, rel=1e-12)


def test_curve_rule_grows_only_logarithmically_with_small_alpha_x():
    # the far end of the rule moves like asinh(40 / α′X_min): 1000x smaller α′X costs < 4x nodes at N = 5
    assert CurveRule.for_kinematics(5, 1e-3).size < 4 * CurveRule.for_kinematics(5, 1.0).size
    small = np.array([0.002, 0.5, 0.7, 0.9, 1.1])
    assert float(stringy_amplitude(small, 1.0, method="curve").value) == pytest.approx(
        float(stringy_amplitude(small, 1.0).value), rel=1e-11
    )


def test_bad_input_names_the_constraint():
    with pytest.raises(ValueError, match="Euclidean region.*X24"):
        stringy_amplitude(np.array([0.7, -0.3]), 1.0, method="curve")
    with pytest.raises(ValueError, match="N <= 6"):
        stringy_amplitude(np.ones(14), 1.0, method="curve")  # N = 7
    with pytest.raises(ValueError, match="N = 4 and 5 only"):
        stringy_amplitude(np.ones(9), 1.0, method="closed_form")
    with pytest.raises(ValueError, match="alpha"):
        stringy_amplitude(X5, -1.0)
    with pytest.raises(ValueError, match="pole"):
        stringy_amplitude(np.array([-1.0, 0.5]), 1.0)
    with pytest.raises(ValueError, match="at least one α′X > 0"):
        stringy_amplitude(-X5, 1.0)
    with pytest.raises(ValueError, match="not N\\(N-3\\)/2"):
        stringy_amplitude(np.ones(3), 1.0)
    with pytest.raises(ValueError, match="method must be one of"):
        stringy_amplitude(X5, 1.0, method="magic")
