"""The continued 5-gluon residue, its α′ expansion against the YM + F³ Berends-Giele recursion, and the n x n
symmetric-determinant form: rows 20-21 of `hf-ext reproduce amplitudes` (format of
[`~hf_ext.amplitudes.identities.check_all`]).

Normalisations are not fitted: at n = 3 (exact residue polynomial) and n = 4 (row 17) the Laurent coefficient is
L = 2 A_YM α′² + c_3 α′³ + ... with c_3 = -4 A_F³ (bosonic) and 0 (super) in the perturbiner normalisation of
[`~hf_ext.amplitudes.yang_mills_f3`]; the same constants are predicted at n = 5.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from .five_gluons import predicted_laurent
from .five_gluons_continued import continued_five_gluon
from .gluons import GluonKinematics
from .residues import _term_values, cluster_invariant, laurent_coefficient, residue_terms
from .spinors import SpinorKinematics
from .symmetric_determinant import helicity_integrand, symmetric_determinant_integrand
from .yang_mills import gluon_vectors
from .yang_mills_f3 import f3_amplitude, perturbiner_amplitude

YM_CONSTANT = 2.0  # L_2 / A_YM, measured at n = 3 and 4
F3_CONSTANT = {"bosonic": -4.0, "super": 0.0}  # L_3 / A_F³
CHANNELS_5 = ((0, 1), (1, 2), (2, 3), (1, 2, 3), (2, 3, 4))


def _rel(a, b) -> float:
    return float(abs(complex(a) - complex(b)) / max(abs(complex(b)), 1e-300))


def alpha_coefficients(kin: GluonKinematics, theory: str, points: int = 16, radius: float = 0.3) -> dict[int, complex]:
    """L_1, L_2, L_3 of the continued 5-gluon residue from a circle |α′| = radius / max|s_C| (real kinematics:
    the values on the lower half circle are the conjugates of the upper ones, so `points` / 2 evaluations)."""
    rho = radius / max(abs(cluster_invariant(kin, c)) for c in CHANNELS_5)
    theta = 2 * np.pi * (np.arange(points // 2) + 0.5) / points
    alphas = rho * np.exp(1j * theta)
    upper = np.array([continued_five_gluon(kin, a, theory) for a in alphas])
    alphas = np.concatenate([alphas, alphas.conj()])
    values = np.concatenate([upper, upper.conj()])
    return {k: complex(np.mean(values * alphas ** (-k))) for k in (1, 2, 3)}


def issue42_checks(rng: np.random.Generator, full: bool, row, timed) -> list[dict]:
    rows = []
    theories = ("bosonic", "super") if full else ("bosonic",)

    def continued_agrees():
        worst, extra = 0.0, {}
        kin = GluonKinematics.random(5, rng, -2.0, 2.0, min_channel=1.1)
        for theory in theories:
            ref = laurent_coefficient(kin, 1.25, theory).value
            worst = max(worst, _rel(continued_five_gluon(kin, 1.25, theory).real, ref))
        if full:  # below the tachyon bound the continued super residue is the MSS type-I amplitude
            small = GluonKinematics.random(5, rng, 0.3, 2.0)
            pred = complex(predicted_laurent(small, 0.05).value)
            worst = max(worst, _rel(continued_five_gluon(small, 0.05, "super"), pred))
        return worst, extra

    err, extra, t = timed(continued_agrees)
    rows.append(
        row(
            "20. continued 5-gluon residue (Laurent subtraction in the 6 sector squares) = convergent residue "
            "(α′ = 1.25" + (", bosonic + super; = C_5 α′² MSS at α′ = 0.05)" if full else ", bosonic)"),
            err,
            1e-7,
            t,
            **extra,
        )
    )

    def f3_five():
        kin = GluonKinematics.random(5, rng, -2.0, 2.0)
        k, e, G = gluon_vectors(kin)
        a_ym, a_f3 = perturbiner_amplitude(k, e, G), f3_amplitude(k, e, G)
        worst, extra = 0.0, {}
        for theory in theories:
            c = alpha_coefficients(kin, theory)
            extra[f"L3_{theory}"] = c[3].real
            worst = max(worst, abs(c[1]) / abs(a_ym), _rel(c[2], YM_CONSTANT * a_ym))
            if F3_CONSTANT[theory]:
                worst = max(worst, _rel(c[3], F3_CONSTANT[theory] * a_f3))
            else:
                worst = max(worst, abs(c[3]) / abs(a_f3))
        extra["A_F3_berends_giele"] = complex(a_f3).real
        return worst, extra

    err, extra, t = timed(f3_five)
    rows.append(
        row(
            "20b. 5 gluons, α′ expansion of the continued residue: α′¹ = 0, α′² = 2A_YM, α′³ = -4A_F³ bosonic"
            + (" / 0 super" if full else "")
            + " (YM+F³ Berends-Giele, constants from n = 3, 4)",
            err,
            2e-5,
            t,
            **extra,
        )
    )

    def determinant():
        worst = 0.0
        for n in (4, 5):
            kin = GluonKinematics.random(n, rng, -2.0, 2.0, min_channel=1.1)
            gaps = np.concatenate([np.ones((4, 1)), rng.uniform(0.2, 1.0, (4, n - 2))], axis=1)
            ref = _term_values(kin, 0.9, residue_terms(n, "super"), gaps).sum(axis=0)
            worst = max(worst, float(np.max(np.abs(symmetric_determinant_integrand(kin, 0.9, gaps) / ref - 1))))
            for hel in ("--++", "-+-+", "++++") if n == 4 else ("--+++", "-+-++", "---++"):
                sk = SpinorKinematics.random(n, rng)
                hk = GluonKinematics.from_spinors(sk, hel)
                ref = _term_values(hk, 0.9, residue_terms(n, "super"), gaps).sum(axis=0)
                for value in (helicity_integrand(sk, hel, 0.9, gaps), symmetric_determinant_integrand(hk, 0.9, gaps)):
                    worst = max(worst, float(np.max(np.abs(value / ref - 1))))
        return worst, {}

    err, extra, t = timed(determinant)
    rows.append(
        row(
            "21. n x n symmetric determinant, commutator prefactors of 2n-gon s_ab = Σ (2n-3)!! terms (pointwise, "
            "n = 4, 5; real; helicity: scalar det of 2α′κ[ij]/Z_ij, 2α′κ⟨ij⟩/Z_ij)",
            err,
            1e-11,
            t,
            **extra,
        )
    )
    return rows
