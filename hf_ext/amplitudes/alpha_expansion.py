"""The 4-gluon scaffolding residue continued to every α′ (complex included) and its α′ expansion.

The residue integral L(α′) = 6 ∫_0^2 dw f(w) of [`~hf_ext.amplitudes.residues.laurent_coefficient`] converges
only where α′t > K0 - 1 and α′s > K2 - 1 (the tachyon bound α′s, α′t > 1 of the bosonic-type terms), so its α′ → 0
expansion, where the F³ amplitude lives, is out of the integral's reach. Near the endpoints
f(w) = w^{α′t} φ_0(w) with φ_0 meromorphic at w = 0 (a pole of order <= K0: the 1/z, 1/z² of the colliding pairs)
and analytic in |w| < 1 (the next singularity is the collision of gluons 1 and 3 at w = -1); likewise at w = 2 with
α′s and v = 2 - w. Split [0, 2] at δ and 2 - δ:

    ∫_0^δ f dw = Σ_{k >= -K0} c_k δ^{α′t + k + 1} / (α′t + k + 1),

with the Laurent coefficients c_k of φ_0 from an FFT on the circle |w| = r (r = 2δ), the unique analytic
continuation in α′ (its poles at α′t = -k - 1 are the physical ones: α′t = 0 the massless pole, α′t = 1 the
tachyon of the bosonic terms), and Gauss-Legendre on [δ, 2 - δ] where f is smooth. Every piece is analytic in α′, so
complex α′ works too, and the α′ expansion follows from the Cauchy integral over a circle |α′| = ρ inside the
nearest pole: L(α′) = Σ_k L_k α′^k with L_k = (1/M) Σ_j L(ρ e^{iθ_j}) (ρ e^{iθ_j})^{-k} (spectrally accurate; the
per-term and per-cycle-class values may have α′^{-1}, α′^{-2}, which the same FFT returns).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from .gluons import GluonKinematics
from .residues import FADDEEV_POPOV, _term_values, cluster_invariant, pole_orders, residue_terms

DELTA = 0.2  # endpoint pieces [0, δ] and [2 - δ, 2]; Taylor circle of radius 2δ (analytic in |w| < 1; the
# coefficients of (1 + w)^{α′s13} grow like k^{|α′s13|}, so the circle stays well inside: 5e-15 measured at α′ = 1.6)
CIRCLE_POINTS = 96
MIDDLE_NODES = 40


def _endpoint(kin, alpha, terms, theory, special_pair, exponent, pole_order, at_zero: bool) -> np.ndarray:
    """Σ_k c_k δ^{e+k+1}/(e+k+1) for every term: the continued ∫ over [0, δ] (or [2 - δ, 2])."""
    M = CIRCLE_POINTS
    theta = 2 * np.pi * np.arange(M) / M
    x = 2 * DELTA * np.exp(1j * theta)  # w (at 0) or v = 2 - w (at 2)
    w = x if at_zero else 2 - x
    gaps = np.stack([np.ones_like(w), w, 2 - w], axis=-1)
    f = _term_values(kin, alpha, terms, gaps, np.log, np.exp, theory, special_pair)  # (terms, M)
    phi = f * np.exp(-exponent * np.log(x))  # single-valued: the exponents differ from e by integers
    ks = np.arange(-pole_order, M // 2)
    coeff = (phi[:, None, :] * x[None, None, :] ** (-ks[None, :, None])).mean(axis=-1)  # (terms, k)
    p = exponent + ks + 1
    return coeff @ (np.exp(p * np.log(DELTA)) / p)


def continued_four_gluon(
    kin: GluonKinematics, alpha, theory: str = "super", special_pair: int = 1, per_term: bool = False
):
    """The 4-gluon Laurent coefficient L(α′) for any α′ (real or complex, off the poles): equal to
    [`~hf_ext.amplitudes.residues.laurent_coefficient`] where that converges, its analytic continuation elsewhere.

    Args:
        kin ([`~hf_ext.amplitudes.gluons.GluonKinematics`]): 4 gluons, real channels s = X15, t = X37.
        alpha (`complex`): α′ (nonzero).
        theory (`str`): `"super"`, `"bosonic"` or `"tr_phi3"`.
        special_pair (`int`): the (-1)-picture pair.
        per_term (`bool`): return the per-term values (order of [`~hf_ext.amplitudes.residues.residue_terms`])
            instead of their sum.

    Raises:
        ValueError: not 4 gluons, α′ = 0 or not finite, or α′s or α′t on a pole of the endpoint series
            (α′s = -k - 1 for an integer k >= -K: the massless pole 0, the tachyon 1, the string poles -1, -2, ...).
    """
    if not isinstance(kin, GluonKinematics) or kin.n != 4:
        raise ValueError("continued_four_gluon needs GluonKinematics of 4 gluons")
    alpha = complex(alpha)
    if alpha == 0 or not np.isfinite(alpha):
        raise ValueError(f"alpha (α′) must be finite and nonzero, got {alpha!r}")
    s_ch, t_ch = cluster_invariant(kin, (0, 1)), cluster_invariant(kin, (1, 2))
    K0, K2 = pole_orders(4, theory, special_pair)
    for name, e, K in (("t", alpha * t_ch, K0), ("s", alpha * s_ch, K2)):
        k = np.arange(-K, CIRCLE_POINTS // 2)
        if np.min(np.abs(e + k + 1)) < 1e-9:
            raise ValueError(
                f"α′{name} = {e:.6g} sits on a pole of the residue (α′{name} + k + 1 = 0 for an integer k >= {-K})"
            )
    terms = residue_terms(4, theory, special_pair)
    lo = _endpoint(kin, alpha, terms, theory, special_pair, alpha * t_ch, K0, True)
    hi = _endpoint(kin, alpha, terms, theory, special_pair, alpha * s_ch, K2, False)
    x, wts = np.polynomial.legendre.leggauss(MIDDLE_NODES)
    half = 1 - DELTA
    w = 1 + half * x + 0j
    gaps = np.stack([np.ones_like(w), w, 2 - w], axis=-1)
    mid = _term_values(kin, alpha, terms, gaps, np.log, np.exp, theory, special_pair) @ (half * wts)
    vals = FADDEEV_POPOV[4] * (lo + hi + mid)
    return vals if per_term else complex(vals.sum())


def alpha_series(fn, radius: float, points: int = 32, orders=range(-2, 6)) -> dict[int, complex]:
    """Laurent coefficients Σ_k L_k α′^k of an analytic-in-α′ function `fn` (a callable returning a number or an
    array) from `points` values on the circle |α′| = `radius` (which must lie inside the nearest pole).
    Aliasing error ~ (radius / pole distance)^points."""
    theta = 2 * np.pi * (np.arange(points) + 0.5) / points  # off the real axis: no evaluation on a real pole
    alphas = radius * np.exp(1j * theta)
    values = np.array([fn(a) for a in alphas])
    out = {}
    for k in orders:
        phase = alphas ** (-k)
        out[k] = np.tensordot(phase, values, axes=(0, 0)) / points
    return out


__all__ = ["alpha_series", "continued_four_gluon"]
