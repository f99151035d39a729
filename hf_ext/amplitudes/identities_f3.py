"""The continuation, F³ and determinant-form identities of `hf-ext reproduce amplitudes` (issue 27, second part),
each with its achieved error and tolerance (rows in the format of [`~hf_ext.amplitudes.identities.check_all`]).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from . import closed_forms as C
from .alpha_expansion import alpha_series, continued_four_gluon
from .continuation import continued_amplitude, facet_amplitude
from .cycle_classes import cycle_classes
from .determinant_form import determinant_integrand
from .gluons import GluonKinematics, four_gluon_channels, type_i_four_gluon
from .kinematics import crossing_variables, variable_index
from .residues import _term_values, laurent_coefficient, residue_terms
from .spinors import METRIC, SpinorKinematics
from .stringy import stringy_amplitude
from .yang_mills import gluon_vectors
from .yang_mills_f3 import (
    f3_amplitude,
    f3_via_yms,
    perturbiner_amplitude,
    scalar_pair_amplitude,
    three_scalar_amplitude,
)

A6 = np.array([0.6, 1.1, 0.9, 0.7, 1.3, 0.8, 1.2, 0.5, 1.0])  # α′X of the hexagon (planar-variable order)


def _rel(a, b) -> float:
    return float(abs(complex(a) - complex(b)) / max(abs(complex(b)), 1e-300))


def f3_checks(rng: np.random.Generator, full: bool, row, timed, octagon: GluonKinematics) -> list[dict]:
    """Rows 14-19. `row(identity, error, tolerance, seconds, **extra)` and `timed(fn)` come from identities.py."""
    rows = []

    def continued_45():
        worst = 0.0
        for a in [(-0.4, 1.3), (-0.3, -0.6)]:
            worst = max(worst, _rel(continued_amplitude(np.array(a), 4).value, C.beta_amplitude(*a)))
        for a in [[-0.4, 1.7, 1.2, 0.8, 1.4], [0.3, -0.7, 1.2, -0.2, 0.6], [-0.45, -0.6, -0.3, -0.2, 0.9]]:
            worst = max(worst, _rel(continued_amplitude(np.array(a), 5).value, C.five_point_closed_form(np.array(a))))
        return worst, {}

    err, extra, t = timed(continued_45)
    rows.append(
        row(
            "14. continued A_4, A_5 (α′X in (-1, 0) on 1-4 variables) = Beta / 3F2 closed forms", err, 1e-10, t, **extra
        )
    )

    idx = variable_index(6)

    def continued_6():
        a = A6.copy()
        a[idx[(1, 3)]] = -0.4
        lhs = float(continued_amplitude(a, 6).value)
        worst = 0.0
        for X in [(1, 3), (2, 4)]:
            ex, ey = np.zeros(9), np.zeros(9)
            ex[idx[X]] = 1
            for Y in crossing_variables(6)[X]:
                ey[idx[Y]] += 1
            rhs = float(stringy_amplitude(a + ex, 1.0, 6).value) + float(stringy_amplitude(a + ey, 1.0, 6).value)
            worst = max(worst, _rel(lhs, rhs))
        return worst, {"A6_continued": lhs}

    err, extra, t = timed(continued_6)
    rows.append(
        row(
            "15. continued A_6 (α′X13 = -0.4): u-equation A[a] = A[a+e_X] + A[a+Σ_Y⋔X e_Y], one term a "
            "convergent fan-rule integral (X = X13, X24)",
            err,
            1e-9,
            t,
            **extra,
        )
    )

    def facet_6():
        h, vals = 1e-3, []
        for x in (h, -h):
            a = A6.copy()
            a[idx[(1, 3)]] = x
            vals.append(x * float(continued_amplitude(a, 6).value))
        residue = facet_amplitude(A6, 6, (1, 3))
        return _rel((vals[0] + vals[1]) / 2, residue), {"residue_A3_A5": residue}

    err, extra, t = timed(facet_6)
    rows.append(
        row(
            "15b. continued A_6 on the pole: α′X13 A_6 -> A_3 A_5 from both sides (±1e-3, O(h²))", err, 1e-5, t, **extra
        )
    )

    def continued_4g():
        worst = _rel(continued_four_gluon(octagon, 1.25).real, laurent_coefficient(octagon, 1.25).value)
        worst = max(worst, _rel(continued_four_gluon(octagon, 0.05).real, type_i_four_gluon(octagon, 0.05)))
        return worst, {}

    err, extra, t = timed(continued_4g)
    rows.append(
        row(
            "16. continued 4-gluon residue = Gauss-Jacobi integral (α′ = 1.25) = type I below the tachyon "
            "bound (α′ = 0.05)",
            err,
            1e-11,
            t,
            **extra,
        )
    )

    def f3_string():
        kin = octagon
        k, e, G = gluon_vectors(kin)
        s, tt = four_gluon_channels(kin)
        per = alpha_series(
            lambda a: continued_four_gluon(kin, a, "super", per_term=True), 0.35 / max(abs(s), abs(tt)), orders=(2, 3)
        )
        classes = cycle_classes(4)
        bos = {o: v[classes[frozenset()]].sum().real for o, v in per.items()}
        a_f3, a_ym = f3_amplitude(k, e, G).real, perturbiner_amplitude(k, e, G).real
        worst = max(
            _rel(per[2].sum().real, 2 * a_ym),
            _rel(bos[2], 2 * a_ym),
            abs(per[3].sum()) / abs(a_f3),
            _rel(bos[3], -4 * a_f3),
        )
        for cls, members in classes.items():
            cycles = [sorted(c) for c in cls]
            if not cycles:
                continue
            value = per[3][members].sum().real
            if len(cycles[0]) == 2:
                i, j = cycles[0]
                pred = 2 * kin.trace(i + 1, j + 1) * scalar_pair_amplitude(k, e, G, (i, j)).real
            else:
                pred = 8 * kin.trace(2, 3, 4) * three_scalar_amplitude(k, e, G).real
            worst = max(worst, _rel(value, pred))
        return worst, {"L3_bosonic": bos[3], "A_F3_berends_giele": a_f3, "L3_super": float(abs(per[3].sum()))}

    err, extra, t = timed(f3_string)
    rows.append(
        row(
            "17. 4 gluons, α′ expansion of the continued residue: α′² = 2A_YM (both), α′³: super 0, bosonic "
            "-4A_F³ (YM+F³ Berends-Giele, constants from n = 3), classes = tr(F..) x YMS",
            err,
            1e-9,
            t,
            **extra,
        )
    )

    def f3_field_theory():
        worst = 0.0
        for n in (3, 4):
            for _ in range(4 if full else 2):
                k, e, G = gluon_vectors(GluonKinematics.random(n, rng, -2.0, 2.0))
                worst = max(worst, _rel(f3_via_yms(k, e, G), f3_amplitude(k, e, G)))
        mhv = 0.0
        for hel in ("----", "---+", "--++"):
            sk = SpinorKinematics.random(4, rng)
            k, e = sk.momenta(), sk.polarisations(hel)
            scale = abs(f3_amplitude(k, sk.polarisations("----"), METRIC))
            worst = max(worst, abs(f3_via_yms(k, e, METRIC) - f3_amplitude(k, e, METRIC)) / scale)
            if hel == "--++":
                mhv = abs(f3_amplitude(k, e, METRIC)) / scale
        return max(worst, mhv), {"mhv_over_all_minus": mhv}

    err, extra, t = timed(f3_field_theory)
    rows.append(
        row(
            "18. F³ via YMS: 4A_F³ = Σ 2tr(F_iF_j) A_YMS(φ_iφ_j) + 8tr(F2F3F4) A_YMS(1;φφφ) (n = 3, 4; real "
            "and helicity kinematics; A_F³(--++) = 0)",
            err,
            1e-10,
            t,
            **extra,
        )
    )

    def determinant():
        worst = 0.0
        for n in (4, 5) if full else (4,):
            kin = GluonKinematics.random(n, rng, -2.0, 2.0, min_channel=1.1)
            gaps = np.concatenate([np.ones((4, 1)), rng.uniform(0.2, 1.0, (4, n - 2))], axis=1)
            total = _term_values(kin, 0.9, residue_terms(n, "super"), gaps).sum(axis=0)
            worst = max(worst, float(np.max(np.abs(determinant_integrand(kin, 0.9, gaps) / total - 1))))
        return worst, {}

    err, extra, t = timed(determinant)
    rows.append(
        row(
            "19. determinant form: e^P0 [ε1..εn] e^(P-P0) det(1 + ε_i 2α′ΩΓ_ij/Z_ij)^(1/2) = Σ (2n-3)!! terms "
            "(pointwise, n = 4" + (", 5)" if full else ")"),
            err,
            1e-12,
            t,
            **extra,
        )
    )
    return rows
