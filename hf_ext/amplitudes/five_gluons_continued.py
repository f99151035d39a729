"""The 5-gluon scaffolding residue continued to every α′ (complex included) by Laurent subtraction at the collision
points, and its α′ expansion: the paper's F³ statement ("the first order gives a new formula for gluon amplitudes
with a single F³ insertion") at n = 5.

The residue integral of [`~hf_ext.amplitudes.residues.laurent_coefficient`] over the gaps (a, b, c), a + b + c = 2,
converges only where every α′s_(i,i+1) > 1 (the tachyon bound of the bosonic-type terms). Here the simplex is cut
into the six sector squares of [`~hf_ext.amplitudes.sectors.simplex_rule`] (g_k the largest gap, g_other = G R,
g_small = G R T, G = 2 / (1 + R + R T)). In each square every worldsheet distance is a monomial G^c R^i T^j times a
factor with positive real part near T = R = 0, so the integrand is exactly

    T^{α′σ_T} R^{α′σ_R} Φ(T, R),

with σ_T the channel of the gap that closes at T = 0, σ_R the (triple or double) channel that closes at R = 0, and
Φ single-valued and meromorphic at T = 0 and at R = 0 (poles of the 1/z, 1/z² of the colliding pairs). In each
variable the continued integral splits as in the 4-gluon case ([`~hf_ext.amplitudes.alpha_expansion`]):

    ∫_0^1 x^p Φ dx = Σ_{k >= -K} c_k δ^{p+k+1} / (p + k + 1) + ∫_δ^1 x^p Φ dx,

with the Laurent coefficients c_k from an FFT on the circle |x| = 2δ, and Gauss-Legendre on [δ, 1] (two panels).
Both pieces are linear functionals of the values of Φ, so each variable has one rule (circle nodes with weights
(1/M) Σ_k x_j^{-k} δ^{p+k+1}/(p+k+1), real nodes with weights w_i x_i^p) and the 2-dimensional continuation is their
tensor product. Every piece is analytic in α′ away from the physical poles α′σ = -k - 1, so the result is the unique
analytic continuation; where the original integral converges the two agree (checked by the tests and `reproduce`).

Analyticity radius: in a sector square the nearest non-collision singularity is where the fixed unit gap plus the
"other" gap vanish, |R| ~ 1/3 (and |T| >= 2/3); the circle radius 2δ = 0.1 keeps the FFT aliasing below
(0.1/0.3)^32 ~ 1e-15.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import functools

import numpy as np

from .gluons import GluonKinematics
from .residues import (
    FADDEEV_POPOV,
    _cross_pairs,
    _edge_multiplicities,
    _exp_coefficient,
    cluster_invariant,
    exponent_series,
    residue_terms,
)
from .superstring import cycle_weights, matching_weight

DELTA = 0.025  # endpoint piece [0, δ]; the Laurent circle has radius 2δ
CIRCLE_POINTS = 32
PANEL_NODES = 12  # Gauss-Legendre nodes on each geometric panel [δ, 4δ], [4δ, 16δ], ..., [.., 1]
POLE_ORDER = 8  # Laurent coefficients from k = -8 (the largest pole order at a collision here is 4, the corner 5)
CHUNK = 1024
SECTORS = tuple(
    (k, s, o) for k in range(3) for s, o in ((i, j) for i in range(3) for j in range(3) if i != j != k != i)
)


def _rule(p: complex, delta: float, circle: int, panel: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the continued ∫_0^1 x^p Φ(x) dx (Φ meromorphic at 0, pole order <= POLE_ORDER)."""
    theta = 2 * np.pi * np.arange(circle) / circle
    x = 2 * delta * np.exp(1j * theta)
    ks = np.arange(-POLE_ORDER, circle - POLE_ORDER)
    q = p + ks + 1
    if np.min(np.abs(q)) < 1e-9:
        raise ValueError(f"α′σ = {complex(p):.6g} sits on a pole of the residue (α′σ + k + 1 = 0 for an integer k)")
    coeff = np.exp(q * np.log(delta)) / q  # δ^{p+k+1}/(p+k+1)
    w_circle = (x[:, None] ** (-ks[None, :]) @ coeff) / circle
    t, w = np.polynomial.legendre.leggauss(panel)
    nodes, weights = [x], [w_circle]
    edges = [delta]
    while edges[-1] * 4 < 0.999:
        edges.append(edges[-1] * 4)
    edges.append(1.0)
    for lo, hi in zip(edges[:-1], edges[1:]):  # geometric panels: each sees the pole at 0 from >= 1/3 its length
        xr = lo + (hi - lo) * (t + 1) / 2
        nodes.append(xr + 0j)
        weights.append(w * (hi - lo) / 2 * np.exp(p * np.log(xr)))
    return np.concatenate(nodes), np.concatenate(weights)


@functools.cache
def _sector_data(sector: tuple[int, int, int]):
    """For every cross pair: (c, nR, nT, monomial exponents of the gaps in its range) in this sector square."""
    k, small, other = sector
    mono = {k: (0, 0), other: (1, 0), small: (1, 1)}  # gap index (0: a, 1: b, 2: c) -> (power of R, power of T)
    out = []
    for a, b in _cross_pairs(5):
        ga, gb = (a - 1) // 2, (b - 1) // 2
        gaps = list(range(ga, gb))  # full gap indices: 0 is the fixed unit gap, 1 + m is gap m of (a, b, c)
        if 0 in gaps:
            out.append((0, 0, 0, tuple(g - 1 for g in gaps if g > 0)))
        else:
            ms = [mono[g - 1] for g in gaps]
            nR, nT = min(m[0] for m in ms), min(m[1] for m in ms)
            out.append((1, nR, nT, tuple((m[0] - nR, m[1] - nT) for m in ms)))
    return tuple(out)


def _sector_values(kin, alpha, terms, sector, T, R) -> tuple[np.ndarray, complex, complex]:
    """(Φ per term at the nodes (T, R) incl. the Jacobian and the Faddeev-Popov factor, σ_T, σ_R)."""
    k, small, other = sector
    G = 2.0 / (1 + R + R * T)
    gap = [None, None, None]
    gap[k], gap[other], gap[small] = G, G * R, G * R * T
    full = np.stack([np.ones_like(T), gap[0], gap[1], gap[2]], axis=-1)
    P = exponent_series(kin, alpha, terms, full, log=lambda z: np.zeros(np.shape(z), dtype=complex))
    pairs = _cross_pairs(5)
    data = _sector_data(sector)
    logs, nR, nT = [], np.zeros(len(pairs)), np.zeros(len(pairs))
    for p, (c, r, t, monos) in enumerate(data):
        if c == 0:  # a range through the fixed unit gap: 1 + (gaps), positive real part in the sector square
            logs.append(np.log(1 + sum((gap[g] for g in monos), np.zeros_like(T))))
        else:
            norm = sum(R**i * T**j for i, j in monos)
            logs.append(np.log(G) + np.log(norm))
            nR[p], nT[p] = r, t
    L = np.stack(logs)  # (pairs, nodes)
    s_pairs = np.array([kin.s[a - 1, b - 1] for a, b in pairs])
    mult = _edge_multiplicities(5, tuple(terms))  # (terms, pairs)
    expo = alpha * s_pairs[None, :] - mult
    P0 = expo @ L  # (terms, nodes): the ∅ component without the T, R powers
    mT, mR = mult @ nT, mult @ nR  # integer powers stripped from each term
    sigma_T, sigma_R = complex(s_pairs @ nT), complex(s_pairs @ nR)
    w = cycle_weights(kin.s, alpha)
    jac = 4.0 / (1 + R + R * T) ** 3 * R
    out = np.stack(
        [
            matching_weight(w, term)
            * np.exp(P0[t])
            * T ** (-mT[t])
            * R ** (-mR[t])
            * _exp_coefficient(P[t], term.subset)
            for t, term in enumerate(terms)
        ]
    )
    return FADDEEV_POPOV[5] * out * jac, sigma_T, sigma_R


def _sector_sigmas(kin, sector) -> tuple[float, float]:
    pairs = _cross_pairs(5)
    s_pairs = np.array([kin.s[a - 1, b - 1] for a, b in pairs])
    data = _sector_data(sector)
    nT = np.array([d[2] if d[0] else 0 for d in data])
    nR = np.array([d[1] if d[0] else 0 for d in data])
    return complex(s_pairs @ nT), complex(s_pairs @ nR)


def continued_five_gluon(
    kin: GluonKinematics,
    alpha,
    theory: str = "super",
    *,
    special_pair: int = 1,
    per_term: bool = False,
    delta: float = DELTA,
    circle: int = CIRCLE_POINTS,
    panel: int = PANEL_NODES,
):
    """The 5-gluon Laurent coefficient L(α′) for any α′ (real or complex, off the poles): equal to
    [`~hf_ext.amplitudes.residues.laurent_coefficient`] where that converges (every α′s_(i,i+1) > 1), its analytic
    continuation elsewhere, e.g. the α′ → 0 region where the field-theory and F³ orders live.

    Args:
        kin ([`~hf_ext.amplitudes.gluons.GluonKinematics`]): 5 gluons with real channel invariants.
        alpha (`complex`): α′ (finite, nonzero).
        theory (`str`): `"super"` (105 terms), `"bosonic"` (1 term) or `"tr_phi3"`.
        special_pair (`int`): the (-1)-picture pair.
        per_term (`bool`): return the per-term values (order of [`~hf_ext.amplitudes.residues.residue_terms`]).
        delta (`float`): the endpoint piece [0, δ] of each sector variable (Laurent circle of radius 2δ), in
            [0.01, 0.1].
        circle (`int`): points on the Laurent circle, in [16, 64].
        panel (`int`): Gauss-Legendre nodes per panel, in [6, 40].

    Returns:
        `complex` (or an array of per-term values).

    Raises:
        ValueError: not 5 gluons, α′ zero or not finite, complex channels, a channel on a pole, bad rule sizes.
    """
    if not isinstance(kin, GluonKinematics) or kin.n != 5:
        raise ValueError("continued_five_gluon needs GluonKinematics of 5 gluons")
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, complex, np.number)):
        raise TypeError(f"alpha (α′) must be a number, got {type(alpha).__name__}")
    alpha = complex(alpha)
    if alpha == 0 or not np.isfinite(alpha):
        raise ValueError(f"alpha (α′) must be finite and nonzero, got {alpha!r}")
    if not (isinstance(delta, (int, float)) and 0.01 <= delta <= 0.1):
        raise ValueError(f"delta must be a number in [0.01, 0.1], got {delta!r}")
    for name, value, lo, hi in (("circle", circle, 16, 64), ("panel", panel, 6, 40)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
            raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    for cluster in ((1, 2), (2, 3), (3, 4), (1, 2, 3), (2, 3, 4)):
        cluster_invariant(kin, cluster)  # raises on complex channels
    terms = residue_terms(5, theory, special_pair)
    dtype = complex
    total = np.zeros(len(terms), dtype=dtype)
    for sector in SECTORS:
        sT, sR = _sector_sigmas(kin, sector)
        tn, tw = _rule(alpha * sT.real, delta, circle, panel)
        rn, rw = _rule(alpha * sR.real, delta, circle, panel)  # the Jacobian's factor R stays in Φ
        Tg, Rg = np.meshgrid(tn, rn, indexing="ij")
        Wg = np.outer(tw, rw)
        Tg, Rg, Wg = Tg.ravel(), Rg.ravel(), Wg.ravel()
        for lo in range(0, len(Tg), CHUNK):
            sl = slice(lo, lo + CHUNK)
            vals, _, _ = _sector_values(kin, alpha, terms, sector, Tg[sl], Rg[sl])
            total += vals @ Wg[sl]
    return total if per_term else complex(total.sum())


__all__ = ["continued_five_gluon"]
