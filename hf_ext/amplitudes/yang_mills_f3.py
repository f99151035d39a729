"""Colour-ordered tree amplitudes of Yang-Mills deformed by F³, from a Berends-Giele (perturbiner) recursion: the
independent reference for the F³ amplitude that the first α′ order of the scaffolded bosonic string contains.

Lagrangian tr(-F²/4 + (β/3) F_m^n F_n^p F_p^m) with F_mn = ∂_m A_n - ∂_n A_m + [A_m, A_n]; its field equation is
D_m H^{mn} = 0 with H^{mn} = F^{mn} - β [F^{mp}, F_p^n] (the constant in front of β is absorbed in β). In Feynman
gauge the colour-ordered currents of the consecutive words P (perturbiner, ∂ -> k formally) obey

    s_P A_P = -k_P.(Σ_{XY=P} (A_X A_Y - A_Y A_X) - β C_P) - Σ_{XY=P} (A_X.H_Y - A_Y.H_X),
    F_P = k_P A_P - A_P k_P + Σ_{XY=P} (A_X A_Y - A_Y A_X),   C_P = Σ_{XY=P} (F_X F_Y - F_Y F_X),
    H_P = F_P - β C_P,   A_i = ε_i,

(a.M is the contraction of a vector with the first index of M, AB the outer product, FF the Lorentz product), and
A(1..n) = ε_n.(s_P A_P) with P = 1..n-1 (the amputated current). The amplitude is a polynomial of degree n - 2 in β;
[`f3_amplitude`] takes its linear coefficient by a symmetric 4-point difference (exact for degree <= 4, n <= 6).
This normalisation differs from Dixon's ([`~hf_ext.amplitudes.yang_mills.berends_giele`]) by c λ^n; the tests
measure that factor and the F³ coupling at 3 points and then predict 4 points with no free constant.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

MAX_LEGS = 6  # the β-difference of f3_amplitude is exact for amplitudes of degree n - 2 <= 4 in β


def perturbiner_amplitude(k, eps, gram, beta: float = 0.0) -> complex:
    """A(1..n) of YM + β F³ in the perturbiner normalisation (module docstring), all orders in β.

    Args:
        k (`np.ndarray` of shape (n, d)): momenta (massless and conserved under `gram`).
        eps (`np.ndarray` of shape (n, d)): transverse polarisations.
        gram (`np.ndarray` of shape (d, d)): the symmetric bilinear form.
        beta (`float`): the F³ coupling.

    Raises:
        ValueError: shapes, n outside [3, 6], or an on-shell internal momentum (a propagator pole).
    """
    k, eps, G = (np.asarray(v, dtype=np.complex128) for v in (k, eps, gram))
    if k.ndim != 2 or k.shape != eps.shape or G.shape != (k.shape[1],) * 2:
        raise ValueError(f"k, eps must have shape (n, d) and gram (d, d); got {k.shape}, {eps.shape}, {G.shape}")
    n = k.shape[0]
    if not 3 <= n <= MAX_LEGS:
        raise ValueError(f"the F³ recursion is implemented for 3 <= n <= {MAX_LEGS}; got n = {n}")
    A, F, H, K = {}, {}, {}, {}
    for i in range(n):
        A[(i, i)], K[(i, i)] = eps[i], k[i]
        F[(i, i)] = np.outer(k[i], eps[i]) - np.outer(eps[i], k[i])
        H[(i, i)] = F[(i, i)]

    def source(i: int, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(s_P A_P, the nonlinear part of F_P, C_P) of the word i..j from its splittings."""
        kP = k[i : j + 1].sum(axis=0)
        nl = np.zeros((k.shape[1],) * 2, dtype=np.complex128)
        C = np.zeros_like(nl)
        glue = np.zeros(k.shape[1], dtype=np.complex128)
        for m in range(i, j):
            X, Y = (i, m), (m + 1, j)
            nl += np.outer(A[X], A[Y]) - np.outer(A[Y], A[X])
            C += F[X] @ G @ F[Y] - F[Y] @ G @ F[X]
            glue += A[X] @ G @ H[Y] - A[Y] @ G @ H[X]
        return -(kP @ G @ (nl - beta * C)) - glue, nl, C

    for length in range(2, n):
        for i in range(0, n - length + 1):
            j = i + length - 1
            current, nl, C = source(i, j)
            if length == n - 1 and i == 0:
                return complex(eps[n - 1] @ G @ current)
            kP = k[i : j + 1].sum(axis=0)
            s = kP @ G @ kP
            if abs(s) < 1e-14 * max(1.0, float(np.max(np.abs(kP))) ** 2):
                raise ValueError(f"internal momentum of legs {i + 1}..{j + 1} is on shell: a propagator pole")
            A[(i, j)] = current / s
            F[(i, j)] = np.outer(kP, A[(i, j)]) - np.outer(A[(i, j)], kP) + nl
            H[(i, j)] = F[(i, j)] - beta * C
    raise AssertionError("unreachable")  # pragma: no cover


def f3_amplitude(k, eps, gram, step: float = 1.0) -> complex:
    """d/dβ A(1..n) at β = 0: the single-F³-insertion amplitude (perturbiner normalisation), from
    [8(A(h) - A(-h)) - (A(2h) - A(-2h))] / 12h, exact for the polynomial A(β) of degree n - 2 <= 4."""
    f = lambda b: perturbiner_amplitude(k, eps, gram, b)  # noqa: E731
    return (8 * (f(step) - f(-step)) - (f(2 * step) - f(-2 * step))) / (12 * step)


def scalar_pair_amplitude(k, eps, gram, pair: tuple[int, int]) -> complex:
    """The Yang-Mills-scalar amplitude with two scalars of one flavour at the 0-based legs `pair` and gluons
    elsewhere (perturbiner normalisation, β = 0), by dimensional reduction: one extra dimension, orthogonal to every
    momentum and gluon polarisation, carries the scalars' polarisation e with e.e = 1."""
    k, eps, G = (np.asarray(v) for v in (k, eps, gram))
    n, d = k.shape
    if len(set(pair)) != 2 or not all(0 <= p < n for p in pair):
        raise ValueError(f"pair must name two different legs in 0..{n - 1}, got {pair!r}")
    K = np.zeros((n, d + 1), dtype=np.result_type(k, 1.0))
    E = np.zeros((n, d + 1), dtype=np.result_type(eps, 1.0))
    Gx = np.zeros((d + 1, d + 1), dtype=np.result_type(G, 1.0))
    K[:, :d], E[:, :d], Gx[:d, :d], Gx[d, d] = k, eps, G, 1.0
    for p in pair:
        E[p] = 0.0
        E[p, d] = 1.0
    return perturbiner_amplitude(K, E, Gx)


def trace_f(k, eps, gram, legs) -> complex:
    """tr(F_{l1} F_{l2} ...) for 0-based `legs`, F_i = k_i ε_i - ε_i k_i as maps x -> k_i (ε_i.x) - ε_i (k_i.x)."""
    k, eps, G = (np.asarray(v) for v in (k, eps, gram))
    M = np.eye(k.shape[1], dtype=np.result_type(k, eps, G))
    for i in legs:
        M = M @ (np.outer(k[i], eps[i]) - np.outer(eps[i], k[i])) @ G
    return complex(np.trace(M))


def three_scalar_amplitude(k, eps, gram) -> complex:
    """The 4-point Yang-Mills-scalar amplitude with gluon 1 and scalars 2, 3, 4 in the flavour cycle (234):
    2 [(ε1.k2)/s12 - (ε1.k4)/s14], the unique gauge-invariant combination of the two cubic diagrams (the factor 2 is
    the normalisation of the mixed bosonic integrals' field-theory limit, read off the string at one point and
    confirmed at others by the tests)."""
    k, eps, G = (np.asarray(v) for v in (k, eps, gram))
    if k.shape[0] != 4:
        raise ValueError(f"three_scalar_amplitude is the 4-point amplitude; got n = {k.shape[0]}")
    return complex(2 * ((eps[0] @ G @ k[1]) / (2 * k[0] @ G @ k[1]) - (eps[0] @ G @ k[3]) / (2 * k[0] @ G @ k[3])))


def f3_via_yms(k, eps, gram) -> complex:
    """The paper's F³ formula at first α′ order, in field-theory amplitudes only (n = 3, 4; leg 1 special):

        4 A_F³(1..n) = Σ_{i<j in 2..n} 2 tr(F_i F_j) A_YMS(φ_i φ_j) + [n = 4] 8 tr(F_2 F_3 F_4) A_YMS(1; φ_2 φ_3 φ_4),

    the α′³ coefficient of the superstring's cycle classes (every class but the bosonic one), which must add up to
    minus the bosonic string's, because the superstring has no F³. Perturbiner normalisation."""
    n = np.asarray(k).shape[0]
    if n not in (3, 4):
        raise ValueError(f"f3_via_yms is implemented for 3 and 4 gluons; got n = {n}")
    total = sum(
        2 * trace_f(k, eps, gram, (i, j)) * scalar_pair_amplitude(k, eps, gram, (i, j))
        for i in range(1, n)
        for j in range(i + 1, n)
    )
    if n == 4:
        total += 8 * trace_f(k, eps, gram, (1, 2, 3)) * three_scalar_amplitude(k, eps, gram)
    return complex(total / 4)


__all__ = [
    "f3_amplitude",
    "f3_via_yms",
    "perturbiner_amplitude",
    "scalar_pair_amplitude",
    "three_scalar_amplitude",
    "trace_f",
]
