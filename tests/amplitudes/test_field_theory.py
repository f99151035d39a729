"""Field-theory Tr(φ³) and the α′ → 0 limit of the stringy amplitude (spec §2.7 item 6)."""

import numpy as np
import pytest
from scipy.special import zeta

from hf_ext.amplitudes import closed_forms as C
from hf_ext.amplitudes.field_theory import field_theory_amplitude, triangulations
from hf_ext.amplitudes.stringy import stringy_amplitude

X5 = np.array([0.9, 1.7, 1.2, 0.8, 1.4])


def test_triangulations_are_catalan():
    assert [len(triangulations(N)) for N in range(4, 10)] == [2, 5, 14, 42, 132, 429]
    assert all(len(t) == N - 3 for N in (5, 7) for t in triangulations(N))


def test_four_and_five_point_field_theory():
    assert field_theory_amplitude(np.array([0.7, 1.9])) == pytest.approx(1 / 0.7 + 1 / 1.9)
    X13, X14, X24, X25, X35 = X5
    assert field_theory_amplitude(X5) == pytest.approx(
        1 / (X13 * X14) + 1 / (X14 * X24) + 1 / (X24 * X25) + 1 / (X25 * X35) + 1 / (X35 * X13)
    )
    with pytest.raises(ValueError, match="propagator pole"):
        field_theory_amplitude(np.array([0.0, 1.0]))


def test_four_point_alpha_expansion_coefficients():
    X, Y = 0.7, 1.9
    c = C.four_point_alpha_series(X, Y, 3)
    assert c[:,] == pytest.approx([1 / X + 1 / Y, 0, -zeta(2) * (X + Y), zeta(3) * (X + Y) ** 2])
    alpha = 1e-3  # the spec's check: residual after two terms / α′³ = 8.113 vs ζ(3)(X+Y)² = 8.126
    resid = (alpha * C.beta_amplitude(alpha * X, alpha * Y) - c[0] - c[2] * alpha**2) / alpha**3
    assert resid == pytest.approx(8.113, abs=1e-3) and c[3] == pytest.approx(8.126, abs=1e-3)
    c5 = C.four_point_alpha_series(X, Y, 5)
    for alpha in (1e-2, 3e-3):  # the truncation error is O(α′^6)
        partial = sum(c5[k] * alpha**k for k in range(6))
        assert abs(alpha * C.beta_amplitude(alpha * X, alpha * Y) - partial) < 10 * abs(c5[5]) * alpha**6


def test_five_point_field_theory_limit_with_richardson():
    ft = field_theory_amplitude(X5)

    def f(alpha):
        return alpha**2 * float(stringy_amplitude(X5, alpha).value)

    assert abs(f(0.01) / ft - 1) < 5e-4  # first correction is O(α′²)
    rich = (4 * f(0.005) - f(0.01)) / 3
    assert abs(rich / ft - 1) < 2e-6
    assert abs(rich / ft - 1) < abs(f(0.005) / ft - 1) / 50


def test_six_point_curve_integral_approaches_field_theory():
    X = np.array([1.3, 1.9, 0.7, 1.9, 1.0, 1.1, 1.7, 1.1, 1.3])
    ft = field_theory_amplitude(X)
    # a coarser rule (step 0.4) keeps this fast; its estimated error is still < 1e-6 relative
    evs = [stringy_amplitude(X, alpha, step=0.4) for alpha in (0.1, 0.05)]
    assert all(float(e.error) < 1e-6 * float(e.value) for e in evs)
    values = [alpha**3 * float(e.value) for alpha, e in zip((0.1, 0.05), evs)]
    errors = [abs(v / ft - 1) for v in values]
    assert errors[1] < 0.02 and errors[1] < errors[0] / 3  # O(α′²) convergence
