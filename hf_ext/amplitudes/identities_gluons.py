"""The helicity, Yang-Mills and 5-gluon identities of `hf-ext reproduce amplitudes` (issue 27), each with its
achieved error and tolerance (rows in the format of [`~hf_ext.amplitudes.identities.check_all`]).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from .closed_forms import veneziano_factor
from .cycle_classes import class_sums
from .five_gluons import _invariants, mss_amplitude, predicted_laurent, residue_normalisation, z_integrals
from .gluons import GluonKinematics, four_gluon_channels, type_i_four_gluon
from .residues import laurent_coefficient
from .spinors import METRIC, SpinorKinematics
from .yang_mills import berends_giele


def _rel(a, b) -> float:
    return float(abs(complex(a) - complex(b)) / max(abs(complex(b)), 1e-300))


def gluon_checks(rng: np.random.Generator, full: bool, row, timed) -> list[dict]:
    """Rows 9-13. `row(identity, error, tolerance, seconds, **extra)` and `timed(fn)` come from identities.py."""
    rows = []

    def bg_parke_taylor():
        worst = 0.0
        for n in (4, 5, 6, 7):
            for hel in ("--" + "+" * (n - 2), "+-" + "+" * (n - 3) + "-"):
                sk = SpinorKinematics.random(n, rng)
                A = berends_giele(sk.momenta(), sk.polarisations(hel), METRIC)
                worst = max(worst, _rel(A, sk.parke_taylor(hel)))
        return worst, {}

    err, extra, t = timed(bg_parke_taylor)
    rows.append(
        row(
            "9. Berends-Giele A_YM = Parke-Taylor i<ab>^4/(<12>...<n1>) (complex momenta, n = 4..7)",
            err,
            1e-9,
            t,
            **extra,
        )
    )

    def mhv4():
        sk = SpinorKinematics.random_positive(4, rng)
        worst, vals = 0.0, {}
        for hel in ("--++", "-+-+"):
            kin = GluonKinematics.from_spinors(sk, hel)
            s, tt = four_gluon_channels(kin)
            alpha = 1.3 / min(s, tt)
            pt = sk.parke_taylor(hel)
            L = complex(laurent_coefficient(kin, alpha).value)
            worst = max(
                worst, _rel(L, residue_normalisation(4) * alpha**2 * veneziano_factor(alpha * s, alpha * tt) * pt)
            )
            small = 1e-6
            worst = max(
                worst, _rel(type_i_four_gluon(kin, small) / (residue_normalisation(4) * small**2), pt) - 10 * small
            )
            vals[hel] = L
        return worst, {"L_super": {k: float(np.real(v)) for k, v in vals.items()}}

    err, extra, t = timed(mhv4)
    rows.append(
        row("10. MHV 4 gluons: residue L_super = C_4 α′² V(α′s,α′t) PT; α′ → 0 closed form → PT", err, 1e-9, t, **extra)
    )

    def five():
        kin = GluonKinematics.random(5, rng, -1.5, 1.5, min_channel=1.2)
        worst, vals = 0.0, {}
        for alpha in (1.0, 1.4) if full else (1.0,):
            L = laurent_coefficient(kin, alpha, nodes=72)
            ref = predicted_laurent(kin, alpha, nodes=24)
            worst = max(worst, _rel(L.value, ref.value))
            vals[f"{alpha:g}"] = float(L.value)
        return worst, {"L_super": vals}

    err, extra, t = timed(five)
    rows.append(
        row(
            "11. 5 gluons: 105-term scaffolding residue = C_5 α′² Σ_σ F^σ A_YM (MSS, C_5 = C_4²/C_3)",
            err,
            1e-10,
            t,
            **extra,
        )
    )

    def mhv5():
        sk = SpinorKinematics.random_positive(5, rng)
        hel = "--+++"
        kin = GluonKinematics.from_spinors(sk, hel)
        S = _invariants(kin)
        alpha = 1.2 / min(S[i, (i + 1) % 5] for i in range(5))
        F23, F32 = z_integrals(S, alpha)
        mhv = float(F23.value) * sk.parke_taylor(hel) + float(F32.value) * sk.parke_taylor(hel, (0, 2, 1, 3, 4))
        L = laurent_coefficient(kin, alpha, nodes=72)
        lim = 1e-4  # α′ → 0 of MSS at the same point: A_YM = PT
        limit = _rel(complex(mss_amplitude(kin, lim).value), sk.parke_taylor(hel))
        return max(_rel(L.value, residue_normalisation(5) * alpha**2 * mhv), limit - 1e3 * lim**2), {
            "alpha0_relative_deviation": limit
        }

    err, extra, t = timed(mhv5)
    rows.append(
        row(
            "12. MHV 5 gluons (split signature): residue = C_5 α′² (F23 PT + F32 PT(13245)); MSS(α′→0) = PT",
            err,
            1e-7,
            t,
            **extra,
        )
    )

    def classes():
        worst = 0.0
        for n in (4, 5) if full else (4,):
            kin = GluonKinematics.random(n, rng, -2.0, 2.0, min_channel=1.1)
            gaps = np.concatenate([np.ones((4, 1)), rng.uniform(0.2, 1.0, (4, n - 2))], axis=1)
            for terms, pred in class_sums(kin, 0.9, gaps).values():
                worst = max(worst, float(np.max(np.abs(terms - pred) / np.abs(pred))))
        return worst, {}

    err, extra, t = timed(classes)
    rows.append(
        row(
            "13. per-cycle-class traces: Σ_class terms = Π_c (-1)^(|c|-1) Σ 2^(|c|-1) α′^|c| tr(F_c) C_Z(c)"
            " × B_rest (pointwise, n = 4" + (", 5)" if full else ")"),
            err,
            1e-10,
            t,
            **extra,
        )
    )
    return rows
