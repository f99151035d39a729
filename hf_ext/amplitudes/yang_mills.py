"""Colour-ordered tree-level Yang-Mills amplitudes from the Berends-Giele recursion (an independent reference for
the gluon amplitudes that come out of the scaffolding residues).

Colour-ordered Feynman rules of L. Dixon (hep-ph/9601359), all momenta outgoing, metric mostly minus:
- 3-vertex (i/√2)[η_νρ (p - q)_μ + η_ρμ (q - k)_ν + η_μν (k - p)_ρ] for legs (k, μ), (p, ν), (q, ρ) in colour order;
- 4-vertex i η_μρ η_νσ - (i/2)(η_μν η_ρσ + η_μσ η_νρ);
- propagator -i η_μν / P^2.
The current J(i..j) of the consecutive legs i..j is (-i / P^2) [Σ 3-vertices of two sub-currents + Σ 4-vertices of
three], J(i) = ε_i, and A(1..n) = ε_n . (i P^2 J(1..n-1)) with the propagator amputated. With Dixon's helicity
vectors ([`~hf_ext.amplitudes.spinors`]) the MHV amplitudes are Parke-Taylor, i⟨ab⟩^4/(⟨12⟩...⟨n1⟩); at 3 points
A(123) = i√2 [(ε1.ε2)(ε3.k1) + (ε2.ε3)(ε1.k2) + (ε3.ε1)(ε2.k3)].

Vectors live in any space with a symmetric bilinear form `gram` (complex entries allowed): Minkowski components
with `gram = diag(1, -1, -1, -1)`, or the coefficients of k_i and ε_i over the 2n scalar momenta p_a of a
scaffolded 2n-gon with `gram = s/2` ([`ym_amplitude`]), which needs no explicit vectors.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

MAX_LEGS = 12
SQRT2 = np.sqrt(2.0)


def berends_giele(k, eps, gram=None, order=None) -> complex:
    """The colour-ordered amplitude A(σ1, ..., σn) of n gluons.

    Args:
        k (`np.ndarray` of shape (n, d)): momenta (conserved, massless under `gram`).
        eps (`np.ndarray` of shape (n, d)): polarisations (transverse: ε_i.k_i = 0).
        gram (`np.ndarray` of shape (d, d), *optional*): the bilinear form; Minkowski (+, -, ..., -) if omitted.
        order (sequence of int, *optional*): the colour order σ (0-based legs); 0..n-1 if omitted.

    Returns:
        `complex`: A(σ) in Dixon's normalisation (module docstring).

    Raises:
        ValueError: shapes, n outside [3, 12], non-finite entries, or an `order` that is not a permutation.
    """
    k, eps = np.asarray(k), np.asarray(eps)
    if k.ndim != 2 or k.shape != eps.shape:
        raise ValueError(f"k and eps must both have shape (n, d); got {k.shape} and {eps.shape}")
    n, d = k.shape
    if not 3 <= n <= MAX_LEGS:
        raise ValueError(f"Berends-Giele needs 3 <= n <= {MAX_LEGS} gluons, got n = {n}")
    if (
        k.dtype.kind not in "fiuc"
        or eps.dtype.kind not in "fiuc"
        or not (np.all(np.isfinite(k)) and np.all(np.isfinite(eps)))
    ):
        raise ValueError("k and eps must be finite numbers")
    G = np.diag([1.0] + [-1.0] * (d - 1)) if gram is None else np.asarray(gram)
    if G.shape != (d, d):
        raise ValueError(f"gram must have shape ({d}, {d}), got {G.shape}")
    order = list(range(n)) if order is None else [int(v) for v in order]
    if sorted(order) != list(range(n)):
        raise ValueError(f"order must be a permutation of 0..{n - 1}, got {order!r}")
    k, eps = k[order].astype(np.complex128), eps[order].astype(np.complex128)
    G = G.astype(np.complex128)

    def dot(u, v):
        return u @ G @ v

    P = {(i, j): k[i : j + 1].sum(axis=0) for i in range(n) for j in range(i, n)}
    J: dict[tuple[int, int], np.ndarray] = {(i, i): eps[i] for i in range(n)}

    def vertices(i: int, j: int) -> np.ndarray:
        """The amputated current: every 3- and 4-vertex joining sub-currents of i..j to the off-shell leg."""
        kx = -P[(i, j)]
        out = np.zeros(d, dtype=np.complex128)
        for m in range(i, j):
            JL, JR, kL, kR = J[(i, m)], J[(m + 1, j)], P[(i, m)], P[(m + 1, j)]
            out += (1j / SQRT2) * (dot(JL, JR) * (kL - kR) + JR * dot(kR - kx, JL) + JL * dot(kx - kL, JR))
        for m in range(i, j):
            for q in range(m + 1, j):
                A, B, C = J[(i, m)], J[(m + 1, q)], J[(q + 1, j)]
                out += 1j * B * dot(A, C) - 0.5j * (A * dot(B, C) + C * dot(A, B))
        return out

    for length in range(2, n - 1):  # the full n-1 current is on shell: only its amputated vertices enter
        for i in range(0, n - length):
            j = i + length - 1
            P2 = dot(P[(i, j)], P[(i, j)])
            if abs(P2) == 0:
                raise ValueError(
                    f"the internal momentum of legs {order[i : j + 1]} is on shell (P^2 = 0): a "
                    "propagator pole; the amplitude is singular there"
                )
            J[(i, j)] = -1j / P2 * vertices(i, j)
    return complex(dot(eps[n - 1], vertices(0, n - 2)))


def gluon_vectors(kin):
    """(k, ε, gram) of gluon kinematics on the scaffolding residue as coefficient vectors over the 2n scalar
    momenta: k_i = p_{2i-1} + p_{2i}, ε_i = p_{2i}, gram p_a.p_b = s_ab/2 with ε_i^2 set to 0 (it never enters)."""
    n = kin.n
    kap = np.zeros((n, 2 * n))
    e = np.zeros((n, 2 * n))
    for i in range(n):
        kap[i, 2 * i] = kap[i, 2 * i + 1] = 1.0
        e[i, 2 * i + 1] = 1.0
    G = kin.s / 2
    G[np.arange(1, 2 * n, 2), np.arange(1, 2 * n, 2)] = 0.0  # ε_i^2 never enters; keep it 0 as in dot_products
    return kap, e, G


def ym_amplitude(kin, order=None) -> complex:
    """A_YM(σ) for gluon kinematics on the scaffolding residue ([`~hf_ext.amplitudes.gluons.GluonKinematics`]),
    with k_i = p_{2i-1} + p_{2i} and ε_i = p_{2i} as coefficient vectors and the Gram matrix p_a.p_b = s_ab/2."""
    return berends_giele(*gluon_vectors(kin), order)
