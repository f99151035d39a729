"""Issue 42: the continued 5-gluon residue and its α′ expansion (F³ at n = 5), the n x n symmetric determinant."""

import math

import mpmath
import numpy as np
import pytest

from hf_ext.amplitudes.five_gluons import predicted_laurent
from hf_ext.amplitudes.five_gluons_continued import _rule, continued_five_gluon
from hf_ext.amplitudes.gluons import GluonKinematics
from hf_ext.amplitudes.identities_issue42 import alpha_coefficients
from hf_ext.amplitudes.residues import _term_values, laurent_coefficient, residue_terms
from hf_ext.amplitudes.spinors import SpinorKinematics, angle, square
from hf_ext.amplitudes.symmetric_determinant import (
    derangements,
    helicity_constant,
    helicity_integrand,
    helicity_matrix,
    symmetric_determinant_integrand,
)
from hf_ext.amplitudes.yang_mills import gluon_vectors
from hf_ext.amplitudes.yang_mills_f3 import f3_amplitude, perturbiner_amplitude


def _rel(a, b):
    return abs(complex(a) - complex(b)) / abs(complex(b))


def test_continued_rule_matches_the_convergent_integral_and_its_continuation():
    # ∫_0^1 x^p (x^-2 / (1 + x) + 3 / x) dx: convergent for p > 1; the continuation of x^{p-2} pieces below
    f = lambda x: x**-2 / (1 + x) + 3 / x  # noqa: E731
    for p in (2.5, 0.3, -0.4 + 0.2j):
        nodes, weights = _rule(p, 0.025, 32, 12)
        # closed form (continued): ∫_0^1 x^{s-1} / (1 + x) dx = [ψ((s + 1) / 2) - ψ(s / 2)] / 2 with s = p - 1
        s = p - 1
        exact = complex((mpmath.digamma((s + 1) / 2) - mpmath.digamma(s / 2)) / 2) + 3 / p
        assert abs(weights @ f(nodes) - exact) < 2e-8 * abs(exact)  # measured 1e-10 .. 5e-9 (x^{-2.4} here)


@pytest.fixture(scope="module")
def five():
    return GluonKinematics.random(5, np.random.default_rng(7), -2.0, 2.0, min_channel=1.1)


def test_continued_five_gluon_equals_the_convergent_residue(five):
    ref = laurent_coefficient(five, 1.25, "bosonic")
    assert _rel(continued_five_gluon(five, 1.25, "bosonic"), ref.value) < 1e-7
    ref = laurent_coefficient(five, 1.25, "tr_phi3")
    assert _rel(continued_five_gluon(five, 1.25, "tr_phi3"), ref.value) < 1e-7


@pytest.mark.slow
def test_continued_five_gluon_super_convergent_and_type_i():
    kin = GluonKinematics.random(5, np.random.default_rng(8), -2.0, 2.0, min_channel=1.1)
    assert _rel(continued_five_gluon(kin, 1.25, "super"), laurent_coefficient(kin, 1.25, "super").value) < 1e-7
    small = GluonKinematics.random(5, np.random.default_rng(9), 0.3, 2.0)
    assert _rel(continued_five_gluon(small, 0.05, "super"), predicted_laurent(small, 0.05).value) < 1e-7


def test_five_gluon_alpha_expansion_is_ym_plus_f3():
    kin = GluonKinematics.random(5, np.random.default_rng(11), -2.0, 2.0)
    k, e, G = gluon_vectors(kin)
    c = alpha_coefficients(kin, "bosonic")
    a_ym, a_f3 = perturbiner_amplitude(k, e, G), f3_amplitude(k, e, G)
    assert abs(c[1]) < 2e-5 * abs(a_ym)
    assert _rel(c[2], 2 * a_ym) < 2e-5
    assert _rel(c[3], -4 * a_f3) < 2e-5  # the constant measured at n = 3 and 4


def test_continued_five_gluon_refuses_bad_input(five):
    with pytest.raises(ValueError, match="5 gluons"):
        continued_five_gluon(GluonKinematics.random(4), 1.0)
    with pytest.raises(TypeError, match="alpha"):
        continued_five_gluon(five, None)
    with pytest.raises(TypeError, match="alpha"):
        continued_five_gluon(five, "1.0")
    with pytest.raises(ValueError, match="alpha"):
        continued_five_gluon(five, float("nan"))
    with pytest.raises(ValueError, match="alpha"):
        continued_five_gluon(five, 0.0)
    with pytest.raises(ValueError, match="circle"):
        continued_five_gluon(five, 1.0, circle=4)
    with pytest.raises(ValueError, match="theory"):
        continued_five_gluon(five, 1.0, "heterotic")


def test_derangement_counts_and_signs():
    assert [len(derangements(tuple(range(m)))) for m in (1, 2, 3, 4)] == [0, 1, 2, 9]
    # Σ sgn over derangements of m letters = (-1)^{m-1} (m - 1)
    for m in (2, 3, 4):
        assert sum(s for s, _ in derangements(tuple(range(m)))) == (-1) ** (m - 1) * (m - 1)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_symmetric_determinant_equals_the_pfaffian_sum_real(n):
    rng = np.random.default_rng(n)
    kin = GluonKinematics.random(n, rng, -2.0, 2.0, min_channel=1.1)
    gaps = np.concatenate([np.ones((6, 1)), rng.uniform(0.2, 1.0, (6, n - 2))], axis=1)
    ref = _term_values(kin, 0.9, residue_terms(n, "super"), gaps).sum(axis=0)
    assert np.max(np.abs(symmetric_determinant_integrand(kin, 0.9, gaps) / ref - 1)) < 1e-11
    # the bosonic term alone is not the sum: the cycle prefactors matter
    bos = _term_values(kin, 0.9, residue_terms(n, "bosonic"), gaps)[0]
    assert np.max(np.abs(bos / ref - 1)) > 1e-3


@pytest.mark.parametrize("hel", ["--++", "-+-+", "++++", "--+++", "-+-++", "---++", "+++++"])
def test_scalar_helicity_determinant_equals_the_pfaffian_sum(hel):
    n = len(hel)
    rng = np.random.default_rng(len(hel) * 13 + hel.count("+"))
    sk = SpinorKinematics.random(n, rng)
    kin = GluonKinematics.from_spinors(sk, hel)
    gaps = np.concatenate([np.ones((5, 1)), rng.uniform(0.2, 1.0, (5, n - 2))], axis=1)
    ref = _term_values(kin, 0.9, residue_terms(n, "super"), gaps).sum(axis=0)
    assert np.max(np.abs(helicity_integrand(sk, hel, 0.9, gaps) / ref - 1)) < 1e-11
    assert np.max(np.abs(symmetric_determinant_integrand(kin, 0.9, gaps) / ref - 1)) < 1e-11
    S = helicity_matrix(sk, hel, 0.9, gaps)
    assert np.allclose(S, np.swapaxes(S, -1, -2))  # a symmetric matrix
    assert np.all(S[..., 0, :] == 0) and np.all(S[..., :, 0] == 0)  # leg 1 is always a gluon


def test_helicity_constant_is_universal():
    # κ was read off one fixed point; 2-, 3- and 4-cycles at other points are predictions
    sk = SpinorKinematics.random(5, np.random.default_rng(99))
    for h, hel in ((1, "+++++"), (-1, "-----")):
        kin = GluonKinematics.from_spinors(sk, hel)
        kappa = helicity_constant(h)
        assert abs(abs(kappa) - 1 / math.sqrt(2)) < 1e-12
        b = lambda i, j: square(sk.lamt[i], sk.lamt[j]) if h > 0 else angle(sk.lam[i], sk.lam[j])  # noqa: E731
        for cyc in ((1, 3), (0, 2, 4), (1, 2, 3, 4), (4, 0, 1)):
            pred = kappa ** len(cyc) * np.prod([b(cyc[m], cyc[(m + 1) % len(cyc)]) for m in range(len(cyc))])
            assert _rel(kin.trace(*[c + 1 for c in cyc]) / 2, pred) < 1e-10
    mixed = GluonKinematics.from_spinors(sk, "++-+-")
    assert abs(mixed.trace(1, 3)) < 1e-10 * abs(mixed.trace(1, 2))  # self-dual and anti-self-dual: orthogonal


def test_symmetric_determinant_refuses_bad_input():
    kin = GluonKinematics.random(4, np.random.default_rng(0), -2.0, 2.0)
    with pytest.raises(ValueError, match="empty"):
        symmetric_determinant_integrand(kin, 0.9, np.zeros((0, 3)))
    with pytest.raises(ValueError, match="shape"):
        symmetric_determinant_integrand(kin, 0.9, np.ones((2, 2)))
    with pytest.raises(ValueError, match="> 0"):
        symmetric_determinant_integrand(kin, 0.9, np.array([[1.0, np.nan, 1.0]]))
    with pytest.raises(TypeError, match="alpha"):
        symmetric_determinant_integrand(kin, None, np.ones((1, 3)))
    with pytest.raises(ValueError, match="alpha"):
        symmetric_determinant_integrand(kin, float("nan"), np.ones((1, 3)))
    with pytest.raises(TypeError, match="gaps"):
        symmetric_determinant_integrand(kin, 0.9, [["a", "b", "c"]])
    with pytest.raises(TypeError, match="kin"):
        symmetric_determinant_integrand("kin", 0.9, np.ones((1, 3)))
    with pytest.raises(TypeError, match="sk"):
        helicity_integrand(kin, "--++", 0.9, np.ones((1, 3)))
