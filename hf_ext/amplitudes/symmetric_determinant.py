"""The n-gluon residue integrand as the expansion of an n x n symmetric determinant whose prefactors are nested
commutators of 2n-gon variables (the abstract's "n×n symmetrical determinant"; the paper body was not available, so
this is a reconstruction: see the convention note).

**Prefactors from 2n-gon variables only.** Scalar pair i = (2i-1, 2i) defines the commutator (bivector)
F_i = [p_{2i-1}, p_{2i}] = p_{2i-1} p_{2i}^T - p_{2i} p_{2i-1}^T, which on the scaffolding residue is the field
strength k_i ε_i - ε_i k_i (k_i = p_{2i-1} + p_{2i}, ε_i ≅ p_{2i}). A product of such commutators along a cycle
c = (c_1 → c_2 → ... → c_k) contracts neighbouring pairs through the 2 x 2 blocks of 2n-gon Mandelstams

    Γ_ij = ½ [[s_{2i-1,2j-1}, s_{2i-1,2j}], [s_{2i,2j-1}, s_{2i,2j}]],   tr(F_c1 ... F_ck) = tr(Ω Γ_c1c2 Ω Γ_c2c3 ...),

with Ω = ((0, 1), (-1, 0)); nothing else (no gluon vector, no polarisation) enters. The cycle weight is
½ tr(N_c1c2 ... N_ckc1) with N_ij = 2α′ Ω Γ_ij / Z_ij (Z the gluon positions): reversing a cycle multiplies the trace
and C_Z by (-1)^k each, so the weight is orientation-blind — the "symmetric" matrix.

**The determinant.** Leg 1 (the (-1)-picture pair) is always a gluon: row and column 1 carry no off-diagonal entry.
Writing a formal g_i on the diagonal (g_i: "leg i is a gluon of the mixed bosonic amplitude"), the Leibniz expansion

    det(diag(g) + N) = Σ_{T ⊆ {2..n}} D(T) Π_{i ∉ T} g_i,   D(T) = Σ_{derangements σ of T} sgn σ Π_{cycles} ½ tr(N_c),

and replacing Π_{i ∉ T} g_i by the mixed bosonic integrand B_{T^c} (gluons outside T and leg 1, scalars in T)
gives the residue integrand e^{P_0} Σ_T D(T) [ε^{T^c}] e^{P - P_0}: equal pointwise to the (2n-3)!! terms
([`symmetric_determinant_integrand`], checked at n = 4, 5 by the tests and `reproduce`).

**Helicity kinematics: a scalar determinant.** In four dimensions a positive-helicity F is self-dual, a negative
one anti-self-dual; the two commute and are trace-orthogonal, and within one helicity
½ tr(F_c1 ... F_ck) = κ_h^k Π [c_i c_{i+1}] (h = +) or κ_h^k Π ⟨c_i c_{i+1}⟩ (h = -). The entries then are
scalars, S_ij = 2α′ κ_h b_ij / Z_ij (b = [ij] or ⟨ij⟩ for equal helicities, 0 otherwise), S is a genuinely
symmetric n x n matrix (b_ji / Z_ji = b_ij / Z_ij) and D(T) = det S_T is a numerical determinant
([`helicity_integrand`]). κ_h is the normalisation of the library's polarisation vectors (√2 ε convention),
read off once from a fixed 2- and 3-cycle ([`helicity_constant`]); every other cycle is then a prediction.

Convention note: the paper may order the legs, normalise α′ or place the special leg differently (spec §2.8). What
is fixed here: the sum over σ runs over the n - 1 legs 2..n (leg 1 special), as the abstract's "manifestly symmetric
in n - 1 legs" says; the matrix is n x n with leg 1's row trivial.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from .gluons import GluonKinematics
from .residues import _exp_coefficient, exponent_series, residue_terms
from .spinors import SpinorKinematics, angle, parse_helicities, square

OMEGA = np.array([[0.0, 1.0], [-1.0, 0.0]])


def _check_gaps(kin, gaps) -> np.ndarray:
    if not isinstance(kin, GluonKinematics):
        raise TypeError(f"kin must be a GluonKinematics, got {type(kin).__name__}")
    if kin.n not in (3, 4, 5):
        raise ValueError(f"the determinant form is evaluated for 3 to 5 gluons; got n = {kin.n}")
    gaps = np.asarray(gaps)
    if gaps.dtype.kind not in "fiu":
        raise TypeError(f"gaps must be real numbers, got dtype {gaps.dtype}")
    gaps = gaps.astype(np.float64)
    if gaps.ndim < 1 or gaps.shape[-1] != kin.n - 1:
        raise ValueError(f"gaps must have shape (..., {kin.n - 1}) for n = {kin.n}, got {gaps.shape}")
    if gaps.size == 0:
        raise ValueError("gaps is empty: give at least one node")
    if not np.all(np.isfinite(gaps)) or np.any(gaps <= 0):
        raise ValueError("gaps must be finite and > 0 (consecutive gluon distances)")
    return gaps


def _check_alpha(alpha) -> float:
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise TypeError(f"alpha (α′) must be a real number, got {type(alpha).__name__}")
    if not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha (α′) must be finite and > 0, got {alpha!r}")
    return float(alpha)


def _positions(gaps: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros(gaps.shape[:-1] + (1,)), np.cumsum(gaps, axis=-1)], axis=-1)


def commutator_blocks(kin: GluonKinematics) -> np.ndarray:
    """Γ_ij = ½ (2 x 2 block of 2n-gon Mandelstams between pairs i and j): shape (n, n, 2, 2)."""
    s = kin.s
    n = kin.n
    return 0.5 * s.reshape(n, 2, n, 2).transpose(0, 2, 1, 3)


def cycle_weight(kin: GluonKinematics, alpha: float, cycle, Z: np.ndarray) -> np.ndarray:
    """½ tr(N_c1c2 N_c2c3 ... N_ckc1) for one oriented cycle of 0-based legs (nested product of the pair
    commutators' 2 x 2 contractions), at gluon positions `Z` (shape (*nodes, n))."""
    G = commutator_blocks(kin)
    M = None
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        N = (2 * alpha / (Z[..., b] - Z[..., a]))[..., None, None] * (OMEGA @ G[a, b])
        M = N if M is None else M @ N
    return 0.5 * np.trace(M, axis1=-2, axis2=-1)


def _cycles(perm: dict[int, int]) -> list[tuple[int, ...]]:
    seen, out = set(), []
    for start in perm:
        if start in seen:
            continue
        c, x = [], start
        while x not in seen:
            seen.add(x)
            c.append(x)
            x = perm[x]
        out.append(tuple(c))
    return out


@functools.cache
def derangements(legs: tuple[int, ...]) -> tuple[tuple[int, tuple[tuple[int, ...], ...]], ...]:
    """(sgn σ, cycles of σ) for every fixed-point-free permutation σ of `legs`."""
    out = []
    for image in itertools.permutations(legs):
        perm = dict(zip(legs, image))
        if any(perm[x] == x for x in legs):
            continue
        cycles = _cycles(perm)
        out.append(((-1) ** sum(len(c) - 1 for c in cycles), tuple(cycles)))
    return tuple(out)


def _mixed_bosonic(kin: GluonKinematics, alpha: float, gaps: np.ndarray):
    """(e^{P_0}, S -> [ε^S] e^{P - P_0}) of the bosonic term: the mixed bosonic integrands."""
    bosonic = next(t for t in residue_terms(kin.n, "super") if t.subset == (1 << kin.n) - 1)
    P = exponent_series(kin, alpha, (bosonic,), gaps)[0]
    return np.exp(P[..., 0]), lambda S: _exp_coefficient(P, S)


def _assemble(kin, alpha, gaps, D) -> np.ndarray:
    """e^{P_0} Σ_{T ⊆ legs 2..n} D(T) [ε^{T^c}] e^{P - P_0}."""
    n = kin.n
    e0, B = _mixed_bosonic(kin, alpha, gaps)
    full = (1 << n) - 1
    total = np.zeros(gaps.shape[:-1], dtype=np.result_type(e0, kin.s, complex))
    for r in range(0, n):
        for T in itertools.combinations(range(1, n), r):
            mask = sum(1 << i for i in T)
            total = total + D(T) * B(full ^ mask)
    out = e0 * total
    return out.real if not kin.is_complex and not np.iscomplexobj(D(())) else out


def symmetric_determinant_integrand(kin: GluonKinematics, alpha, gaps) -> np.ndarray:
    """The residue integrand from the n x n symmetric determinant with commutator prefactors of the 2n-gon
    variables (module docstring), at the nodes `gaps` (consecutive gluon distances, shape (*nodes, n - 1)); equal
    pointwise to the sum of the (2n-3)!! superstring terms (before the Faddeev-Popov factor).

    Raises:
        TypeError: `kin` not a GluonKinematics, `alpha` or `gaps` not real numbers.
        ValueError: n outside 3..5, empty / non-positive / non-finite gaps, α′ <= 0.
    """
    gaps = _check_gaps(kin, gaps)
    alpha = _check_alpha(alpha)
    Z = _positions(gaps)
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def weight(c):
        if c not in cache:
            cache[c] = cycle_weight(kin, alpha, list(c), Z)
        return cache[c]

    def D(T):
        if not T:
            return np.ones(gaps.shape[:-1])
        out = 0
        for sign, cycles in derangements(T):
            term = sign
            for c in cycles:
                term = term * weight(c)
            out = out + term
        return out if not np.isscalar(out) else np.zeros(gaps.shape[:-1])

    return _assemble(kin, alpha, gaps, D)


@functools.cache
def helicity_constant(h: int) -> complex:
    """κ_h with ½ tr(F_c1 ... F_ck) = κ_h^k Π b_{c_i c_i+1} for legs of helicity h (b = [ij] for +, ⟨ij⟩ for -), in
    the library's polarisation convention: read off once from a fixed 4-point point, κ² from the 2-cycle (1 2),
    the sign from the 3-cycle (1 2 3). Every other cycle and kinematic point is a prediction (tests)."""
    sk = SpinorKinematics.random(4, np.random.default_rng(20250430))
    kin = GluonKinematics.from_spinors(sk, "++++" if h > 0 else "----")
    b = _brackets(sk, [h] * 4)
    k2 = kin.trace(1, 2) / 2 / (b[0, 1] * b[1, 0])
    kappa = np.sqrt(complex(k2))
    if abs(kin.trace(1, 2, 3) / 2 - kappa**3 * b[0, 1] * b[1, 2] * b[2, 0]) > abs(kin.trace(1, 2, 3) / 2) * 1e-6:
        kappa = -kappa
    return complex(kappa)


def _brackets(sk: SpinorKinematics, h) -> np.ndarray:
    n = sk.n
    b = np.zeros((n, n), dtype=complex)
    for i in range(n):
        for j in range(n):
            if i != j and h[i] == h[j]:
                b[i, j] = square(sk.lamt[i], sk.lamt[j]) if h[i] > 0 else angle(sk.lam[i], sk.lam[j])
    return b


def helicity_matrix(sk: SpinorKinematics, helicities, alpha, gaps) -> np.ndarray:
    """S_ij = 2α′ κ_h b_ij / Z_ij over the legs 1..n (row and column 1 zero; zero diagonal): shape
    (*nodes, n, n), symmetric."""
    h = parse_helicities(helicities, sk.n)
    alpha = _check_alpha(alpha)
    Z = _positions(np.asarray(gaps, dtype=np.float64))
    b = _brackets(sk, h)
    kappa = np.array([helicity_constant(x) for x in h])
    n = sk.n
    S = np.zeros(Z.shape[:-1] + (n, n), dtype=complex)
    for i in range(1, n):
        for j in range(1, n):
            if i != j and b[i, j] != 0:
                S[..., i, j] = 2 * alpha * kappa[i] * b[i, j] / (Z[..., j] - Z[..., i])
    return S


def helicity_integrand(sk: SpinorKinematics, helicities, alpha, gaps) -> np.ndarray:
    """The residue integrand at four-dimensional helicity kinematics from the scalar n x n symmetric matrix
    [`helicity_matrix`]: D(T) = det S_T (numpy determinants of the principal minors)."""
    if not isinstance(sk, SpinorKinematics):
        raise TypeError(f"sk must be a SpinorKinematics, got {type(sk).__name__}")
    kin = GluonKinematics.from_spinors(sk, helicities)
    gaps = _check_gaps(kin, gaps)
    S = helicity_matrix(sk, helicities, alpha, gaps)

    def D(T):
        if not T:
            return np.ones(gaps.shape[:-1], dtype=complex)
        idx = np.array(T)
        return np.linalg.det(S[..., idx[:, None], idx[None, :]])

    return _assemble(kin, _check_alpha(alpha), gaps, D)


def determinant_laurent(kin: GluonKinematics, alpha, nodes: int = 40) -> float | complex:
    """The n-gluon Laurent coefficient L_super integrated from [`symmetric_determinant_integrand`] with the
    quadratures of [`~hf_ext.amplitudes.residues.laurent_coefficient`] (3 gluons: no integral; 4: Gauss-Jacobi in
    w; 5: the sector rule on the simplex), in the same convergent region (every α′s_(i,i+1) > 1): an evaluator of
    the superstring residue that never forms the (2n-3)!! Pfaffian terms.

    Raises:
        ValueError: outside the convergent region, n outside 3..5, bad α′ or nodes.
    """
    from scipy.special import roots_jacobi

    from .residues import FADDEEV_POPOV, cluster_invariant, five_gluon_exponents, pole_orders
    from .sectors import simplex_rule

    if not isinstance(kin, GluonKinematics):
        raise TypeError(f"kin must be a GluonKinematics, got {type(kin).__name__}")
    alpha = _check_alpha(alpha)
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or not 16 <= nodes <= 200:
        raise ValueError(f"nodes must be an integer in [16, 200], got {nodes!r}")
    fp = FADDEEV_POPOV.get(kin.n)
    if fp is None:
        raise ValueError(f"the determinant form is evaluated for 3 to 5 gluons; got n = {kin.n}")
    if kin.n == 3:
        value = fp * symmetric_determinant_integrand(kin, alpha, np.array([[1.0, 1.0]]))[0]
    elif kin.n == 4:
        K0, K2 = pole_orders(4, "super")
        beta = alpha * cluster_invariant(kin, (1, 2)) - K0
        gamma = alpha * cluster_invariant(kin, (0, 1)) - K2
        if beta <= -1 or gamma <= -1:
            raise ValueError(f"the 4-gluon residue integral needs α′t > {K0 - 1} and α′s > {K2 - 1}")
        x, w = roots_jacobi(nodes, gamma, beta)
        u, v = 1.0 + x, 1.0 - x
        f = symmetric_determinant_integrand(kin, alpha, np.stack([np.ones_like(u), u, v], axis=-1))
        value = fp * (f / (u**beta * v**gamma)) @ w
    else:
        edge, corner = five_gluon_exponents(kin, alpha, "super")
        if min(edge) <= -1 or min(corner) <= -2:
            raise ValueError("the 5-gluon residue integral converges only where every α′s_(i,i+1) > 1")
        g, w = simplex_rule(2.0, edge, corner, max(16, nodes * 7 // 10))
        f = symmetric_determinant_integrand(kin, alpha, np.concatenate([np.ones((len(g), 1)), g], axis=1))
        value = fp * f @ w
    return complex(value) if kin.is_complex else float(np.real(value))


__all__ = [
    "commutator_blocks",
    "determinant_laurent",
    "cycle_weight",
    "derangements",
    "helicity_constant",
    "helicity_integrand",
    "helicity_matrix",
    "symmetric_determinant_integrand",
]
