"""The F³ amplitude at first α′ order of the scaffolded bosonic string at 4 gluons, via Yang-Mills-scalar
amplitudes, against an independent YM + F³ Berends-Giele recursion; the continued 4-gluon residue it needs; the
determinant form of the residue integrand against the (2n-3)!! sum at n = 3, 4, 5 (issue 27)."""

import numpy as np
import pytest

from hf_ext.amplitudes.alpha_expansion import alpha_series, continued_four_gluon
from hf_ext.amplitudes.cycle_classes import cycle_classes
from hf_ext.amplitudes.determinant_form import determinant_integrand, multilinear_determinant, multilinear_log
from hf_ext.amplitudes.gluons import GluonKinematics, f3, four_gluon_channels, t8f4, type_i_four_gluon
from hf_ext.amplitudes.identities import OCTAGON_REF
from hf_ext.amplitudes.residues import _term_values, laurent_coefficient, residue_terms
from hf_ext.amplitudes.spinors import METRIC, SpinorKinematics
from hf_ext.amplitudes.yang_mills import gluon_vectors, ym_amplitude
from hf_ext.amplitudes.yang_mills_f3 import (
    f3_amplitude,
    f3_via_yms,
    perturbiner_amplitude,
    scalar_pair_amplitude,
    three_scalar_amplitude,
)

OCTAGON = GluonKinematics.from_planar(OCTAGON_REF, 4)


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_perturbiner_yang_mills_is_dixon_up_to_c_lambda_n_and_f3_is_gauge_invariant(n):
    rng = np.random.default_rng(n)
    kin = GluonKinematics.random(n, rng, -2.0, 2.0)
    k, e, G = gluon_vectors(kin)
    ratio = perturbiner_amplitude(k, e, G) / ym_amplitude(kin)
    assert ratio == pytest.approx(1j * (-1) ** (n + 1) * np.sqrt(2.0) ** (n - 2), rel=1e-12)
    amp = f3_amplitude(k, e, G)
    assert abs(amp) > 1e-3
    ward = e.copy()
    ward[0] = k[0]  # ε_1 -> k_1: the F³ insertion amplitude is gauge invariant only with its 4-point contact terms
    assert abs(f3_amplitude(k, ward, G)) < 1e-12 * abs(amp) * 1e2
    if n == 3:
        assert amp == pytest.approx(2 * f3(kin), rel=1e-13)


def test_continued_four_gluon_residue_equals_the_integral_and_the_type_i_closed_form():
    for theory in ("super", "bosonic", "tr_phi3"):
        for alpha in (1.25, 1.6):  # inside the integral's region: the Gauss-Jacobi residue
            assert continued_four_gluon(OCTAGON, alpha, theory).real == pytest.approx(
                float(laurent_coefficient(OCTAGON, alpha, theory).value), rel=1e-11
            )
    for alpha in (0.3, 0.05):  # below the tachyon bound α′s, α′t > 1: only the continuation (and type I) reach
        value = continued_four_gluon(OCTAGON, alpha)
        assert value.real == pytest.approx(type_i_four_gluon(OCTAGON, alpha), rel=1e-12) and abs(value.imag) < 1e-14
    with pytest.raises(ValueError, match="pole"):
        continued_four_gluon(OCTAGON, 1 / 1.5)  # α′s = 1: the bosonic-type terms' tachyon pole


def _expansions(kin, orders=(2, 3)):
    """α′ coefficients of every superstring term, and of the bosonic string = the bosonic term (all 2-cycles, weight
    prod (α′X_oo - 1) sgn = 1 on the residue; checked against theory="bosonic" at one α′)."""
    s, t = four_gluon_channels(kin)
    rho = 0.35 / max(abs(s), abs(t))  # inside the nearest poles α′s, α′t = ±1
    per = alpha_series(lambda a: continued_four_gluon(kin, a, "super", per_term=True), rho, orders=orders)
    empty = cycle_classes(4)[frozenset()]
    assert continued_four_gluon(kin, 0.2, "bosonic") == pytest.approx(
        continued_four_gluon(kin, 0.2, per_term=True)[empty].sum(), rel=1e-13
    )
    return per, {o: v[empty].sum() for o, v in per.items()}


def test_three_gluon_normalisations_fix_every_constant():
    # L = 2 A_YM α′² - 4 A_F³ α′³ in the perturbiner normalisation at 3 gluons (exact, no integral); the same two
    # constants must then hold at 4 gluons (next test) with nothing fitted
    for seed in range(3):
        kin = GluonKinematics.random(3, np.random.default_rng(seed), -2.0, 2.0)
        k, e, G = gluon_vectors(kin)
        alpha = 0.7
        sup = float(laurent_coefficient(kin, alpha).value)
        bos = float(laurent_coefficient(kin, alpha, "bosonic").value)
        assert sup == pytest.approx(2 * alpha**2 * perturbiner_amplitude(k, e, G).real, rel=1e-13)
        assert bos - sup == pytest.approx(-4 * alpha**3 * f3_amplitude(k, e, G).real, rel=1e-13)


@pytest.mark.parametrize("seed", [None, 0])
def test_four_gluon_f3_amplitude_via_yang_mills_scalar_amplitudes(seed):
    kin = OCTAGON if seed is None else GluonKinematics.random(4, np.random.default_rng(seed), -2.0, 2.0)
    k, e, G = gluon_vectors(kin)
    per, bos = _expansions(kin)
    sup = {o: v.sum() for o, v in per.items()}
    s, t = four_gluon_channels(kin)
    # α′²: Yang-Mills in both strings; α′³: no F³ in the superstring, 2 x (the F³ amplitude) in the bosonic one
    assert sup[2].real == pytest.approx(-t8f4(kin) / (s * t), rel=1e-11)
    assert bos[2].real == pytest.approx(2 * perturbiner_amplitude(k, e, G).real, rel=1e-11)
    a_f3 = f3_amplitude(k, e, G).real
    assert abs(sup[3]) < 1e-10 * abs(a_f3)
    assert bos[3].real == pytest.approx(-4 * a_f3, rel=1e-10)  # measured 7e-13
    # the formula: 4 A_F³ = Σ_{classes != ∅} [α′³ of the class] = Σ_{2-cycles ij} 2 tr(F_iF_j) A_YMS(φ_i φ_j)
    # + (3-cycle 234), with the 2-scalar YMS amplitudes from an independent recursion (dimensional reduction)
    total = 0.0
    for cls, idx in cycle_classes(4).items():
        value = per[3][idx].sum().real
        cycles = [sorted(c) for c in cls]
        if len(cycles) == 1 and len(cycles[0]) == 2:
            i, j = cycles[0]
            yms = scalar_pair_amplitude(k, e, G, (i, j)).real
            assert value == pytest.approx(2 * kin.trace(i + 1, j + 1) * yms, rel=1e-10)
        elif cycles:  # the 3-cycle: 8 tr(F2F3F4) x the 1-gluon 3-scalar YMS amplitude
            assert value == pytest.approx(8 * kin.trace(2, 3, 4) * three_scalar_amplitude(k, e, G).real, rel=1e-10)
        total += value
    assert total - bos[3].real == pytest.approx(4 * a_f3, rel=1e-10)


def test_f3_via_yms_is_a_field_theory_identity_in_any_kinematics():
    # the first-α′-order formula with only field-theory amplitudes: real scaffolded kinematics (2n-dim coefficient
    # space) and complex 4-d helicity states alike; F³ has no MHV amplitudes (--++, -+-+ vanish)
    rng = np.random.default_rng(9)
    for n in (3, 4):
        for _ in range(3):
            k, e, G = gluon_vectors(GluonKinematics.random(n, rng, -2.0, 2.0))
            assert f3_via_yms(k, e, G) == pytest.approx(f3_amplitude(k, e, G), rel=1e-11)
    for hel in ("----", "---+", "--++", "-+-+"):
        sk = SpinorKinematics.random(4, rng)
        k, e = sk.momenta(), sk.polarisations(hel)
        amp, formula = f3_amplitude(k, e, METRIC), f3_via_yms(k, e, METRIC)
        scale = abs(perturbiner_amplitude(k, e, METRIC)) + abs(f3_amplitude(k, sk.polarisations("----"), METRIC))
        assert abs(formula - amp) < 1e-11 * scale
        assert (abs(amp) < 1e-11 * scale) == (hel.count("-") == 2)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_determinant_form_equals_the_pfaffian_sum_pointwise(n):
    rng = np.random.default_rng(10 + n)
    kin = GluonKinematics.random(n, rng, -2.0, 2.0, min_channel=1.1 if n > 3 else None)
    gaps = np.concatenate([np.ones((3, 1)), rng.uniform(0.2, 1.0, (3, n - 2))], axis=1)
    total = _term_values(kin, 0.9, residue_terms(n, "super"), gaps).sum(axis=0)
    assert np.allclose(determinant_integrand(kin, 0.9, gaps), total, rtol=1e-12, atol=0)


def test_multilinear_determinant_and_log_are_exact():
    rng = np.random.default_rng(1)
    blocks = rng.normal(size=(3, 3, 2, 2))
    for a in range(3):
        blocks[a, a] = 0
    D = multilinear_determinant(blocks)
    assert D[0] == pytest.approx(1.0)
    # ε-linear: tr(R_a) = 0 (zero diagonal); ε_a ε_b: -tr(R_a R_b) for the 2x2 blocks; all three: det expansion
    ab = -np.trace(blocks[0, 1] @ blocks[1, 0])
    assert D[1] == pytest.approx(0.0, abs=1e-13) and D[3] == pytest.approx(ab, rel=1e-12)
    L = multilinear_log(D)
    c3 = np.trace(blocks[0, 1] @ blocks[1, 2] @ blocks[2, 0]) + np.trace(blocks[0, 2] @ blocks[2, 1] @ blocks[1, 0])
    assert L[7] == pytest.approx(c3, rel=1e-12)  # log det = Σ oriented cycles sgn tr: the 3-cycle sgn is +1


def test_bad_input_names_the_problem():
    k, e, G = gluon_vectors(GluonKinematics.random(3, np.random.default_rng(0), -2.0, 2.0))
    with pytest.raises(ValueError, match="3 <= n <= 6"):
        perturbiner_amplitude(k[:2], e[:2], G)
    with pytest.raises(ValueError, match="shape"):
        perturbiner_amplitude(k, e[:, :3], G)
    with pytest.raises(ValueError, match="two different legs"):
        scalar_pair_amplitude(k, e, G, (1, 1))
    with pytest.raises(ValueError, match="4-point"):
        three_scalar_amplitude(k, e, G)
    k5, e5, G5 = gluon_vectors(GluonKinematics.random(5, np.random.default_rng(0), -2.0, 2.0))
    with pytest.raises(ValueError, match="3 and 4 gluons"):
        f3_via_yms(k5, e5, G5)
    with pytest.raises(ValueError, match="4 gluons"):
        continued_four_gluon(GluonKinematics.random(3, np.random.default_rng(0)), 0.5)
    with pytest.raises(ValueError, match="nonzero"):
        continued_four_gluon(OCTAGON, 0.0)
