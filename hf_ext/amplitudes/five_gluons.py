"""The 5-gluon open-superstring amplitude in the Mafra-Schlotterer-Stieberger form, an independent reference for the
105-term scaffolding residue.

MSS (arXiv:1106.2645, 1106.2646): A(1,2,3,4,5) = F^(23) A_YM(1,2,3,4,5) + F^(32) A_YM(1,3,2,4,5) with the disk
integrals (z_1 = 0, z_4 = 1, z_5 = ∞, 0 < z_2 < z_3 < 1, s_ij = α′(k_i + k_j)^2 = 2α′ k_i.k_j)

    F^(23) = s12 s34 ∫ dz2 dz3 KN / (z12 z34),    F^(32) = s13 s24 ∫ dz2 dz3 KN / (z13 z24),
    KN = prod_{i<j<=4} |z_ij|^{s_ij}.

Both are pole-free (F^(23) -> 1 and F^(32) -> 0 as α′ -> 0, so A -> A_YM(1,2,3,4,5)). The integrals run over the
gaps (z2, z3 - z2, 1 - z3) with the sector rule of [`~hf_ext.amplitudes.sectors`]; they converge for
s12, s34 > 0 and s23, s45, s51 > -1 (in units of α′), which contains the region α′s_(i,i+1) > 1 where the
scaffolding residue converges. A_YM is the Berends-Giele amplitude of [`~hf_ext.amplitudes.yang_mills`].

Normalisation: the scaffolding residues give L_n = C_n α′^2 A_n with Dixon's A_YM; factorisation of a consistent
coupling fixes C_n = c λ^n, so the measured C_3 (exact: 2√2 i) and C_4 predict C_5 = C_4^2 / C_3 with no
fitted constant ([`residue_normalisation`]).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from .gluons import GluonKinematics
from .sectors import simplex_rule
from .stringy import Evaluation, check_alpha
from .yang_mills import ym_amplitude

# Dixon-normalised A_YM times C_n α′^2 is the Laurent coefficient L_n of the scaffolding residue. C_3 = 2√2 i
# (L_3 = -4α′² YM3 and A_3 = i√2 YM3); C_4 = -4i (L_4 = -α′² t8F⁴/(st) V and A_4 = -i t8F⁴/(4 s t)), both
# measured to 1e-15 on random points (tests/amplitudes/test_five_gluons.py).
RESIDUE_NORMALISATION = {3: 2j * np.sqrt(2.0), 4: -4j}
RESIDUE_NORMALISATION[5] = RESIDUE_NORMALISATION[4] ** 2 / RESIDUE_NORMALISATION[3]  # C_n = c λ^n: a prediction


def residue_normalisation(n: int) -> complex:
    """C_n in L_n = C_n α′^2 A_n (A_n in Dixon's normalisation); n = 3, 4, 5."""
    if n not in RESIDUE_NORMALISATION:
        raise ValueError(f"n must be 3, 4 or 5, got {n!r}")
    return RESIDUE_NORMALISATION[n]


def _invariants(kin) -> np.ndarray:
    """2 k_i.k_j (5 x 5); must be real for the worldsheet exponents."""
    s = 2 * kin.dot_products()["kk"]
    if np.max(np.abs(np.imag(s))) > 1e-9 * max(1.0, float(np.max(np.abs(s)))):
        raise ValueError("the Z-integrals need real invariants s_ij = 2k_i.k_j (use real or split-signature momenta)")
    return np.real(s)


def z_integrals(s: np.ndarray, alpha: float, nodes: int = 20) -> tuple[Evaluation, Evaluation]:
    """(F^(23), F^(32)) for gluon invariants s (5 x 5, s_ij = 2k_i.k_j) at α′.

    Raises:
        ValueError: outside the convergent region (α′s12, α′s34 > 0; α′s23, α′s45, α′s51 > -1).
    """
    alpha = float(check_alpha(alpha))
    a = alpha * np.asarray(s, dtype=np.float64)
    s12, s13, s23, s24, s34 = a[0, 1], a[0, 2], a[1, 2], a[1, 3], a[2, 3]
    s45, s51 = s12 + s13 + s23, s23 + s24 + s34  # s_123 = s_45 and s_234 = s_15 by momentum conservation
    edge = (s12 - 1, s23, s34 - 1)
    corner = (s51 - 1, s12 + s34 - 2, s45 - 1)
    if min(edge) <= -1 or min(corner) <= -2:
        raise ValueError(
            f"the Z-integrals converge for α′s12, α′s34 > 0 and α′s23, α′s45, α′s51 > -1; got "
            f"α′(s12, s23, s34, s45, s51) = ({s12:.4g}, {s23:.4g}, {s34:.4g}, {s45:.4g}, {s51:.4g})"
        )

    def rule(m: int):
        g, w = simplex_rule(1.0, edge, corner, m)
        A, B, C = g[:, 0], g[:, 1], g[:, 2]
        z13, z24 = A + B, B + C
        log_kn = s12 * np.log(A) + s13 * np.log(z13) + s23 * np.log(B) + s24 * np.log(z24) + s34 * np.log(C)
        kn = np.exp(log_kn)  # z14 = 1
        return (s12 * s34 * (w @ (kn / (A * C))), s13 * s24 * (w @ (kn / (z13 * z24))))

    fine, coarse = rule(nodes), rule(nodes - 6)
    return tuple(
        Evaluation(np.asarray(f), np.asarray(max(abs(f - c), 1e-15 * abs(f))), "z_integral_sectors")
        for f, c in zip(fine, coarse)
    )


def mss_amplitude(kin: GluonKinematics, alpha, nodes: int = 20) -> Evaluation:
    """The MSS 5-gluon open-superstring amplitude F^(23) A_YM(12345) + F^(32) A_YM(13245) (Dixon-normalised)."""
    if not isinstance(kin, GluonKinematics) or kin.n != 5:
        raise ValueError("mss_amplitude needs GluonKinematics of 5 gluons")
    F23, F32 = z_integrals(_invariants(kin), alpha, nodes)
    A1, A2 = ym_amplitude(kin), ym_amplitude(kin, (0, 2, 1, 3, 4))
    value = complex(F23.value) * A1 + complex(F32.value) * A2
    error = float(F23.error) * abs(A1) + float(F32.error) * abs(A2)
    return Evaluation(np.asarray(value), np.asarray(error), "mss")


def predicted_laurent(kin: GluonKinematics, alpha, nodes: int = 20) -> Evaluation:
    """C_5 α′^2 × [`mss_amplitude`]: what the 105-term scaffolding residue must give."""
    ev = mss_amplitude(kin, alpha, nodes)
    c = residue_normalisation(5) * float(alpha) ** 2
    value = c * complex(ev.value)
    return Evaluation(
        np.asarray(value.real if not kin.is_complex and abs(value.imag) <= 1e-12 * abs(value) else value),
        np.asarray(abs(c) * float(ev.error)),
        "mss",
    )


__all__ = ["mss_amplitude", "predicted_laurent", "residue_normalisation", "z_integrals"]
