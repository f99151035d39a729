"""Scaffolded bosonic and superstring amplitudes as shifted stringy Tr(φ³) amplitudes (spec §2.4-2.5).

2n scalars in n flavour pairs (2i-1, 2i) ("scaffolding" pairs; gluon i has k_i = p_{2i-1} + p_{2i}).
- **General shift rule.** For a 2-regular multigraph I = prod_{edges (a,b)} 1/z_ab on 1..N (a union of cycles, a
  doubled edge being a 2-cycle), e_ab = [(a,b) is a PT edge (a,a+1) or (1,N)] - [multiplicity of (a,b) in I] and
  m_{i,j} = sum_{i <= a < b <= j-1} e_ab give I = PT prod u^m, hence ∫ I KN = A_N[X + m/α′].
- **Bosonic string** (n length-2 cycles): A^bos_2n[X] = A_2n[X_ee + 1/α′, X_oo - 1/α′, X_eo].
- **Superstring**: pair `special_pair` (the paper-style choice is 1) in the (-1) picture; the reduced Pfaffian
  over the other 2n - 2 labels expands into (2n-3)!! matchings μ:
  A^super_2n = sum_μ sgn(μ) (-1)^{n-1} prod_{(a,b) in μ} w_ab A_2n[X + m(μ)/α′],
  w_ab = α′ s_ab (a, b not a flavour pair), w_{2i-1,2i} = α′X_{2i-1,2i+1} - 1, m(μ) from the edges
  {(2j-1,2j) twice} ∪ {(2i-1,2i), i != j} ∪ μ. The matching of the pairs with themselves is the bosonic term;
  every other μ joins pairs into cycles of length >= 4 (the "correction" terms).

Conventions (spec §2.8): pairs (2i-1, 2i), not (2i, 2i+1) (that would swap e and o); metric mostly minus; A_N
without α′^{N-3}. Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .kinematics import as_planar_array, mandelstams, planar_variables, x_label
from .stringy import Evaluation, check_alpha, stringy_amplitude

MAX_TERMS_PAIRS = 6  # (2*6-3)!! = 10395 matchings; the bookkeeping is cheap, the integrals are not


def double_factorial(k: int) -> int:
    return math.prod(range(k, 0, -2)) if k > 0 else 1


def perfect_matchings(labels: tuple[int, ...]) -> list[tuple[int, tuple[tuple[int, int], ...]]]:
    """All perfect matchings of `labels` (sorted) with their Pfaffian signs: Pf(A) = sum sgn prod A_ab (a < b)."""
    if not labels:
        return [(1, ())]
    first, rest = labels[0], labels[1:]
    out = []
    for k, partner in enumerate(rest):
        # moving `partner` next to `first` passes k labels: sign (-1)^k
        for sign, sub in perfect_matchings(rest[:k] + rest[k + 1 :]):
            out.append(((-1) ** k * sign, ((first, partner),) + sub))
    return out


def shift_from_edges(N: int, edges) -> np.ndarray:
    """The shift m (integers, in planar-variable order) with prod_{edges} 1/z_ab = PT(1..N) prod u^m.

    Args:
        N (`int`): number of points.
        edges (iterable of `(a, b)`): a 2-regular multigraph on 1..N (every label in exactly two edges).

    Raises:
        ValueError: the edges do not form a 2-regular multigraph on 1..N.
    """
    degree = np.zeros(N + 1, dtype=int)
    e = np.zeros((N + 1, N + 1), dtype=int)
    for a in range(1, N):
        e[a, a + 1] += 1
    e[1, N] += 1
    for a, b in edges:
        a, b = min(a, b), max(a, b)
        if not 1 <= a < b <= N:
            raise ValueError(f"edge {(a, b)} is not a pair of distinct labels in 1..{N}")
        e[a, b] -= 1
        degree[a] += 1
        degree[b] += 1
    if np.any(degree[1:] != 2):
        raise ValueError(f"edges must form a 2-regular multigraph on 1..{N} (degrees {degree[1:].tolist()})")
    return np.array([sum(e[a, b] for a in range(i, j) for b in range(a + 1, j)) for i, j in planar_variables(N)])


def cycle_lengths(edges) -> tuple[int, ...]:
    """Cycle lengths of a 2-regular multigraph (a doubled edge is a 2-cycle), sorted."""
    edges = [tuple(e) for e in edges]
    incident: dict[int, list[int]] = {}
    for k, (a, b) in enumerate(edges):
        incident.setdefault(a, []).append(k)
        incident.setdefault(b, []).append(k)
    used = [False] * len(edges)
    lengths = []
    for k0 in range(len(edges)):
        if used[k0]:
            continue
        start, node, k, length = edges[k0][0], edges[k0][1], k0, 1
        used[k0] = True
        while node != start:  # leave every node by its other edge (by index: the copies of a doubled edge differ)
            k = next(e for e in incident[node] if e != k and not used[e])
            used[k] = True
            a, b = edges[k]
            node = b if a == node else a
            length += 1
        lengths.append(length)
    return tuple(sorted(lengths))


def bosonic_shift(n: int) -> np.ndarray:
    """The one shift of the scaffolded bosonic string: +1 on X_{e,e}, -1 on X_{o,o}, 0 on X_{e,o} (α′X units)."""
    return np.array(
        [(i % 2 == 0 and j % 2 == 0) - (i % 2 == 1 and j % 2 == 1) for i, j in planar_variables(2 * n)], dtype=int
    )


@dataclass(frozen=True)
class ShiftedTerm:
    """One term of the reduced-Pfaffian expansion.

    Args:
        matching (`tuple`): the perfect matching μ of the labels outside the special pair.
        sign (`int`): sgn(μ) (-1)^{n-1}.
        edges (`tuple`): the 2-regular multigraph (special pair twice, other pairs once, μ).
        shift (`np.ndarray`): m(μ), added to α′X.
        cycles (`tuple[int, ...]`): its cycle lengths (all 2: the bosonic term).
    """

    matching: tuple[tuple[int, int], ...]
    sign: int
    edges: tuple[tuple[int, int], ...]
    shift: np.ndarray
    cycles: tuple[int, ...]

    @property
    def is_bosonic(self) -> bool:
        return all(c == 2 for c in self.cycles)

    @property
    def label(self) -> str:
        return "".join(f"({a}{b})" if b < 10 else f"({a},{b})" for a, b in self.matching)


def check_pairs(n: int, special_pair: int = 1) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n <= MAX_TERMS_PAIRS:
        raise ValueError(f"n (number of scaffolding pairs) must be an integer in [2, {MAX_TERMS_PAIRS}], got {n!r}")
    if not 1 <= special_pair <= n:
        raise ValueError(f"special_pair must be in 1..{n}, got {special_pair!r}")


@functools.cache
def superstring_terms(n: int, special_pair: int = 1) -> tuple[ShiftedTerm, ...]:
    """The (2n-3)!! shifted Tr(φ³) terms of the 2n-scalar superstring amplitude (spec §2.5)."""
    check_pairs(n, special_pair)
    j = special_pair
    pairs = [(2 * i - 1, 2 * i) for i in range(1, n + 1)]
    base = [pairs[j - 1], pairs[j - 1]] + [p for i, p in enumerate(pairs, 1) if i != j]
    labels = tuple(a for p in pairs if p != pairs[j - 1] for a in p)
    terms = []
    for sign, mu in perfect_matchings(labels):
        edges = tuple(base) + mu
        terms.append(
            ShiftedTerm(mu, sign * (-1) ** (n - 1), edges, shift_from_edges(2 * n, edges), cycle_lengths(edges))
        )
    return tuple(terms)


def is_flavour_pair(a: int, b: int) -> bool:
    """Whether 1-based labels a < b are one scaffolding pair (2i-1, 2i)."""
    return a % 2 == 1 and b == a + 1


def cycle_weights(s: np.ndarray, alpha) -> np.ndarray:
    """The Pfaffian entries w_ab of the reduced Pfaffian, the one definition used everywhere (scalar sums here, the
    gluon residues in [`~hf_ext.amplitudes.residues`]): w_ab = α′ s_ab for labels in different pairs and
    w_{2i-1,2i} = α′ s_{2i-1,2i} - 1 = α′ X_{2i-1,2i+1} - 1 on a flavour pair (the -1 is the ψ^I ψ^I contraction
    that removes the tachyon pole).

    Args:
        s (`np.ndarray` of shape (..., 2n, 2n)): Mandelstams s_ab = 2 p_a.p_b of the 2n-gon.
        alpha (`float` or `np.ndarray` broadcasting against the batch shape): α′.

    Returns:
        `np.ndarray` of shape (..., 2n, 2n); entries with a < b are meaningful (the matchings use a < b only).
    """
    s = np.asarray(s)
    alpha = np.asarray(alpha)
    w = (alpha[..., None, None] if alpha.ndim else alpha) * s
    w = np.array(w, dtype=np.result_type(w, 1.0))
    for i in range(s.shape[-1] // 2):
        w[..., 2 * i, 2 * i + 1] -= 1.0
    return w


def matching_weight(w: np.ndarray, term) -> np.ndarray:
    """sgn(μ)(-1)^{n-1} prod_{(a,b) in μ} w_ab: the coefficient of one term, from [`cycle_weights`] `w`."""
    return term.sign * np.prod([w[..., a - 1, b - 1] for a, b in term.matching], axis=0)


def term_coefficients(X, alpha, n: int, special_pair: int = 1) -> np.ndarray:
    """sgn(μ)(-1)^{n-1} prod_{(a,b) in μ} w_ab for every term, shape (n_terms, ...batch)."""
    X = as_planar_array(X, 2 * n)
    w = cycle_weights(mandelstams(X, 2 * n), check_alpha(alpha))
    return np.stack([matching_weight(w, t) for t in superstring_terms(n, special_pair)])


def _shifted(X: np.ndarray, alpha, shift: np.ndarray, what: str, method: str, **kw) -> Evaluation:
    alpha = check_alpha(alpha)
    aX = (alpha[..., None] if alpha.ndim else alpha) * X + shift
    N = X.shape[-1]
    N = int(round((3 + math.sqrt(9 + 8 * N)) / 2))
    if N == 6 and method == "auto" and np.any(aX <= 0):
        method = "continued"  # the continuation reaches every shifted α′X + m > -1 (off the poles)
    floor = -1 if method == "continued" else 0
    if N > 4 and method in ("auto", "curve", "continued") and np.any(aX <= floor):
        bad = sorted({x_label(*planar_variables(N)[k]) for k in np.argwhere(aX <= floor)[:, -1]})
        raise ValueError(
            f"{what}: the shifted integral needs every α′X + m > {floor} (the continuation of "
            f"hf_ext.amplitudes.continuation reaches > -1; e.g. a shift -1 needs α′X > 0); it fails "
            f"for {', '.join(bad)}."
        )
    return stringy_amplitude(aX, 1.0, N, method=method, **kw)


def scaffolded_bosonic_amplitude(X, alpha, n: int | None = None, method: str = "auto", **kw) -> Evaluation:
    """A^bos_2n[X] = A_2n[X_ee + 1/α′, X_oo - 1/α′, X_eo] (one shift; n length-2 cycles).

    Args:
        X (`np.ndarray` of shape (..., N(N-3)/2)): planar variables of the 2n-gon.
        alpha (`float`): α′.
        n (`int`, *optional*): number of pairs (inferred).
        method (`str`): evaluator of the shifted A_2n (see [`~hf_ext.amplitudes.stringy.stringy_amplitude`]).
    """
    from .stringy import infer_points

    N = infer_points(X, None if n is None else 2 * n)
    if N % 2:
        raise ValueError(f"scaffolded amplitudes need an even number of points 2n, got N = {N}")
    X = as_planar_array(X, N)
    return _shifted(X, alpha, bosonic_shift(N // 2), "bosonic string", method, **kw)


def superstring_amplitude(
    X, alpha, n: int | None = None, special_pair: int = 1, method: str = "auto", **kw
) -> Evaluation:
    """A^super_2n as the (2n-3)!! sum of shifted Tr(φ³) amplitudes (spec §2.5).

    Args:
        X (`np.ndarray` of shape (..., N(N-3)/2)): planar variables of the 2n-gon.
        alpha (`float`): α′.
        n (`int`, *optional*): number of scaffolding pairs (inferred).
        special_pair (`int`, defaults to 1): the pair in the (-1) picture (picture independence: any choice gives
            the same amplitude).
        method (`str`): evaluator of each shifted A_2n: 2n = 4 uses the Beta closed form (continued everywhere);
            2n = 6 the curve integral where every shifted α′X is > 0, the continuation of
            [`~hf_ext.amplitudes.continuation`] where some lies in (-1, 0]; 2n >= 8 is out of reach of the integrals
            here (use the gluon residues of [`~hf_ext.amplitudes.gluons`]).

    Returns:
        [`~hf_ext.amplitudes.stringy.Evaluation`]; the error adds |coefficient| x error of each term.
    """
    from .stringy import MAX_CURVE_POINTS, infer_points

    N = infer_points(X, None if n is None else 2 * n)
    if N % 2:
        raise ValueError(f"scaffolded amplitudes need an even number of points 2n, got N = {N}")
    if N > MAX_CURVE_POINTS:
        raise ValueError(
            f"superstring amplitudes off the residues need A_2n integrals of dimension 2n-3 <= 3, "
            f"so 2n <= {MAX_CURVE_POINTS}; got 2n = {N} (use hf_ext.amplitudes.gluons residues)"
        )
    n = N // 2
    X = as_planar_array(X, N)
    coeffs = term_coefficients(X, alpha, n, special_pair)
    value, error = 0.0, 0.0
    for c, term in zip(coeffs, superstring_terms(n, special_pair)):
        ev = _shifted(X, alpha, term.shift, f"superstring term μ = {term.label}", method, **kw)
        value = value + c * ev.value
        error = error + np.abs(c) * ev.error
    return Evaluation(np.asarray(value), np.asarray(error), f"superstring({len(coeffs)} terms)")


def four_scalar_other_picture(X, alpha) -> np.ndarray:
    """The 4-scalar superstring with points 1 and 3 in the (-1) picture: one 4-cycle 1-2-4-3,
    α′ s_24 A_4[X + m/α′] = -(a+b) B(a, b+1) (spec §2.5; must equal the pair-1 picture)."""
    X = as_planar_array(X, 4)
    alpha = check_alpha(alpha)
    a = (alpha[..., None] if alpha.ndim else alpha) * X
    s24 = -(a[..., 0] + a[..., 1])
    m = shift_from_edges(4, [(1, 2), (2, 4), (3, 4), (1, 3)])
    return s24 * stringy_amplitude(a + m, 1.0, 4).value
