"""Continuation of A_N outside the Euclidean region (every α′X > -1, off the poles), N = 4, 5, 6 (issue 27): against
the Beta and 3F2 closed forms (N = 4, 5), and at N = 6 against the u-equation functional identity with the
convergent fan-rule integrals, the factorisation on the massless pole and, in the Euclidean region, the fan rule."""

import math

import numpy as np
import pytest

from hf_ext.amplitudes import closed_forms as C
from hf_ext.amplitudes.continuation import continued_amplitude, facet_amplitude, wall_rule
from hf_ext.amplitudes.kinematics import crossing_variables, planar_variables, variable_index
from hf_ext.amplitudes.stringy import stringy_amplitude
from hf_ext.amplitudes.superstring import scaffolded_bosonic_amplitude, superstring_amplitude

A6 = np.array([0.6, 1.1, 0.9, 0.7, 1.3, 0.8, 1.2, 0.5, 1.0])  # α′X of the hexagon, planar-variable order
IDX6 = variable_index(6)


def _unit(pairs):
    e = np.zeros(9)
    for p in pairs:
        e[IDX6[p]] += 1
    return e


@pytest.mark.parametrize("a", [0.7, -0.4, -0.93])
def test_wall_rule_is_the_continued_power_integral(a):
    # ∫_0^1 q^{a-1} e^q dq continued in a = Σ_k 1/(k! (a + k)) (the k = 0 term is the facet's 1/a)
    q, w = wall_rule(a, 12)
    exact = sum(1 / (math.factorial(k) * (a + k)) for k in range(40))
    assert w @ np.exp(q) == pytest.approx(exact, rel=1e-12)  # measured 2e-13 at a = -0.93 (Jacobi nodes)
    assert (q.min() == 0) == (a < 0)  # the facet node only where the power integral diverges


def test_four_and_five_points_match_the_closed_forms_outside_the_euclidean_region():
    for a in [(-0.4, 1.3), (-0.3, -0.6), (0.05, 2.5)]:
        assert float(continued_amplitude(np.array(a), 4).value) == pytest.approx(float(C.beta_amplitude(*a)), rel=1e-12)
    for a in [[-0.4, 1.7, 1.2, 0.8, 1.4], [0.3, -0.7, 1.2, -0.2, 0.6], [-0.45, -0.6, -0.3, -0.2, 0.9]]:
        ev = continued_amplitude(np.array(a), 5)
        ref = float(C.five_point_closed_form(np.array(a)))
        assert float(ev.value) == pytest.approx(ref, rel=1e-10)  # measured <= 6e-12 (scipy Jacobi nodes)
    # the Euclidean region: the same number as the spec's reference
    assert float(continued_amplitude(np.array([0.9, 1.7, 1.2, 0.8, 1.4]), 5).value) == pytest.approx(
        0.9153869469374066018, rel=1e-12
    )


def test_six_points_satisfy_the_u_equation_with_convergent_integrals():
    # u_X = 1 - prod_{Y crossing X} u_Y makes A[a] = A[a + e_X] + A[a + Σ_Y e_Y] an identity of meromorphic
    # functions. With α′X13 = -0.4, the e_X13 (resp. the crossing) term is a convergent curve integral (the fan
    # rule, independent code) while the other two are continued: a wrong continuation breaks the identity.
    a = A6.copy()
    a[IDX6[(1, 3)]] = -0.4
    lhs = float(continued_amplitude(a, 6).value)
    for X in [(1, 3), (2, 4)]:
        parts = [
            stringy_amplitude(a + _unit([X]), 1.0, 6),
            stringy_amplitude(a + _unit(crossing_variables(6)[X]), 1.0, 6),
        ]
        assert {p.method for p in parts} == {"curve", "continued"}
        assert lhs == pytest.approx(sum(float(p.value) for p in parts), rel=1e-9)  # measured 8e-12


def test_six_points_factorise_on_the_massless_pole_from_both_sides():
    # α′X13 A_6 -> A_3 x A_5(pentagon 1, 3, 4, 5, 6) as α′X13 -> 0; the average of ±h removes the O(h) term
    h = 1e-3
    vals = []
    for x in (h, -h):
        a = A6.copy()
        a[IDX6[(1, 3)]] = x
        vals.append(x * float(continued_amplitude(a, 6).value))
    residue = facet_amplitude(A6, 6, (1, 3))
    assert abs(vals[0] - vals[1]) > 1e-3 * residue  # the two sides differ at O(h): not a trivial check
    assert (vals[0] + vals[1]) / 2 == pytest.approx(residue, rel=1e-5)  # O(h^2): measured 9e-7


def test_six_points_in_the_euclidean_region_equal_the_fan_rule_and_auto_dispatches():
    assert float(continued_amplitude(A6, 6).value) == pytest.approx(float(stringy_amplitude(A6, 1.0).value), rel=1e-10)
    a = A6.copy()
    a[IDX6[(2, 5)]] = -0.3
    ev = stringy_amplitude(a, 1.0)
    assert ev.method == "continued" and np.isfinite(float(ev.value))
    with pytest.raises(ValueError, match="Euclidean region"):
        stringy_amplitude(a, 1.0, method="curve")  # the curve integral itself still refuses


def test_superstring_six_scalars_below_the_tachyon_bound_are_picture_independent():
    # α′X_oo in (0.6, 0.95): the shift -1 puts every term of every picture in (-0.4, 0), where only the
    # continuation reaches; the three pictures are three different sets of continued A_6 (measured 5e-14)
    rng = np.random.default_rng(3)
    X = rng.uniform(0.3, 1.5, 9)
    odd = [k for k, (i, j) in enumerate(planar_variables(6)) if i % 2 and j % 2]
    X[odd] = rng.uniform(0.6, 0.95, 3)
    vals = [float(superstring_amplitude(X, 1.0, special_pair=j).value) for j in (1, 2, 3)]
    assert vals[1] == pytest.approx(vals[0], rel=1e-10) and vals[2] == pytest.approx(vals[0], rel=1e-10)
    X2 = X.copy()
    X2[odd[0]] = -0.2  # shifted -1.2: beyond one subtraction
    with pytest.raises(ValueError, match="> -1"):
        superstring_amplitude(X2, 1.0)


def test_superstring_six_scalars_have_no_tachyon_pole_across_alpha_x13_equal_one():
    # the abstract's claim at 6 scalars, through the continued region: each term has the pole 1/(α′X13 - 1) (the
    # shifted X13 hits 0), the bosonic string keeps it, the superstring sum cancels it (as test 5c at 4 scalars)
    X = np.array([1.0, 0.9, 1.6, 1.2, 0.6, 1.1, 1.45, 0.9, 0.9])
    h, sup, bos = 1e-2, [], []
    for x in (1 + h, 1 - h):  # 1 + h: shifted X13 = +h (fan rule); 1 - h: -h (continued)
        X[0] = x
        sup.append(float(superstring_amplitude(X, 1.0).value))
        bos.append(float(scaffolded_bosonic_amplitude(X, 1.0).value))
    assert min(abs(b) for b in bos) > 1e2 and bos[0] * bos[1] < 0  # ~ ±416: the tachyon pole
    assert abs(sup[0] - sup[1]) < 5 * h * abs(sup[0])  # continuous: O(h) (measured slope -1.2, value 1.91)


def test_bad_input_names_the_constraint():
    with pytest.raises(ValueError, match="α′X > -1"):
        continued_amplitude(np.array([-1.2, 0.5]), 4)
    with pytest.raises(ValueError, match="pole"):
        continued_amplitude(np.array([0.0, 0.5]), 4)
    with pytest.raises(ValueError, match="N <= 6"):
        continued_amplitude(np.ones(14), 7)
    with pytest.raises(ValueError, match="real"):
        continued_amplitude(np.ones(2) + 0j, 4)
    with pytest.raises(ValueError, match="shape"):
        continued_amplitude(np.ones(3), 4)
    with pytest.raises(ValueError, match="pole"):
        wall_rule(0.0, 8)
