"""Gluons from scaffolding residues: 3 gluons (F³ cancellation), 4 gluons (type I), polarisation handling."""

import numpy as np
import pytest

from hf_ext.amplitudes.closed_forms import beta_amplitude
from hf_ext.amplitudes.gluons import GluonKinematics, f3, four_gluon_channels, t8f4, type_i_four_gluon, ym3
from hf_ext.amplitudes.kinematics import random_massless_momenta, x_value
from hf_ext.amplitudes.residues import laurent_coefficient, pole_orders, residue_terms

OCTAGON = dict(
    X13=0,
    X35=0,
    X57=0,
    X17=0,
    X14=0,
    X15=1.5,
    X16=0.5,
    X24=-1.7,
    X25=-1.6,
    X26=1.4,
    X27=-1.4,
    X28=0.3,
    X36=1.7,
    X37=1.2,
    X38=1.2,
    X46=-0.7,
    X47=-1.8,
    X48=-1.5,
    X58=0.7,
    X68=0.6,
)
L_SUPER = {1.25: -1.419781986167, 1.6: -1.353291474341}  # spec §2.7 item 8 (closed form)


@pytest.fixture(scope="module")
def octagon():
    return GluonKinematics.from_planar(OCTAGON, 4)


def test_three_gluons_f3_cancels_in_the_superstring():
    rng = np.random.default_rng(0)
    alpha = 0.7
    design, sup, bos = [], [], []
    for _ in range(6):
        kin = GluonKinematics.random(3, rng, -2.0, 2.0)
        X = lambda i, j: float(x_value(kin.X, 6, i, j))  # noqa: E731
        hexagon = -(alpha**2) * (
            X(1, 4) * X(2, 5)
            - X(1, 4) * X(2, 6)
            + X(1, 4) * X(3, 6)
            - X(2, 4) * X(3, 6)
            + X(2, 5) * X(3, 6)
            - X(2, 5) * X(4, 6)
        )
        ls, terms = laurent_coefficient(kin, alpha, "super", per_term=True)
        lb = float(laurent_coefficient(kin, alpha, "bosonic").value)
        assert float(ls.value) == pytest.approx(hexagon, rel=1e-12, abs=1e-12)
        assert float(ls.value) == pytest.approx(-4 * alpha**2 * ym3(kin), rel=1e-12, abs=1e-12)
        assert lb == pytest.approx(hexagon - alpha**3 * X(1, 4) * X(2, 5) * X(3, 6), rel=1e-12, abs=1e-12)
        assert float(laurent_coefficient(kin, alpha, "tr_phi3").value) == pytest.approx(1.0, rel=1e-13)
        # the two 4-cycle terms carry the trace: L_super - L_bos = -4α′³ tr(F2 F3)(ε1.k2) = 8α′³ F3
        four_cycles = sum(v for v, t in zip(terms, residue_terms(3, "super")) if not all(c == 2 for c in t.cycles))
        ek = kin.dot_products()["ek"]
        assert four_cycles == pytest.approx(-4 * alpha**3 * kin.trace(2, 3) * ek[0, 1], rel=1e-11, abs=1e-12)
        assert four_cycles == pytest.approx(8 * alpha**3 * f3(kin), rel=1e-11, abs=1e-12)
        design.append([ym3(kin), f3(kin)])
        sup.append(float(ls.value))
        bos.append(lb)
    c_sup = np.linalg.lstsq(np.array(design), np.array(sup), rcond=None)[0]
    c_bos = np.linalg.lstsq(np.array(design), np.array(bos), rcond=None)[0]
    np.testing.assert_allclose(c_sup, [-4 * alpha**2, 0.0], atol=1e-12)
    np.testing.assert_allclose(c_bos, [-4 * alpha**2, -8 * alpha**3], atol=1e-12)


def test_four_gluon_reference_kinematics(octagon):
    s, t = four_gluon_channels(octagon)
    assert (s, t) == (1.5, 1.2)
    assert t8f4(octagon) / (s * t) == pytest.approx(1873 / 500, rel=1e-13)
    for alpha, ref in L_SUPER.items():
        assert type_i_four_gluon(octagon, alpha) == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("alpha", [1.25, 1.6, 1.0])
def test_four_gluon_superstring_is_type_i_gauss_jacobi(octagon, alpha):
    ev = laurent_coefficient(octagon, alpha)
    assert float(ev.value) == pytest.approx(type_i_four_gluon(octagon, alpha), rel=1e-11)
    assert float(ev.error) < 1e-10


def test_four_gluon_fast_low_precision_variant(octagon):
    ev = laurent_coefficient(octagon, 1.25, nodes=16)  # 16 nodes: still ~1e-9
    assert float(ev.value) == pytest.approx(L_SUPER[1.25], rel=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [1.25, 1.6])
def test_four_gluon_superstring_is_type_i_mpmath(octagon, alpha):
    ev = laurent_coefficient(octagon, alpha, method="mpmath", dps=20)
    assert float(ev.value) == pytest.approx(type_i_four_gluon(octagon, alpha), rel=1e-13)
    assert float(ev.value) == pytest.approx(L_SUPER[alpha], abs=1e-12)


def test_four_gluon_random_points_and_tr_phi3_residue():
    rng = np.random.default_rng(1)
    for _ in range(4):
        kin = GluonKinematics.random(4, rng, -2.0, 2.0, min_channel=1.1)
        assert float(laurent_coefficient(kin, 1.0).value) == pytest.approx(type_i_four_gluon(kin, 1.0), rel=1e-10)
    kin = GluonKinematics.from_planar(OCTAGON, 4)
    for alpha in (0.3, 0.8):  # Tr φ³ at 8 points: the residue integrates to B(α′X15, α′X37)
        assert float(laurent_coefficient(kin, alpha, "tr_phi3").value) == pytest.approx(
            beta_amplitude(1.5 * alpha, 1.2 * alpha), rel=1e-12
        )
    assert pole_orders(4, "super") == (2, 2) and pole_orders(4, "tr_phi3") == (1, 1)
    assert len(residue_terms(4, "super")) == 15


def _vectors():
    """Physical 4-gluon kinematics with explicit transverse polarisations (ε² != 0 is allowed)."""
    rng = np.random.default_rng(5)
    k = random_massless_momenta(4, rng)
    metric = np.diag([1.0, -1, -1, -1])
    eps = []
    for ki in k:
        v = rng.normal(size=4)
        ref = np.array([1.0, 0, 0, 0]) if abs(ki[0]) > 0 else np.array([0, 1.0, 0, 0])
        # project out k: v - (v.k)/(ref.k) ref keeps v.k = 0
        eps.append(v - (v @ metric @ ki) / (ref @ metric @ ki) * ref)
    return k, np.array(eps), metric


def test_from_vectors_reproduces_lorentz_invariants():
    k, eps, metric = _vectors()
    kin = GluonKinematics.from_vectors(k, eps)
    d = kin.dot_products()
    ee, ek, kk = eps @ metric @ eps.T, eps @ metric @ k.T, k @ metric @ k.T
    np.fill_diagonal(ee, 0)
    np.testing.assert_allclose(d["ee"], ee, atol=1e-12)
    np.testing.assert_allclose(d["ek"], ek, atol=1e-12)
    np.testing.assert_allclose(d["kk"], kk, atol=1e-12)
    F = [np.outer(ki, ei) - np.outer(ei, ki) for ki, ei in zip(k, eps)]  # F^{μν}; as a map F^μ_ν = F^{μρ} g_ρν
    M = [f @ metric for f in F]
    direct = np.trace(M[0] @ M[1] @ M[2] @ M[3])
    assert kin.trace(1, 2, 3, 4) == pytest.approx(direct, rel=1e-10)
    # physical kinematics have s > 0 > t: the residue integral does not converge there, the closed form does
    s, t = four_gluon_channels(kin)
    assert s > 0 > t
    assert np.isfinite(type_i_four_gluon(kin, 0.3))
    with pytest.raises(ValueError, match="converges only for α′t > 1 and α′s > 1"):
        laurent_coefficient(kin, 0.3)


def test_inconsistent_polarisations_and_other_bad_input():
    k, eps, _ = _vectors()
    bad = eps.copy()
    bad[2] = bad[2] + k[2][::-1] * np.array([1.0, 0, 0, 0])  # breaks ε_3.k_3 = 0
    with pytest.raises(ValueError, match="inconsistent polarisation: ε_3.k_3"):
        GluonKinematics.from_vectors(k, bad)
    with pytest.raises(ValueError, match="momentum conservation"):
        GluonKinematics.from_vectors(k + 0.1, eps)
    with pytest.raises(ValueError, match="shape"):
        GluonKinematics.from_vectors(k, eps[:3])
    off = dict(OCTAGON, X35=0.2)
    with pytest.raises(ValueError, match="not on the scaffolding residue: X35"):
        GluonKinematics.from_planar(off, 4)
    kin = GluonKinematics.random(2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="3 to 5 gluons"):
        laurent_coefficient(kin, 1.0)
    with pytest.raises(ValueError, match="theory must be one of"):
        laurent_coefficient(GluonKinematics.random(3), 1.0, "heterotic")
