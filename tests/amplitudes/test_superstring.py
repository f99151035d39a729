"""Scaffolded bosonic and superstring amplitudes: the shift rule, the (2n-3)!! terms and their cycles, the 4-scalar
identities of spec §2.7 item 4-5 and picture independence at 6 scalars."""

from collections import Counter

import numpy as np
import pytest

from hf_ext.amplitudes import closed_forms as C
from hf_ext.amplitudes.kinematics import planar_variables, u_variables_from_z
from hf_ext.amplitudes.superstring import (
    bosonic_shift,
    cycle_lengths,
    double_factorial,
    four_scalar_other_picture,
    scaffolded_bosonic_amplitude,
    shift_from_edges,
    superstring_amplitude,
    superstring_terms,
    term_coefficients,
)


def _named(shift):
    return {f"X{i}{j}": int(m) for (i, j), m in zip(planar_variables(6), shift) if m}


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_term_counts_and_cycle_classes(n):
    terms = superstring_terms(n)
    assert len(terms) == double_factorial(2 * n - 3)
    assert sum(t.is_bosonic for t in terms) == 1
    assert all(sum(t.cycles) == 2 * n and t.cycles[0] == 2 for t in terms)  # the special pair is a 2-cycle
    if n == 4:
        assert Counter(t.cycles for t in terms) == {(2, 2, 2, 2): 1, (2, 2, 4): 6, (2, 6): 8}


def test_six_scalar_terms_match_the_spec_table():
    X = np.array([1.3, 1.9, 0.7, 1.9, 1.0, 1.1, 1.7, 1.1, 1.3])
    alpha = 0.8
    terms = {t.label: t for t in superstring_terms(3)}
    assert _named(terms["(34)(56)"].shift) == {"X13": -1, "X15": -1, "X35": -1, "X24": 1, "X26": 1, "X46": 1}
    assert _named(terms["(35)(46)"].shift) == {"X13": -1, "X24": 1, "X25": 1, "X26": 1, "X46": 1}
    assert _named(terms["(36)(45)"].shift) == {"X13": -1, "X24": 1, "X25": 1, "X26": 1}
    assert (terms["(35)(46)"].cycles, terms["(36)(45)"].cycles) == ((2, 4), (2, 4))
    from hf_ext.amplitudes.kinematics import mandelstams, x_value

    s = mandelstams(X, 6)
    coef = dict(zip((t.label for t in superstring_terms(3)), term_coefficients(X, alpha, 3)))
    assert coef["(34)(56)"] == pytest.approx((1 - alpha * x_value(X, 6, 3, 5)) * (1 - alpha * x_value(X, 6, 1, 5)))
    assert coef["(35)(46)"] == pytest.approx(-(alpha**2) * s[2, 4] * s[3, 5])
    assert coef["(36)(45)"] == pytest.approx(alpha**2 * s[2, 5] * s[3, 4])
    np.testing.assert_array_equal(terms["(34)(56)"].shift, bosonic_shift(3))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_shift_rule_pointwise_for_every_term(n):
    rng = np.random.default_rng(n)
    for _ in range(3):
        z = np.sort(rng.uniform(-1, 4, 2 * n))
        u = u_variables_from_z(z)
        pt = 1 / (np.prod(np.diff(z)) * (z[-1] - z[0]))
        for term in superstring_terms(n) + superstring_terms(n, special_pair=n):
            integrand = 1 / np.prod([z[b - 1] - z[a - 1] for a, b in term.edges])
            assert integrand / pt == pytest.approx(np.prod(u**term.shift), rel=1e-10)


def test_cycle_lengths_and_shift_rule_validation():
    assert cycle_lengths([(1, 2), (1, 2), (3, 4), (4, 5), (3, 5)]) == (2, 3)
    with pytest.raises(ValueError, match="2-regular"):
        shift_from_edges(4, [(1, 2), (3, 4)])


def test_bosonic_shift_at_four_points():
    a, b = 1.6, 1.3
    value = float(scaffolded_bosonic_amplitude(np.array([a, b]), 1.0).value)
    assert value == pytest.approx(0.95080498817197479, rel=1e-14)  # = ∫ x^{a-2}(1-x)^b = B(a-1, b+1)
    assert value == pytest.approx(C.beta_amplitude(a - 1, b + 1), rel=1e-14)


def test_super_four_scalars_picture_independence_and_type_i():
    a, b = 1.6, 1.3
    X = np.array([a, b])
    ref = -0.57048299290318487399
    for value in (
        superstring_amplitude(X, 1.0).value,
        superstring_amplitude(X, 1.0, special_pair=2).value,
        four_scalar_other_picture(X, 1.0),
        -b * C.beta_amplitude(a, b),
        C.type_i_four_scalar(a, b),
    ):
        assert float(value) == pytest.approx(ref, rel=1e-14)


def test_super_has_no_tachyon_pole_and_differs_from_bosonic_by_f3_contact():
    # the bosonic 4-scalar amplitude has the tachyon pole at α′X13 = 1; the superstring one is finite there
    near = [np.array([1 + d, 1.3]) for d in (1e-4, -1e-4)]
    bos = [float(scaffolded_bosonic_amplitude(x, 1.0).value) for x in near]
    sup = [float(superstring_amplitude(x, 1.0).value) for x in near]
    assert min(abs(v) for v in bos) > 1e3 and bos[0] * bos[1] < 0
    assert sup[0] == pytest.approx(sup[1], rel=1e-3)
    X, alpha = np.array([0.7, 1.9]), 1e-3  # bosonic - super = α′u + O(α′²), u = -X13 - X24
    diff = float(scaffolded_bosonic_amplitude(X, alpha).value - superstring_amplitude(X, alpha).value)
    assert diff / alpha == pytest.approx(-X.sum(), rel=2e-3)


def test_super_six_scalars_picture_independence():
    rng = np.random.default_rng(7)
    X = rng.uniform(0.3, 1.5, 9)
    odd = [k for k, (i, j) in enumerate(planar_variables(6)) if i % 2 and j % 2]
    X[odd] += 1.0  # α′X_oo > 1: every shifted curve integral converges
    values = [superstring_amplitude(X, 1.0, special_pair=j) for j in (1, 2, 3)]
    for v in values[1:]:
        assert float(v.value) == pytest.approx(float(values[0].value), rel=1e-9)
    # the nested-rule estimate is conservative at N = 6 (coarse 2h, 4h rules): ~1e-6 estimated vs ~1e-11 actual
    assert all(float(v.error) < 1e-5 * abs(float(v.value)) for v in values)


def test_bad_input_names_the_constraint():
    with pytest.raises(ValueError, match="even number of points"):
        superstring_amplitude(np.ones(5), 1.0)
    with pytest.raises(ValueError, match="2n <= 6"):
        superstring_amplitude(np.ones(20), 1.0)
    X = np.full(9, 0.8)
    X[0] = -0.3  # α′X13 - 1 = -1.3: below the continuation's reach (α′X_oo - 1 in (-1, 0) is continued)
    with pytest.raises(ValueError, match="superstring term .* > -1 .* X13"):
        superstring_amplitude(X, 1.0)
    with pytest.raises(ValueError, match="superstring term .* > 0 .* X13"):
        superstring_amplitude(np.full(9, 0.8), 1.0, method="curve")  # the curve integral alone refuses below 1
    with pytest.raises(ValueError, match="special_pair must be in 1..3"):
        superstring_terms(3, special_pair=4)
    with pytest.raises(ValueError, match="number of scaffolding pairs"):
        superstring_terms(7)


def test_cycle_weights_one_definition_pins_each_sign():
    """w_ab = α′s_ab off the flavour pairs, α′X_{2i-1,2i+1} - 1 on them; sgn(μ)(-1)^{n-1} on each term. The gluon
    residues use the same function (residues.py imports it), so a wrong sign here fails the gluon tests too."""
    from hf_ext.amplitudes import residues
    from hf_ext.amplitudes.kinematics import mandelstams, x_value
    from hf_ext.amplitudes.superstring import cycle_weights, matching_weight

    assert residues.cycle_weights is cycle_weights and residues.matching_weight is matching_weight
    rng = np.random.default_rng(3)
    alpha = 0.7
    for n in (2, 3, 4):
        N = 2 * n
        X = rng.uniform(0.5, 2.0, N * (N - 3) // 2)
        s = mandelstams(X, N)
        w = cycle_weights(s, alpha)
        for a in range(1, N + 1):
            for b in range(a + 1, N + 1):
                flavour = a % 2 == 1 and b == a + 1
                assert w[a - 1, b - 1] == pytest.approx(alpha * s[a - 1, b - 1] - flavour, abs=1e-14)
                if flavour:  # s_{2i-1,2i} = X_{2i-1,2i+1} (the scaffolding variable)
                    assert w[a - 1, b - 1] == pytest.approx(alpha * x_value(X, N, a, a + 2) - 1, abs=1e-14)
        # the bosonic term: (-1)^{n-1} prod_{i>=2} (α′X_oo - 1) = prod (1 - α′X_{2i-1,2i+1})
        bos = next(t for t in superstring_terms(n) if t.is_bosonic)
        expected = np.prod([1 - alpha * x_value(X, N, 2 * i - 1, 2 * i + 1) for i in range(2, n + 1)])
        assert float(matching_weight(w, bos)) == pytest.approx(expected, rel=1e-13)
        assert bos.sign == (-1) ** (n - 1)
    # the spec's n = 3 table: (35)(46) enters with -, (36)(45) with + (sgn(μ) of the matching)
    signs = {t.label: t.sign for t in superstring_terms(3)}
    assert signs == {"(34)(56)": 1, "(35)(46)": -1, "(36)(45)": 1}
