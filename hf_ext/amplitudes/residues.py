"""Scaffolding residues: the n-gluon Laurent coefficient of the 2n-scalar integrands (spec §2.6).

Gauge: the odd points sit at gluon positions Z_i (3 gluons: Z = (0, 1, 2); 4 gluons: Z = (0, 1, 1 + w, 3) with
w in (0, 2) integrated), and z_{2i} = z_{2i-1} + ε_i. A term prod_{edges} 1/z_ab of an integrand is then
ε_i^{α′X_{2i-1,2i+1} - m_i} G(ε) with m_i in {1, 2} the multiplicity of the flavour edge (2i-1, 2i) and
G = prod_{a,b in different pairs} z_ab(ε)^{α′s_ab - mult_ab} analytic at ε = 0. The residue at every X_oo = 0 is
α′^{-n} times the coefficient of ε_1^{-1}...ε_n^{-1}, i.e. of prod_{m_i = 2} ε_i in G; the Laurent coefficient is
L = α′^n Res = (Faddeev-Popov factor) x ∫ dw [that coefficient] (3 gluons: 2, no integral; 4 gluons: 6).

Only first derivatives in each ε_i are needed, so G is expanded exactly in the algebra of multilinear polynomials
(ε_i^2 = 0): log z_ab(ε) = log z0 + (σ_b ε_b - σ_a ε_a)/z0 + σ_a σ_b ε_a ε_b / z0^2 (σ = 1 for a moving, even label),
summed with the exponents and exponentiated by its (nilpotent) power series. This replaces the symbolic
differentiation of the spec's recipe (sympy) by a few vectorised array products.

For 4 gluons the integrand behaves as w^{α′t - K0} near w = 0 and (2-w)^{α′s - K2} near w = 2 (t = X37, s = X15,
K the largest pole order of a term: 2 for the string integrands, 1 for Tr φ³) times a function analytic on [0, 2].
A Gauss-Jacobi rule with exactly that weight integrates it spectrally (40 nodes: ~1e-14); it needs α′t > K0 - 1 and
α′s > K2 - 1 (every bosonic-type term has the tachyon pole at α′s = 1). The mpmath path (`method="mpmath"`) does
the same integral by tanh-sinh quadrature at `dps` digits, as the spec's reference recipe does (slow).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from .gluons import MAX_GLUONS, GluonKinematics, four_gluon_channels
from .stringy import Evaluation, check_alpha
from .superstring import cycle_weights, matching_weight, superstring_terms

THEORIES = ("super", "bosonic", "tr_phi3")
FADDEEV_POPOV = {3: 2.0, 4: 6.0}  # z13 z15 z35 = 1*2*1 and z13 z17 z37 = 1*3*2


@dataclass(frozen=True)
class ResidueTerm:
    """One product prod 1/z_ab of an integrand, prepared for the residue.

    Args:
        edges (`tuple`): its edges (a 2-regular multigraph).
        matching (`tuple`): the Pfaffian matching μ whose w_ab multiply it (empty for bosonic / Tr φ³).
        sign (`int`): its sign.
        subset (`int`): bitmask of the gluons with a doubled flavour edge (the ε-monomial to extract).
        cycles (`tuple[int, ...]`): cycle lengths.
    """

    edges: tuple[tuple[int, int], ...]
    matching: tuple[tuple[int, int], ...]
    sign: int
    subset: int
    cycles: tuple[int, ...]


@functools.lru_cache(maxsize=None)
def residue_terms(n: int, theory: str = "super", special_pair: int = 1) -> tuple[ResidueTerm, ...]:
    """The integrand terms of `theory` for n gluons (super: the (2n-3)!! Pfaffian terms)."""
    if theory not in THEORIES:
        raise ValueError(f"theory must be one of {THEORIES}, got {theory!r}")
    if theory == "tr_phi3":
        raw = [(tuple((a, a + 1) for a in range(1, 2 * n)) + ((1, 2 * n),), (), 1, ())]
    else:
        terms = superstring_terms(n, special_pair)
        if theory == "bosonic":  # the bosonic integrand KN prod z_{2i-1,2i}^{-2}: coefficient 1
            terms = [t for t in terms if t.is_bosonic]
            raw = [(t.edges, (), 1, t.cycles) for t in terms]
        else:
            raw = [(t.edges, t.matching, t.sign, t.cycles) for t in terms]
    out = []
    for edges, matching, sign, cycles in raw:
        subset = 0
        for i in range(n):
            mult = sum(1 for e in edges if tuple(sorted(e)) == (2 * i + 1, 2 * i + 2))
            if mult not in (1, 2):
                raise RuntimeError(f"flavour edge of pair {i + 1} has multiplicity {mult}")  # pragma: no cover
            subset |= (mult == 2) << i
        out.append(ResidueTerm(tuple(edges), tuple(matching), sign, subset, tuple(cycles)))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _subset_triples(n: int) -> tuple[tuple[int, int, int], ...]:
    """(U, V, U ^ V) for every V ⊆ U ⊆ {0..n-1}: the product of multilinear polynomials (ε_i^2 = 0)."""
    out = []
    for U in range(1 << n):
        V = U
        while True:
            out.append((U, V, U ^ V))
            if V == 0:
                break
            V = (V - 1) & U
    return tuple(out)


def _mul(f: np.ndarray, g: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros_like(f)
    for U, V, W in _subset_triples(n):
        out[..., U] = out[..., U] + f[..., V] * g[..., W]
    return out


def _cross_pairs(n: int) -> list[tuple[int, int]]:
    return [(a, b) for a, b in itertools.combinations(range(1, 2 * n + 1), 2) if (a - 1) // 2 != (b - 1) // 2]


def _position_differences(n: int, w, v) -> dict[tuple[int, int], object]:
    """Z_J - Z_I (I < J, 0-based gluons) at ε = 0; `v = 2 - w` is passed separately so that both ends of the
    w-interval keep full relative precision."""
    if n == 3:
        return {(0, 1): 1.0, (0, 2): 2.0, (1, 2): 1.0}
    return {(0, 1): 1.0, (0, 2): 1.0 + w, (0, 3): 3.0, (1, 2): w, (1, 3): 2.0, (2, 3): v}


def _log_series(n: int, w, v, log) -> dict[tuple[int, int], np.ndarray]:
    """Multilinear expansion of log z_ab(ε) for every cross pair, each of shape (nodes, 2^n)."""
    D = _position_differences(n, w, v)
    nodes = np.shape(w) if n == 4 else ()
    out = {}
    for a, b in _cross_pairs(n):
        ga, gb = (a - 1) // 2, (b - 1) // 2
        z0 = np.broadcast_to(np.asarray(D[(ga, gb)], dtype=np.asarray(w).dtype if n == 4 else float), nodes)
        series = np.zeros(nodes + (1 << n,), dtype=z0.dtype)
        series[..., 0] = log(z0)
        if b % 2 == 0:
            series[..., 1 << gb] = series[..., 1 << gb] + 1 / z0
        if a % 2 == 0:
            series[..., 1 << ga] = series[..., 1 << ga] - 1 / z0
        if a % 2 == 0 and b % 2 == 0:
            series[..., (1 << ga) | (1 << gb)] = series[..., (1 << ga) | (1 << gb)] + 1 / (z0 * z0)
        out[(a, b)] = series
    return out


def _term_values(kin: GluonKinematics, alpha: float, terms, w, v, log, exp) -> np.ndarray:
    """Coefficient x [ε^subset] G for every term at the nodes: shape (terms, nodes)."""
    n = kin.n
    s = kin.s
    pairs = _cross_pairs(n)
    series = _log_series(n, w, v, log)
    weights = cycle_weights(s, alpha)  # the one definition (superstring.py); object arrays on the mpmath path
    out = []
    for term in terms:
        mult: dict[tuple[int, int], int] = {}
        for a, b in term.edges:
            key = (min(a, b), max(a, b))
            mult[key] = mult.get(key, 0) + 1
        P = sum((alpha * s[a - 1, b - 1] - mult.get((a, b), 0)) * series[(a, b)] for a, b in pairs)
        E = np.zeros_like(P)
        E[..., 0] = 1
        power = E.copy()
        Pn = P.copy()
        Pn[..., 0] = 0  # nilpotent part; exp(P) = e^{P_0} sum_k P'^k / k!
        for k in range(1, bin(term.subset).count("1") + 1):
            power = _mul(power, Pn, n) / k
            E = E + power
        w_coef = matching_weight(weights, term)
        out.append(w_coef * exp(P[..., 0]) * E[..., term.subset])
    return np.stack(out)


def pole_orders(n: int, theory: str, special_pair: int = 1) -> tuple[int, int]:
    """(K0, K2): bounds on the power of 1/w at w -> 0 and of 1/(2-w) at w -> 2 over the 4-gluon terms: edges inside
    the colliding cluster (points 3-6, resp. 5-8) plus first derivatives of its moving points."""
    bounds = []
    for cluster, gluons in (({3, 4, 5, 6}, (1, 2)), ({5, 6, 7, 8}, (2, 3))):
        worst = 0
        for term in residue_terms(n, theory, special_pair):
            inside = sum(1 for a, b in term.edges if a in cluster and b in cluster and (a + 1) // 2 != (b + 1) // 2)
            derivs = sum(1 for g in gluons if term.subset >> g & 1)
            worst = max(worst, inside + derivs)
        bounds.append(worst)
    return tuple(bounds)


def laurent_coefficient(kin: GluonKinematics, alpha, theory: str = "super", *, method: str = "gauss_jacobi",
                        nodes: int = 40, dps: int = 20, special_pair: int = 1, per_term: bool = False):
    """The n-gluon Laurent coefficient L = α′^n Res_{X_oo = 0} of a scaffolded 2n-scalar amplitude.

    Args:
        kin ([`~hf_ext.amplitudes.gluons.GluonKinematics`]): n = 3 or 4 gluons on the residue.
        alpha (`float`): α′ > 0.
        theory (`str`): `"super"` (the (2n-3)!! Pfaffian terms), `"bosonic"` (one shift) or `"tr_phi3"`.
        method (`str`): `"gauss_jacobi"` (vectorised, float64) or `"mpmath"` (tanh-sinh at `dps` digits, slow);
            3 gluons need no integral.
        nodes (`int`): Gauss-Jacobi nodes (the error estimate compares with nodes - 12).
        dps (`int`): mpmath precision.
        special_pair (`int`): the (-1)-picture pair of the superstring integrand.
        per_term (`bool`): also return each term's contribution (same order as [`residue_terms`]).

    Returns:
        [`~hf_ext.amplitudes.stringy.Evaluation`] (scalars), plus an array of per-term values if `per_term`.

    Raises:
        ValueError: n outside {3, 4}, α′ <= 0, or (4 gluons) α′s, α′t below the convergence bound of the integral.
    """
    if not isinstance(kin, GluonKinematics):
        raise ValueError("kin must be a GluonKinematics (see GluonKinematics.from_planar / from_vectors)")
    if kin.n not in (3, MAX_GLUONS):
        raise ValueError(f"residues are implemented for 3 and {MAX_GLUONS} gluons; got n = {kin.n} (5 gluons need "
                         "2-dimensional integrals after the residues)")
    if method not in ("gauss_jacobi", "mpmath"):
        raise ValueError(f"method must be 'gauss_jacobi' or 'mpmath', got {method!r}")
    alpha = float(check_alpha(alpha))
    terms = residue_terms(kin.n, theory, special_pair)
    fp = FADDEEV_POPOV[kin.n]
    if kin.n == 3:
        vals = fp * _term_values(kin, alpha, terms, 0.0, 0.0, np.log, np.exp)
        total = float(vals.sum())
        ev = Evaluation(np.asarray(total), np.asarray(1e-14 * np.abs(vals).sum()), "residue")
        return (ev, vals) if per_term else ev
    s_ch, t_ch = four_gluon_channels(kin)
    K0, K2 = pole_orders(4, theory, special_pair)
    beta, gamma = alpha * t_ch - K0, alpha * s_ch - K2
    if beta <= -1 or gamma <= -1:
        raise ValueError(f"the 4-gluon residue integral over w converges only for α′t > {K0 - 1} and α′s > "
                         f"{K2 - 1} (t = X37, s = X15); got α′t = {alpha * t_ch:.4g}, α′s = {alpha * s_ch:.4g}. "
                         "Use gluons.type_i_four_gluon for the analytic continuation.")
    if method == "mpmath":
        return _laurent_mpmath(kin, alpha, terms, fp, dps, per_term, beta, gamma)

    def rule(m: int):
        from scipy.special import roots_jacobi

        x, wts = roots_jacobi(m, gamma, beta)  # weight (1-x)^gamma (1+x)^beta, w = 1 + x, 2 - w = 1 - x
        w, v = 1.0 + x, 1.0 - x
        vals = fp * _term_values(kin, alpha, terms, w, v, np.log, np.exp) / (w ** beta * v ** gamma)
        return vals @ wts

    fine, coarse = rule(nodes), rule(nodes - 12)
    total = float(fine.sum())
    err = max(abs(total - float(coarse.sum())), 1e-14 * float(np.abs(fine).sum()))
    ev = Evaluation(np.asarray(total), np.asarray(err), "residue_gauss_jacobi")
    return (ev, fine) if per_term else ev


def _laurent_mpmath(kin, alpha, terms, fp, dps, per_term, beta, gamma):
    import mpmath as mp

    log, exp = np.frompyfunc(mp.log, 1, 1), np.frompyfunc(mp.exp, 1, 1)
    with mp.workdps(dps):
        a = mp.mpf(alpha)

        def f(w, v):
            W = np.array([mp.mpf(w)], dtype=object)
            V = np.array([mp.mpf(v)], dtype=object)
            return _term_values(kin, a, terms, W, V, log, exp)[:, 0] * fp

        # Split at the midpoint; on each half substitute w = u^{1/(β+1)} (resp. 2 - w = u^{1/(γ+1)}), which
        # turns the endpoint power w^β into a bounded factor, and keeps nodes near both ends exact (spec §2.9).
        b1, g1 = mp.mpf(beta) + 1, mp.mpf(gamma) + 1

        def lower(u):
            w = u ** (1 / b1)
            return f(w, 2 - w) * w ** (1 - b1) / b1

        def upper(u):
            v = u ** (1 / g1)
            return f(2 - v, v) * v ** (1 - g1) / g1

        if per_term:
            parts = [mp.quad(lambda u, k=k: lower(u)[k], [0, 1]) + mp.quad(lambda u, k=k: upper(u)[k], [0, 1])
                     for k in range(len(terms))]
            total = mp.fsum(parts)
        else:
            total = mp.quad(lambda u: mp.fsum(lower(u)), [0, 1]) + mp.quad(lambda u: mp.fsum(upper(u)), [0, 1])
        err = float(abs(total)) * 10.0 ** (5 - dps)
        ev = Evaluation(np.asarray(float(total)), np.asarray(err), "residue_mpmath")
        return (ev, np.array([float(p) for p in parts])) if per_term else ev
