"""Closed forms of the stringy Tr(φ³) amplitudes at 4 and 5 points, the type-I 4-point formulas and the α′
expansion. Vectorised float64 (numpy/scipy) versions and mpmath references.

- 4 points: A_4 = B(α′X13, α′X24), analytic everywhere except the poles α′X ∈ {0, -1, -2, ...}.
- 5 points (spec §2.7 item 3): A_5 = B(A13, A24) B(A14, A35) 3F2(A13, A14, A24 + A35 - A25; A13 + A24, A14 + A35; 1)
  with A_ij = α′X_ij. The 3F2 at unit argument converges when its parameter excess A25 is > 0; by cyclic symmetry
  any planar variable can sit in that slot, so the closed form continues A_5 to every point where at least one
  α′X is > 0 (the rotation with the largest one is used).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

# Rotations i -> i + r of the pentagon, as column permutations of (X13, X14, X24, X25, X35): after rotation r the
# value of X_{2+r,5+r} sits in the X25 slot (the 3F2 excess). Derived from X_{ij} -> X_{i+r,j+r}.
_PENTAGON = ((1, 3), (1, 4), (2, 4), (2, 5), (3, 5))


def _pentagon_rotations() -> np.ndarray:
    index = {p: k for k, p in enumerate(_PENTAGON)}
    perms = []
    for r in range(5):
        cols = []
        for i, j in _PENTAGON:
            a, b = sorted(((i + r - 1) % 5 + 1, (j + r - 1) % 5 + 1))
            cols.append(index[(a, b)])
        perms.append(cols)
    return np.array(perms)


PENTAGON_ROTATIONS = _pentagon_rotations()


def _is_pole(x: np.ndarray) -> np.ndarray:
    """Non-positive integers (to 1e-12): the poles of Γ."""
    return (np.real(x) < 0.5) & (np.abs(x - np.round(np.real(x))) < 1e-12)


def gamma_ratio(num, den) -> np.ndarray:
    """prod Γ(num) / prod Γ(den) for real arguments, via log-gamma and signs (no overflow for large arguments).

    Raises:
        ValueError: a numerator argument is a pole of Γ (a non-positive integer).
    """
    num = [np.asarray(a, dtype=np.float64) for a in num]
    den = [np.asarray(b, dtype=np.float64) for b in den]
    for a in num:
        if np.any(_is_pole(a)):
            raise ValueError(
                "the amplitude has a pole here: a Γ argument α′X (or a shifted one) is a "
                f"non-positive integer ({a[_is_pole(a)].ravel()[:3]})"
            )
    log = sum(special.gammaln(a) for a in num) - sum(special.gammaln(b) for b in den)
    sign = np.prod([special.gammasgn(a) for a in num], axis=0) * np.prod(
        [np.where(_is_pole(b), 0.0, special.gammasgn(b)) for b in den], axis=0
    )
    return sign * np.exp(log)


def beta_amplitude(a, b) -> np.ndarray:
    """A_4 = B(a, b) = Γ(a)Γ(b)/Γ(a+b) with a = α′X13, b = α′X24; the analytic continuation off a, b > 0.

    Args:
        a, b (`float` or `np.ndarray`): α′X13 and α′X24 (broadcast together).
    """
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return gamma_ratio([a, b], [a + b])


def veneziano_factor(a, b) -> np.ndarray:
    """Γ(1+a)Γ(1+b)/Γ(1+a+b): the type-I form factor (→ 1 as α′ → 0)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return gamma_ratio([1 + a, 1 + b], [1 + a + b])


def type_i_four_scalar(a, b) -> np.ndarray:
    """(-(a+b)/a) Γ(1+a)Γ(1+b)/Γ(1+a+b): the type-I 4-scalar amplitude (ε_i.ε_j = δ_12 δ_34), spec §2.5."""
    a = np.asarray(a, dtype=np.float64)
    return -(a + b) / a * veneziano_factor(a, b)


def _bernoulli_poly(n: int, x: np.ndarray) -> np.ndarray:
    numbers = special.bernoulli(n)  # B_0 .. B_n with B_1 = -1/2
    return sum(math.comb(n, k) * numbers[k] * x ** (n - k) for k in range(n + 1))


def hyp3f2_unit(a1, a2, a3, b1, b2, *, terms: int | None = None, order: int = 14, return_magnitude: bool = False):
    """3F2(a1, a2, a3; b1, b2; 1) in float64, vectorised, for parameter excess s = b1 + b2 - a1 - a2 - a3 > 0.

    The first K terms are summed exactly; the tail uses the large-k expansion of the term,
    t_k ~ C k^{-1-s} (1 + c_1/k + ... + c_J/k^J) (Stirling with Bernoulli polynomials), summed with Hurwitz zeta
    functions. Unlike plain summation (or mpmath's Euler-Maclaurin), this stays fast as s -> 0.

    Args:
        a1, a2, a3, b1, b2 (`np.ndarray`): real parameters (broadcast together); b1, b2 not non-positive integers.
        terms (`int`, *optional*): K; defaults to 40 + 8 max|parameter| (the tail series is in powers of
            parameter / K).
        order (`int`, defaults to 14): J, terms of the tail expansion.
        return_magnitude (`bool`): also return an error scale: sum |t_k| (a negative a_i makes the first terms
            alternate, and an exponentially small result then cancels between large terms) plus the truncation of
            the tail series (its last term, divided by the machine epsilon so that both add up in one number).

    Raises:
        ValueError: some excess is <= 0 (the series diverges), or a lower parameter is a pole.
    """
    a1, a2, a3, b1, b2 = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a1, a2, a3, b1, b2)))
    s = b1 + b2 - a1 - a2 - a3
    if np.any(s <= 0):
        raise ValueError(f"3F2 at unit argument diverges: parameter excess must be > 0, got min {s.min():.3g}")
    if np.any(_is_pole(b1)) or np.any(_is_pole(b2)):
        raise ValueError("3F2 lower parameter is a non-positive integer")
    big = max(1.0, float(np.max(np.abs([a1, a2, a3, b1, b2]))))
    K = int(terms or 40 + 8 * math.ceil(big))
    total, magnitude = np.zeros_like(s), np.zeros_like(s)
    t = np.ones_like(s)
    for k in range(K):
        total += t
        magnitude += np.abs(t)
        t = t * (a1 + k) * (a2 + k) * (a3 + k) / ((b1 + k) * (b2 + k) * (k + 1))
    # t is now t_K. log t_k = const - (1+s) log k + sum_m d_m k^{-m}.
    d = [np.zeros_like(s)]
    for m in range(1, order + 1):
        bn = (
            sum(_bernoulli_poly(m + 1, x) for x in (a1, a2, a3))
            - sum(_bernoulli_poly(m + 1, x) for x in (b1, b2))
            - _bernoulli_poly(m + 1, np.ones_like(s))
        )
        d.append((-1) ** (m + 1) * bn / (m * (m + 1)))
    c = [np.ones_like(s)]  # exp(sum d_m x^m) = sum c_j x^j
    for j in range(1, order + 1):
        c.append(sum(m * d[m] * c[j - m] for m in range(1, j + 1)) / j)
    norm = t * K ** (1 + s) / sum(c[j] * float(K) ** (-j) for j in range(order + 1))
    tail = norm * sum(c[j] * special.zeta(1 + s + j, K) for j in range(order + 1))
    if return_magnitude:
        last = np.abs(tail * c[order] * float(K) ** (-order)) / np.finfo(np.float64).eps
        return total + tail, magnitude + np.abs(tail) + last
    return total + tail


def five_point_closed_form(aX, return_error: bool = False):
    """A_5 from the 3F2 closed form, vectorised; `aX` = α′ (X13, X14, X24, X25, X35) of shape (..., 5).

    Every cyclic rotation with a positive excess is evaluated (spec §2.7 item 3: any planar variable can be the
    excess); each row keeps the one with the smallest rounding error (cancellations between alternating terms grow
    with α′X: measured 1e-4 relative at α′X ~ 50 for a poor rotation).

    Args:
        aX (`np.ndarray` of shape (..., 5)): α′ times the planar variables.
        return_error (`bool`): also return the estimated absolute rounding error.

    Raises:
        ValueError: every α′X of a row is <= 0 (no rotation converges; outside what this continuation reaches).
    """
    aX = np.asarray(aX, dtype=np.float64)
    if aX.shape[-1:] != (5,):
        raise ValueError(f"expected α′X of shape (..., 5), got {aX.shape}")
    if np.any(aX.max(axis=-1) <= 0):
        raise ValueError("5-point closed form needs at least one α′X > 0 (it becomes the 3F2 excess)")
    flat = aX.reshape(-1, 5)
    value = np.full(len(flat), np.nan)
    error = np.full(len(flat), np.inf)
    for perm in PENTAGON_ROTATIONS:
        A = flat[:, perm]
        # this rotation needs a positive excess and finite lower parameters (Γ(b) -> ∞ cancels only in a limit)
        rows = np.flatnonzero((A[:, 3] > 0) & ~_is_pole(A[:, 0] + A[:, 2]) & ~_is_pole(A[:, 1] + A[:, 4]))
        if rows.size == 0:
            continue
        A13, A14, A24, A25, A35 = flat[rows][:, perm].T
        pre = gamma_ratio([A13, A24, A14, A35], [A13 + A24, A14 + A35])
        f, mag = hyp3f2_unit(A13, A14, A24 + A35 - A25, A13 + A24, A14 + A35, return_magnitude=True)
        err = 64 * np.finfo(np.float64).eps * np.abs(pre) * (mag + np.abs(f) * (1 + np.abs(flat[rows]).sum(-1)))
        better = err < error[rows]
        value[rows[better]], error[rows[better]] = (pre * f)[better], err[better]
    if np.any(np.isnan(value)):
        raise ValueError(
            "5-point closed form: no cyclic rotation has a positive excess and finite lower 3F2 "
            "parameters at some point (a limit this continuation does not take)"
        )
    value, error = value.reshape(aX.shape[:-1]), error.reshape(aX.shape[:-1])
    return (value, error) if return_error else value


def five_point_closed_form_mp(aX, dps: int = 30):
    """mpmath reference of [`five_point_closed_form`] (one point; slow for small α′, see spec §2.7)."""
    import mpmath as mp

    with mp.workdps(dps):
        A13, A14, A24, A25, A35 = (mp.mpf(float(v)) if not isinstance(v, mp.mpf) else v for v in aX)
        return mp.beta(A13, A24) * mp.beta(A14, A35) * mp.hyp3f2(A13, A14, A24 + A35 - A25, A13 + A24, A14 + A35, 1)


def four_point_alpha_series(X, Y, order: int = 3) -> np.ndarray:
    """Coefficients c_k of α′B(α′X, α′Y) = sum_k c_k α′^k, k = 0..order (c_0 = 1/X + 1/Y, c_1 = 0,
    c_2 = -ζ(2)(X+Y), c_3 = ζ(3)(X+Y)^2, ...), from B(a, b) = (1/a + 1/b) exp(sum_{k>=2} (-1)^k ζ(k)/k
    (a^k + b^k - (a+b)^k)).

    Returns:
        `np.ndarray` of shape (order + 1, ...) (broadcast shape of X and Y).
    """
    X, Y = np.broadcast_arrays(np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64))
    D = [np.zeros_like(X) for _ in range(order + 1)]
    for k in range(2, order + 1):
        D[k] = (-1) ** k * special.zeta(k) / k * (X**k + Y**k - (X + Y) ** k)
    E = [np.ones_like(X)] + [np.zeros_like(X) for _ in range(order)]
    for j in range(1, order + 1):
        E[j] = sum(m * D[m] * E[j - m] for m in range(1, j + 1)) / j
    return np.stack([(1 / X + 1 / Y) * e for e in E])
