"""Quadrature on the 2-simplex with power singularities on its edges and at its corners (sector decomposition).

The 5-point worldsheet integrals here (the 5-gluon scaffolding residue over two gluon positions, the
Mafra-Schlotterer-Stieberger Z-integrals) are integrals over three consecutive gaps g_1, g_2, g_3 > 0 with
g_1 + g_2 + g_3 = L. The integrand behaves as g_i^{e_i} when one gap closes (a two-particle collision) and scales
as λ^{E_k} when the two gaps other than g_k close together (a triple collision, or two separate collisions).

Sector decomposition: the simplex is cut into the three sectors where g_k is the largest gap; there g_i = g_k x,
g_j = g_k y with (x, y) in [0, 1]^2 and g_k = L / (1 + x + y) (Jacobian L^2 / (1 + x + y)^3). Each square is
cut again along x = y, and x = y t (resp. y = x t) blows the corner up: the integrand becomes
t^{e_i} y^{E_k + 1} times a function analytic on [0, 1]^2. A tensor Gauss-Jacobi rule with exactly that weight then
converges spectrally. The rule is returned as nodes and effective weights, ∫ f ≈ Σ_k W_k f(g_k), so the caller
evaluates its integrand once at the nodes.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from .stringy import _gauss_jacobi

MAX_NODES = 200  # per dimension; 6 * 200^2 = 240,000 nodes


def simplex_rule(
    L: float, edge: tuple[float, float, float], corner: tuple[float, float, float], nodes: int = 24
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for ∫_{g > 0, g_1 + g_2 + g_3 = L} f(g) dg_1 dg_2.

    Args:
        L (`float`): the total length (> 0).
        edge (`tuple` of 3 floats): e_i, the power of g_i as g_i -> 0 (each > -1).
        corner (`tuple` of 3 floats): E_k, the scaling power where the two gaps other than g_k vanish together
            (E_k + 2 > 0; for a product of two separate collisions E_k = e_i + e_j).
        nodes (`int`): Gauss-Jacobi nodes per dimension (6 * nodes^2 in all).

    Returns:
        `(gaps, weights)`: `gaps` of shape (6 nodes^2, 3) (each gap computed to full relative precision, so
        differences of worldsheet points are sums of positive numbers) and `weights` of shape (6 nodes^2,).

    Raises:
        ValueError: an exponent outside the convergent range, or `nodes` outside [2, MAX_NODES].
    """
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or not 2 <= nodes <= MAX_NODES:
        raise ValueError(f"nodes must be an integer in [2, {MAX_NODES}], got {nodes!r}")
    if not (np.isfinite(L) and L > 0):
        raise ValueError(f"L must be finite and > 0, got {L!r}")
    edge, corner = [float(v) for v in edge], [float(v) for v in corner]
    for i, e in enumerate(edge):
        if not (np.isfinite(e) and e > -1):
            raise ValueError(f"edge exponent e_{i + 1} = {e!r} must be > -1 (the integral diverges as g_{i + 1} -> 0)")
    for k, E in enumerate(corner):
        if not (np.isfinite(E) and E > -2):
            raise ValueError(f"corner exponent E_{k + 1} = {E!r} must be > -2 (the integral diverges at that corner)")
    gaps, weights = [], []
    for k in range(3):
        i, j = [m for m in range(3) if m != k]
        for small, other in ((i, j), (j, i)):  # the half of the square where g_small < g_other
            t, wt = _gauss_jacobi(nodes, 0.0, 1.0, edge[small], 0.0)
            r, wr = _gauss_jacobi(nodes, 0.0, 1.0, corner[k] + 1, 0.0)
            T, R = np.meshgrid(t, r, indexing="ij")
            T, R = T.ravel(), R.ravel()
            W = np.outer(wt, wr).ravel()
            gk = L / (1 + R + R * T)  # g_other = g_k R, g_small = g_k R T
            g = np.empty((T.size, 3))
            g[:, k], g[:, other], g[:, small] = gk, gk * R, gk * R * T
            jac = L**2 / (1 + R + R * T) ** 3 * R  # d(g_small, g_other) = J dx dy, dx dy = R dT dR
            gaps.append(g)
            weights.append(W * jac / (T ** edge[small] * R ** (corner[k] + 1)))
    return np.concatenate(gaps), np.concatenate(weights)
