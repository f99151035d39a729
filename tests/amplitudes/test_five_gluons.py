"""5 gluons and helicity amplitudes: the sector rule, Berends-Giele against Parke-Taylor, the 105-term scaffolding
residue against the Mafra-Schlotterer-Stieberger form Σ_σ F^σ A_YM, and MHV 4- and 5-gluon string amplitudes."""

import numpy as np
import pytest
from scipy.special import beta as B
from scipy.special import gamma as G

from hf_ext.amplitudes.closed_forms import veneziano_factor
from hf_ext.amplitudes.five_gluons import (
    _invariants,
    mss_amplitude,
    predicted_laurent,
    residue_normalisation,
    z_integrals,
)
from hf_ext.amplitudes.gluons import GluonKinematics, four_gluon_channels, t8f4, type_i_four_gluon, ym3
from hf_ext.amplitudes.residues import cluster_pole_order, laurent_coefficient, residue_terms
from hf_ext.amplitudes.sectors import simplex_rule
from hf_ext.amplitudes.spinors import METRIC, SpinorKinematics
from hf_ext.amplitudes.yang_mills import berends_giele, ym_amplitude


@pytest.mark.parametrize("p, r", [((0.3, -0.5, 1.2), -0.8), ((-0.7, -0.6, -0.2), 0.4), ((-0.8, -0.8, 0.5), -0.3)])
def test_simplex_rule_integrates_dirichlet_with_a_triple_collision(p, r):
    # ∫ g1^p1 g2^p2 g3^p3 (g1 + g2)^r over g1 + g2 + g3 = L: B(p1+1, p2+1) L^(Σp+r+2) B(p1+p2+r+2, p3+1)
    L = 2.0
    exact = B(p[0] + 1, p[1] + 1) * L ** (sum(p) + r + 2) * B(p[0] + p[1] + r + 2, p[2] + 1)
    g, w = simplex_rule(L, p, (p[1] + p[2], p[0] + p[2], p[0] + p[1] + r), 24)
    f = np.prod(g ** np.array(p), axis=1) * (g[:, 0] + g[:, 1]) ** r
    assert w @ f == pytest.approx(exact, rel=1e-12)
    plain = np.prod(g ** np.array(p), axis=1)  # the plain Dirichlet integral with the same rule's geometry
    g0, w0 = simplex_rule(L, p, (p[1] + p[2], p[0] + p[2], p[0] + p[1]), 24)
    assert w0 @ np.prod(g0 ** np.array(p), axis=1) == pytest.approx(
        L ** (sum(p) + 2) * np.prod([G(q + 1) for q in p]) / G(sum(p) + 3), rel=1e-12
    )
    assert plain.shape == w.shape


@pytest.mark.parametrize("n", [4, 5, 6, 7])
def test_berends_giele_is_parke_taylor_and_gauge_invariant(n):
    rng = np.random.default_rng(n)
    for hel in ("--" + "+" * (n - 2), "+-" + "+" * (n - 3) + "-", "-+" + "+" * (n - 3) + "-"):
        sk = SpinorKinematics.random(n, rng)  # complex momenta
        k, e = sk.momenta(), sk.polarisations(hel)
        A = berends_giele(k, e, METRIC)
        assert A == pytest.approx(sk.parke_taylor(hel), rel=1e-9)
        gauge = e.copy()
        gauge[2] = k[2]  # ε_3 -> k_3: the Ward identity
        assert abs(berends_giele(k, gauge, METRIC)) < 1e-9 * abs(A)
        # a different reference spinor is a gauge transformation
        other = sk.polarisations(hel, refs=[(i + 2) % n for i in range(n)])
        assert berends_giele(k, other, METRIC) == pytest.approx(A, rel=1e-9)
    sk = SpinorKinematics.random(n, rng)
    scale = max(1.0, abs(sk.parke_taylor("--" + "+" * (n - 2))))  # the MHV size, or 1 (roundoff of O(1) terms)
    assert abs(berends_giele(sk.momenta(), sk.polarisations("+" * n), METRIC)) < 1e-9 * scale  # all plus: 0
    one = sk.polarisations("-" + "+" * (n - 1), refs=[1] + [0] * (n - 1))
    assert abs(berends_giele(sk.momenta(), one, METRIC)) < 1e-9 * scale  # one minus: 0


def test_residue_normalisation_measured_at_three_and_four_points():
    rng = np.random.default_rng(0)
    for _ in range(3):
        k3 = GluonKinematics.random(3, rng, -2, 2)
        assert ym_amplitude(k3) == pytest.approx(1j * np.sqrt(2) * ym3(k3), rel=1e-13)
        assert -4 * ym3(k3) / ym_amplitude(k3) == pytest.approx(residue_normalisation(3), rel=1e-13)
        k4 = GluonKinematics.random(4, rng, -2, 2)
        s, t = four_gluon_channels(k4)
        assert -t8f4(k4) / (s * t) / ym_amplitude(k4) == pytest.approx(residue_normalisation(4), rel=1e-12)
    assert residue_normalisation(5) == pytest.approx(4j * np.sqrt(2))  # C_4^2 / C_3


def test_five_gluon_pole_orders_and_terms():
    assert len(residue_terms(5, "super")) == 105
    assert [cluster_pole_order(5, "super", c) for c in ((1, 2), (2, 3), (3, 4), (1, 2, 3), (2, 3, 4))] == [
        2,
        2,
        2,
        3,
        3,
    ]
    assert cluster_pole_order(5, "tr_phi3", (1, 2, 3)) == 2


@pytest.fixture(scope="module")
def five():
    return GluonKinematics.random(5, np.random.default_rng(0), -1.5, 1.5, min_channel=1.2)


def test_five_gluon_superstring_from_105_scaffolding_terms_matches_mss(five):
    """The paper's construction at n = 5 (105 shifted terms, 2-D residue integrals) against the independent MSS
    form F^(23) A_YM(12345) + F^(32) A_YM(13245) with Berends-Giele A_YM, at two α′ (every α′s_(i,i+1) > 1)."""
    for alpha in (1.0, 1.4):
        L = laurent_coefficient(five, alpha, nodes=72)
        ref = predicted_laurent(five, alpha, nodes=24)
        assert float(L.value) == pytest.approx(float(ref.value), rel=1e-11)
        assert float(L.error) < 1e-10 * abs(float(L.value))
    with pytest.raises(ValueError, match="every α′s_\\(i,i\\+1\\) > 1"):
        laurent_coefficient(five, 0.5)


def test_five_gluon_bosonic_differs_and_tr_phi3_residue_is_the_pentagon(five):
    # Tr φ³ on the residue: the 10-gon residue is the 5-point A_5 at the gluon channels
    from hf_ext.amplitudes.stringy import stringy_amplitude

    X = np.array([five.X[i] for i in range(len(five.X))])
    from hf_ext.amplitudes.kinematics import x_value

    pent = np.array([x_value(X, 10, *p) for p in ((1, 5), (1, 7), (3, 7), (3, 9), (5, 9))])  # X13 X14 X24 X25 X35
    alpha = 0.8
    tr = laurent_coefficient(five, alpha, "tr_phi3")
    assert float(tr.value) == pytest.approx(float(stringy_amplitude(alpha * pent, 1.0, 5).value), rel=1e-10)
    bos = laurent_coefficient(five, 1.0, "bosonic")
    sup = laurent_coefficient(five, 1.0)
    assert abs(float(bos.value) - float(sup.value)) > 1e-3 * abs(float(sup.value))  # F³ and more: not the super


def test_mss_field_theory_limit_is_yang_mills(five):
    s = _invariants(five)
    devs = []
    for alpha in (2e-4, 1e-4):
        F23, F32 = z_integrals(s, alpha)
        devs.append((float(F23.value) - 1, float(F32.value)))
        amp = complex(mss_amplitude(five, alpha).value)
        assert amp == pytest.approx(ym_amplitude(five), rel=2e3 * alpha**2)
    # both deviations are O(α′²) (ζ(2) terms): halving α′ divides them by 4
    assert devs[0][0] / devs[1][0] == pytest.approx(4.0, rel=1e-2)
    assert devs[0][1] / devs[1][1] == pytest.approx(4.0, rel=1e-2)


@pytest.mark.parametrize("hel", ["--++", "-+-+", "+--+"])
def test_mhv_four_gluons_helicity_string_amplitude(hel):
    sk = SpinorKinematics.random_positive(4, np.random.default_rng(2))
    kin = GluonKinematics.from_spinors(sk, hel)
    s, t = four_gluon_channels(kin)
    alpha = 1.3 / min(s, t)
    pt = sk.parke_taylor(hel)
    L = laurent_coefficient(kin, alpha)
    assert float(L.value) == pytest.approx(
        residue_normalisation(4) * alpha**2 * veneziano_factor(alpha * s, alpha * t) * pt, rel=1e-10
    )
    for small in (1e-4, 1e-6):  # α′ -> 0 of the closed form: Parke-Taylor
        assert type_i_four_gluon(kin, small) / (residue_normalisation(4) * small**2) == pytest.approx(
            pt, rel=10 * small
        )
    # complex momenta: the t8F⁴ structure is Parke-Taylor too
    skc = SpinorKinematics.random(4, np.random.default_rng(3))
    kc = GluonKinematics.from_spinors(skc, hel)
    assert kc.is_complex
    sc, tc = four_gluon_channels(kc)
    assert -t8f4(kc) / (sc * tc) / residue_normalisation(4) == pytest.approx(skc.parke_taylor(hel), rel=1e-9)
    with pytest.raises(ValueError, match="real channel invariants"):
        laurent_coefficient(kc, 1.0)


@pytest.mark.parametrize("hel", ["--+++", "++-+-"])
def test_mhv_five_gluons_helicity_string_amplitude(hel):
    sk = SpinorKinematics.random_positive(5, np.random.default_rng(2))
    kin = GluonKinematics.from_spinors(sk, hel)
    S = _invariants(kin)
    alpha = 1.2 / min(S[i, (i + 1) % 5] for i in range(5))
    F23, F32 = z_integrals(S, alpha)
    mhv = float(F23.value) * sk.parke_taylor(hel) + float(F32.value) * sk.parke_taylor(hel, order=(0, 2, 1, 3, 4))
    L = laurent_coefficient(kin, alpha, nodes=72)
    assert float(L.value) == pytest.approx(residue_normalisation(5) * alpha**2 * mhv, rel=1e-8)


@pytest.mark.parametrize("n", [4, 5])
def test_per_cycle_class_trace_identities(n):
    """Each cycle class of matchings sums, pointwise on the residue, to its field-strength traces times the
    bosonic integrand of the remaining gluons (spec §2.6); n = 4: classes 1 + 3 + 1, n = 5: 15 classes."""
    from hf_ext.amplitudes.cycle_classes import class_sums, cycle_classes

    rng = np.random.default_rng(n)
    kin = GluonKinematics.random(n, rng, -2.0, 2.0, min_channel=1.1)
    classes = cycle_classes(n)
    sizes = sorted(len(v) for v in classes.values())
    assert sizes == ([1, 2, 2, 2, 8] if n == 4 else [1] + [2] * 6 + [4] * 3 + [8] * 4 + [48])
    gaps = np.concatenate([np.ones((4, 1)), rng.uniform(0.2, 1.0, (4, n - 2))], axis=1)
    worst = 0.0
    for terms, prediction in class_sums(kin, 0.9, gaps).values():
        worst = max(worst, float(np.max(np.abs(terms - prediction) / np.abs(prediction))))
    assert worst < 1e-10


def test_picture_independence_on_the_residue_four_and_five_gluons(five):
    """The (-1) picture on any pair gives the same gluon amplitude (another set of (2n-3)!! terms, other pole
    orders in the residue integrals): the symmetry that is manifest only in the other n - 1 legs."""
    k4 = GluonKinematics.random(4, np.random.default_rng(1), -1.5, 1.5, min_channel=1.2)
    ref4 = float(laurent_coefficient(k4, 1.0).value)
    for pair in (2, 3, 4):
        assert float(laurent_coefficient(k4, 1.0, special_pair=pair).value) == pytest.approx(ref4, rel=1e-12)
    ref5 = float(laurent_coefficient(five, 1.0, nodes=72).value)
    for pair in (3, 5):
        assert float(laurent_coefficient(five, 1.0, special_pair=pair, nodes=72).value) == pytest.approx(
            ref5, rel=1e-11
        )
