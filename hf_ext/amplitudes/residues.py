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

from .gluons import MAX_GLUONS, GluonKinematics
from .stringy import Evaluation, check_alpha
from .superstring import cycle_weights, matching_weight, superstring_terms

THEORIES = ("super", "bosonic", "tr_phi3")
FADDEEV_POPOV = {3: 2.0, 4: 6.0, 5: 6.0}  # z13 z15 z35 = 1*2*1; z13 z17 z37 = z13 z19 z39 = 1*3*2
MAX_NODES = 200
MAX_ALPHA = 1e3


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


@functools.cache
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


def _exp_coefficient(P: np.ndarray, subset: int) -> np.ndarray:
    """[ε^subset] exp(P - P_0) for a multilinear series P (last axis: the 2^n subsets; ε_i^2 = 0).

    exp of a nilpotent multilinear element: E(∅) = 1 and E(U) = Σ_{T ⊆ U, T ∋ min U} P[T] E(U \\ T) (the block of
    the lowest index in a set partition), 3^|U| / 2 products instead of the full series."""
    memo = {0: None}

    def E(U: int):
        if U in memo:
            return memo[U]
        low = U & -U
        rest = U ^ low
        total = 0
        V = rest
        while True:  # T = low | V for every V ⊆ rest
            T = low | V
            inner = E(U ^ T)
            term = P[..., T] if inner is None else P[..., T] * inner
            total = total + term
            if V == 0:
                break
            V = (V - 1) & rest
        memo[U] = total
        return total

    value = E(subset)
    return np.ones(P.shape[:-1], dtype=P.dtype) if value is None else value


def _cross_pairs(n: int) -> list[tuple[int, int]]:
    return [(a, b) for a, b in itertools.combinations(range(1, 2 * n + 1), 2) if (a - 1) // 2 != (b - 1) // 2]


def _log_series(n: int, gaps, log) -> np.ndarray:
    """Multilinear expansion of log z_ab(ε) for every cross pair: shape (pairs, *nodes, 2^n).

    `gaps` (shape (*nodes, n - 1)) are the distances Z_{I+1} - Z_I of consecutive gluon positions; every Z_J - Z_I
    is a sum of positive gaps, so it keeps full relative precision at every node (no cancellation near a
    collision)."""
    nodes = gaps.shape[:-1]
    out = []
    for a, b in _cross_pairs(n):
        ga, gb = (a - 1) // 2, (b - 1) // 2
        z0 = gaps[..., ga] if gb == ga + 1 else gaps[..., ga:gb].sum(axis=-1)
        series = np.zeros(nodes + (1 << n,), dtype=gaps.dtype)
        series[..., 0] = log(z0)
        if b % 2 == 0:
            series[..., 1 << gb] = series[..., 1 << gb] + 1 / z0
        if a % 2 == 0:
            series[..., 1 << ga] = series[..., 1 << ga] - 1 / z0
        if a % 2 == 0 and b % 2 == 0:
            series[..., (1 << ga) | (1 << gb)] = series[..., (1 << ga) | (1 << gb)] + 1 / (z0 * z0)
        out.append(series)
    return np.stack(out)


@functools.cache
def _edge_multiplicities(n: int, terms: tuple[ResidueTerm, ...]) -> np.ndarray:
    """mult_ab of every cross pair in every term: shape (terms, pairs)."""
    pairs = _cross_pairs(n)
    out = np.zeros((len(terms), len(pairs)))
    index = {p: k for k, p in enumerate(pairs)}
    for t, term in enumerate(terms):
        for a, b in term.edges:
            key = (min(a, b), max(a, b))
            if key in index:
                out[t, index[key]] += 1
    return out


def exponent_series(kin: GluonKinematics, alpha, terms, gaps, log=np.log) -> np.ndarray:
    """P = Σ_ab (α′s_ab - mult_ab) log z_ab(ε) over the cross pairs, multilinear in ε, for every term: shape
    (terms, *nodes, 2^n); exp(P) is the ε-dependent part of the term's integrand (without its 1/ε flavour poles)."""
    n = kin.n
    pairs = _cross_pairs(n)
    series = _log_series(n, gaps, log)
    exponents = alpha * np.array([kin.s[a - 1, b - 1] for a, b in pairs]) - _edge_multiplicities(n, tuple(terms))
    return np.tensordot(exponents, series, axes=(1, 0))


def _term_values(
    kin: GluonKinematics, alpha, terms, gaps, log=np.log, exp=np.exp, theory: str = "super", special_pair: int = 1
) -> np.ndarray:
    """Coefficient x [ε^subset] G for every term at the nodes: shape (terms, *nodes).

    Args:
        gaps (`np.ndarray` of shape (*nodes, n - 1)): consecutive gluon distances (object arrays on the mpmath path).
    """
    P = exponent_series(kin, alpha, terms, gaps, log)
    weights = cycle_weights(kin.s, alpha)  # the one definition (superstring.py); object arrays on the mpmath path
    out = [
        matching_weight(weights, term) * exp(P[t, ..., 0]) * _exp_coefficient(P[t], term.subset)
        for t, term in enumerate(terms)
    ]
    return np.stack(out)


def cluster_pole_order(n: int, theory: str, cluster: tuple[int, ...], special_pair: int = 1) -> int:
    """Bound on the pole order of the terms when the gluons `cluster` (0-based) collide: edges between different
    pairs inside the cluster plus first derivatives of its moving points (each derivative adds at most one power of
    1/Z; the second-order term ε_a ε_b / z^2 uses two)."""
    points = {2 * g + 1 for g in cluster} | {2 * g + 2 for g in cluster}
    worst = 0
    for term in residue_terms(n, theory, special_pair):
        inside = sum(1 for a, b in term.edges if a in points and b in points and (a + 1) // 2 != (b + 1) // 2)
        derivs = sum(1 for g in cluster if term.subset >> g & 1)
        worst = max(worst, inside + derivs)
    return worst


def pole_orders(n: int, theory: str, special_pair: int = 1) -> tuple[int, int]:
    """(K0, K2): the 4-gluon bounds at w -> 0 (gluons 2, 3 collide) and w -> 2 (gluons 3, 4 collide)."""
    return (cluster_pole_order(n, theory, (1, 2), special_pair), cluster_pole_order(n, theory, (2, 3), special_pair))


def cluster_invariant(kin: GluonKinematics, cluster) -> float:
    """s_C = (Σ_{i in C} k_i)^2 for 0-based gluons; a ValueError if it is not real (the worldsheet integrals
    over the gluon positions need real exponents α′s_C)."""
    kk = kin.dot_products()["kk"]
    value = sum(2 * kk[i, j] for i, j in itertools.combinations(sorted(cluster), 2))
    if abs(np.imag(value)) > 1e-9 * max(1.0, abs(value)):
        raise ValueError(
            f"the channel s of gluons {[g + 1 for g in cluster]} is complex ({complex(value):.4g}); "
            "the residue integrals need real channel invariants (use real or split-signature momenta)"
        )
    return float(np.real(value))


def laurent_coefficient(
    kin: GluonKinematics,
    alpha,
    theory: str = "super",
    *,
    method: str = "gauss_jacobi",
    nodes: int = 40,
    dps: int = 20,
    special_pair: int = 1,
    per_term: bool = False,
):
    """The n-gluon Laurent coefficient L = α′^n Res_{X_oo = 0} of a scaffolded 2n-scalar amplitude.

    Args:
        kin ([`~hf_ext.amplitudes.gluons.GluonKinematics`]): n = 3, 4 or 5 gluons on the residue (complex
            polarisations allowed; the channel invariants must be real for n >= 4).
        alpha (`float`): α′ > 0.
        theory (`str`): `"super"` (the (2n-3)!! Pfaffian terms), `"bosonic"` (one shift) or `"tr_phi3"`.
        method (`str`): `"gauss_jacobi"` (vectorised, float64) or `"mpmath"` (tanh-sinh at `dps` digits, slow);
            3 gluons need no integral.
        nodes (`int`): Gauss-Jacobi nodes (4 gluons: the error estimate compares with nodes - 12; 5 gluons:
            0.7 nodes per dimension in each of the 6 sector triangles, compared with 6 fewer).
        dps (`int`): mpmath precision.
        special_pair (`int`): the (-1)-picture pair of the superstring integrand.
        per_term (`bool`): also return each term's contribution (same order as [`residue_terms`]).

    Returns:
        [`~hf_ext.amplitudes.stringy.Evaluation`] (scalars), plus an array of per-term values if `per_term`.

    Raises:
        ValueError: n outside {3, 4, 5}, α′ outside (0, 1e3], or (4, 5 gluons) channels below the convergence bound
            of the integral (every α′s_(i,i+1) > 1), or complex channel invariants.
    """
    if not isinstance(kin, GluonKinematics):
        raise ValueError("kin must be a GluonKinematics (see GluonKinematics.from_planar / from_vectors)")
    if kin.n not in FADDEEV_POPOV:
        raise ValueError(f"residues are implemented for 3 to {MAX_GLUONS} gluons; got n = {kin.n}")
    if method not in ("gauss_jacobi", "mpmath"):
        raise ValueError(f"method must be 'gauss_jacobi' or 'mpmath', got {method!r}")
    if method == "mpmath" and kin.n == 5:
        raise ValueError("method='mpmath' is implemented for 4 gluons only (5 gluons: method='gauss_jacobi')")
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or not 16 <= nodes <= MAX_NODES:
        raise ValueError(f"nodes must be an integer in [16, {MAX_NODES}], got {nodes!r}")
    alpha = float(check_alpha(alpha))
    if alpha > MAX_ALPHA:
        raise ValueError(
            f"alpha (α′) must be <= {MAX_ALPHA:g} here (larger α′s make the worldsheet integrand "
            f"underflow); got {alpha!r}"
        )
    terms = residue_terms(kin.n, theory, special_pair)
    fp = FADDEEV_POPOV[kin.n]
    dtype = np.complex128 if kin.is_complex else np.float64

    def total_of(vals):
        total = complex(vals.sum())
        return total.real if not kin.is_complex else total

    if kin.n == 3:
        vals = fp * _term_values(kin, alpha, terms, np.array([1.0, 1.0]), np.log, np.exp, theory, special_pair)
        ev = Evaluation(np.asarray(total_of(vals)), np.asarray(1e-14 * np.abs(vals).sum()), "residue")
        return (ev, vals) if per_term else ev
    if kin.n == 5:
        return _laurent_five(kin, alpha, terms, fp, nodes, per_term, theory, special_pair, total_of)
    s_ch, t_ch = cluster_invariant(kin, (0, 1)), cluster_invariant(kin, (1, 2))
    K0, K2 = pole_orders(4, theory, special_pair)
    beta, gamma = alpha * t_ch - K0, alpha * s_ch - K2
    if beta <= -1 or gamma <= -1:
        raise ValueError(
            f"the 4-gluon residue integral over w converges only for α′t > {K0 - 1} and α′s > "
            f"{K2 - 1} (t = X37, s = X15); got α′t = {alpha * t_ch:.4g}, α′s = {alpha * s_ch:.4g}. "
            "Use gluons.type_i_four_gluon for the analytic continuation."
        )
    if method == "mpmath":
        return _laurent_mpmath(kin, alpha, terms, fp, dps, per_term, beta, gamma, theory, special_pair)

    def rule(m: int):
        from scipy.special import roots_jacobi

        x, wts = roots_jacobi(m, gamma, beta)  # weight (1-x)^gamma (1+x)^beta, w = 1 + x, 2 - w = 1 - x
        w, v = 1.0 + x, 1.0 - x
        gaps = np.stack([np.ones_like(w), w, v], axis=-1)
        vals = fp * _term_values(kin, alpha, terms, gaps, np.log, np.exp, theory, special_pair)
        vals = vals / (w**beta * v**gamma)
        return vals.astype(dtype) @ wts

    fine, coarse = rule(nodes), rule(nodes - 12)
    total = total_of(fine)
    err = max(abs(total - total_of(coarse)), 1e-14 * float(np.abs(fine).sum()))
    ev = Evaluation(np.asarray(total), np.asarray(err), "residue_gauss_jacobi")
    return (ev, fine) if per_term else ev


# 5 gluons: Z = (0, 1, 1 + a, 1 + a + b, 3), gaps (a, b, c) with a + b + c = 2. Gap a closes when gluons 2, 3
# collide, b for 3, 4, c for 4, 5; the corner where b and c close is the triple collision of 3, 4, 5 (channel
# s_345 = s_12), where a and b close the triple 2, 3, 4 (s_234 = s_51), where a and c close two separate pairs.
FIVE_EDGES = ((1, 2), (2, 3), (3, 4))  # 0-based gluon clusters of the gaps a, b, c
FIVE_CORNERS = ((2, 3, 4), None, (1, 2, 3))  # corner k: the cluster when the two gaps other than gap k close
NODE_CHUNK = 768  # nodes per block of the 105-term evaluation (bounds the memory to ~30 MB)


def five_gluon_exponents(
    kin: GluonKinematics, alpha: float, theory: str = "super", special_pair: int = 1
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(edge, corner) exponents of the 5-gluon residue integrand for [`~hf_ext.amplitudes.sectors.simplex_rule`]:
    e = α′s_C - K_C for the colliding pair C of each gap, E = α′s_C - K_C at a triple collision (E = e_a + e_c
    where two separate pairs collide), with K_C the pole-order bound of [`cluster_pole_order`]."""
    edge = tuple(alpha * cluster_invariant(kin, c) - cluster_pole_order(5, theory, c, special_pair) for c in FIVE_EDGES)
    corner = []
    for c in FIVE_CORNERS:
        corner.append(
            edge[0] + edge[2]
            if c is None
            else alpha * cluster_invariant(kin, c) - cluster_pole_order(5, theory, c, special_pair)
        )
    return edge, tuple(corner)


def _laurent_five(kin, alpha, terms, fp, nodes, per_term, theory, special_pair, total_of):
    from .sectors import simplex_rule

    edge, corner = five_gluon_exponents(kin, alpha, theory, special_pair)
    if min(edge) <= -1 or min(corner) <= -2:
        names = ["s23", "s34", "s45"]
        raise ValueError(
            f"the 5-gluon residue integral converges only where every α′s_(i,i+1) > 1 (the tachyon "
            f"bound of the bosonic-type terms); here α′({', '.join(names)}) - K = "
            f"{', '.join(f'{e:.4g}' for e in edge)} and the triple-collision exponents are "
            f"{corner[0]:.4g} (s_345 = s12), {corner[2]:.4g} (s_234 = s51); each must be > -1 "
            "(edges) and > -2 (corners)"
        )
    dtype = np.complex128 if kin.is_complex else np.float64

    def rule(m: int) -> np.ndarray:
        gaps, wts = simplex_rule(2.0, edge, corner, m)
        full = np.concatenate([np.ones((len(gaps), 1)), gaps], axis=1)
        out = np.zeros(len(terms), dtype=dtype)
        for lo in range(0, len(full), NODE_CHUNK):
            block = slice(lo, lo + NODE_CHUNK)
            vals = _term_values(kin, alpha, terms, full[block], np.log, np.exp, theory, special_pair)
            out += vals.astype(dtype) @ wts[block]
        return fp * out

    m = max(16, nodes * 7 // 10)  # 6 m^2 nodes; the default 40 gives m = 28 (4704 nodes, ~1e-13)
    fine, coarse = rule(m), rule(m - 6)
    total = total_of(fine)
    err = max(abs(total - total_of(coarse)), 1e-14 * float(np.abs(fine).sum()))
    ev = Evaluation(np.asarray(total), np.asarray(err), "residue_sectors")
    return (ev, fine) if per_term else ev


def _laurent_mpmath(kin, alpha, terms, fp, dps, per_term, beta, gamma, theory, special_pair):
    import mpmath as mp

    log, exp = np.frompyfunc(mp.log, 1, 1), np.frompyfunc(mp.exp, 1, 1)
    with mp.workdps(dps):
        a = mp.mpf(alpha)

        def f(w, v):
            gaps = np.array([[mp.mpf(1), mp.mpf(w), mp.mpf(v)]], dtype=object)
            return _term_values(kin, a, terms, gaps, log, exp, theory, special_pair)[:, 0] * fp

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
            parts = [
                mp.quad(lambda u, k=k: lower(u)[k], [0, 1]) + mp.quad(lambda u, k=k: upper(u)[k], [0, 1])
                for k in range(len(terms))
            ]
            total = mp.fsum(parts)
        else:
            total = mp.quad(lambda u: mp.fsum(lower(u)), [0, 1]) + mp.quad(lambda u: mp.fsum(upper(u)), [0, 1])
        err = float(abs(total)) * 10.0 ** (5 - dps)
        ev = Evaluation(np.asarray(float(total)), np.asarray(err), "residue_mpmath")
        return (ev, np.array([float(p) for p in parts])) if per_term else ev
