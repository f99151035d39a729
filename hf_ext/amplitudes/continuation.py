"""Analytic continuation of the stringy Tr(φ³) amplitude A_N (N <= 6) outside the Euclidean region, to every
α′X > -1 off the poles α′X = 0 (spec §2.3: the curve integral itself converges only for every α′X > 0).

In the cone of the g-vector fan of a triangulation T the chart point is t = sum_{X in T} r_X g_X (unimodular, so
d^{N-3}t = prod dr_X), and with q_X = e^{-r_X} in (0, 1]

    ∫_cone prod_Y u_Y^{α′Y} d^{N-3}t = ∫_{[0,1]^{N-3}} prod_{X in T} q_X^{α′X - 1} H_T(q) dq,
    H_T(q) = exp(sum_Y α′Y log u_Y + sum_{X in T} α′X r_X),

where H_T is analytic on [0, 1]^{N-3}, the faces q_X = 0 included (each -log u_X = r_X + O(q) in its own cones:
the headlight functions are linear there). The only non-analytic factor is the explicit power, so each dimension is
one of two one-dimensional rules:

- α′X > 0: Gauss-Jacobi with weight q^{α′X - 1} on [0, 1];
- -1 < α′X < 0: ∫_0^1 q^{a-1} h(q) dq = ∫_0^1 q^a [h(q) - h(0)]/q dq + h(0)/a, the unique analytic continuation
  in a (both sides agree for a > 0, the right side is analytic for a > -1 except the pole at a = 0). As a rule:
  Gauss-Jacobi nodes q_i of weight q^a with weights w_i / q_i, plus a node at q = 0 (the facet, where the integrand
  factorises into the lower-point amplitudes) with weight 1/a - sum w_i / q_i.

The tensor product of these rules over the N-3 dimensions of every cone is exact for polynomials in q, so the
quadrature converges spectrally, the continued region included. The facet node q = 0 is evaluated at r = 60
(e^{-60} is below the float64 resolution of H).

**Branch.** Tree-level stringy amplitudes are meromorphic in the α′X: poles at α′X in {0, -1, -2, ...} and no
branch cuts, so the continuation to real α′X is unique and real (the principal q^a with q > 0 is used throughout).
There is no iε choice to make away from the poles; at a pole the amplitude is undefined and the functions here raise.
Continuing below α′X = -1 would need higher Taylor subtractions of H_T (not implemented: clear error).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from .field_theory import triangulations
from .kinematics import check_points, planar_variables, variable_index, x_label
from .stringy import Evaluation, _gauss_jacobi, g_vectors, log_u_curve

FACET_R = 60.0  # r at the facet node q = 0: e^{-60} ~ 1e-26, below the resolution of H
POLE_TOLERANCE = 1e-9  # |α′X| below this is treated as sitting on the massless pole
MAX_CONTINUED_POINTS = 6
MAX_POINTS_PER_CALL = 2_000  # the rule depends on the kinematics, so points are integrated one by one


def wall_rule(a: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The one-dimensional rule for ∫_0^1 q^{a-1} h(q) dq (continued in a): nodes q (a node q = 0 for a < 0) and
    weights, exact for polynomials h of degree < 2m (degree < 2m + 1 with the facet node).

    Raises:
        ValueError: a <= -1 (needs more subtractions) or |a| < 1e-9 (the pole at a = 0).
    """
    if a <= -1:
        raise ValueError(f"continuation reaches α′X > -1 only (one subtraction); got α′X = {a:.6g}")
    if abs(a) < POLE_TOLERANCE:
        raise ValueError(f"α′X = {a:.3g} sits on the massless pole α′X = 0: the amplitude is infinite there")
    if a > 0:
        return _gauss_jacobi(m, 0.0, 1.0, a - 1.0, 0.0)
    q, w = _gauss_jacobi(m, 0.0, 1.0, a, 0.0)
    wq = w / q
    return np.concatenate([q, [0.0]]), np.concatenate([wq, [1.0 / a - wq.sum()]])


def _cone_integral(aX: np.ndarray, N: int, T, m: int) -> float:
    index = variable_index(N)
    g = g_vectors(N)
    rules = [wall_rule(float(aX[index[X]]), m) for X in T]
    Q = np.stack([c.ravel() for c in np.meshgrid(*[r[0] for r in rules], indexing="ij")], axis=-1)
    W = np.prod(np.stack([c.ravel() for c in np.meshgrid(*[r[1] for r in rules], indexing="ij")], axis=-1), axis=-1)
    with np.errstate(divide="ignore"):
        R = np.where(Q > 0, -np.log(np.where(Q > 0, Q, 1.0)), FACET_R)
    t = R @ np.array([g[X] for X in T], dtype=np.float64)
    a_T = np.array([aX[index[X]] for X in T])
    log_H = log_u_curve(t, N) @ aX + R @ a_T
    return float(W @ np.exp(log_H))


def continued_amplitude(aX, N: int, nodes: int = 20) -> Evaluation:
    """A_N[α′X] for every α′X > -1 (α′X != 0), N = 4, 5, 6; in the Euclidean region it is the curve integral.

    Args:
        aX (`np.ndarray` of shape (..., N(N-3)/2)): α′ times the planar variables (real).
        N (`int`): number of points.
        nodes (`int`, defaults to 20): Gauss-Jacobi nodes per dimension (the error estimate compares with
            nodes - 6).

    Returns:
        [`~hf_ext.amplitudes.stringy.Evaluation`] with method `"continued"`.

    Raises:
        ValueError: N outside [4, 6], some α′X <= -1 or on the pole 0, non-finite or complex input, too many points.
    """
    N = check_points(N)
    if N > MAX_CONTINUED_POINTS:
        raise ValueError(
            f"the continuation is implemented for N <= {MAX_CONTINUED_POINTS} (an (N-3)-dimensional "
            f"tensor rule per cone); got N = {N}"
        )
    aX = np.asarray(aX)
    if aX.dtype.kind not in "fiu":
        raise ValueError(f"α′X must be real numbers, got dtype {aX.dtype}")
    aX = aX.astype(np.float64)
    if aX.shape[-1:] != (N * (N - 3) // 2,):
        raise ValueError(f"expected α′X of shape (..., {N * (N - 3) // 2}) for N = {N}, got {aX.shape}")
    if not np.all(np.isfinite(aX)):
        raise ValueError("α′X must be finite")
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or not 8 <= nodes <= 60:
        raise ValueError(f"nodes must be an integer in [8, 60], got {nodes!r}")
    flat = aX.reshape(-1, aX.shape[-1])
    if len(flat) > MAX_POINTS_PER_CALL:
        raise ValueError(f"{len(flat)} points exceed the limit of {MAX_POINTS_PER_CALL} per call")
    names = [x_label(*p) for p in planar_variables(N)]
    for row in flat:
        bad = [f"{names[k]} = {row[k]:.4g}" for k in np.flatnonzero((row <= -1) | (np.abs(row) < POLE_TOLERANCE))]
        if bad:
            raise ValueError(f"continued A_{N} needs every α′X > -1 and off the pole α′X = 0; got α′{', α′'.join(bad)}")
    values, errors = [], []
    for row in flat:
        fine = sum(_cone_integral(row, N, T, nodes) for T in triangulations(N))
        coarse = sum(_cone_integral(row, N, T, nodes - 6) for T in triangulations(N))
        values.append(fine)
        errors.append(max(abs(fine - coarse), 1e-14 * abs(fine)))
    shape = aX.shape[:-1]
    return Evaluation(np.array(values).reshape(shape), np.array(errors).reshape(shape), "continued")


def facet_amplitude(aX, N: int, pair: tuple[int, int]) -> float:
    """The residue of A_N at α′X_pair = 0: A_L × A_R of the two polygons the chord cuts off (A_3 = 1), each at its
    own planar variables (the chords of the N-gon on that side). Used to check the continuation's pole."""
    from .stringy import stringy_amplitude

    i, j = pair
    index = variable_index(N)
    out = 1.0
    for side in (tuple(range(i, j + 1)), tuple(range(j, N + 1)) + tuple(range(1, i + 1))):
        n = len(side)
        if n < 4:
            continue
        sub = []
        for a, b in planar_variables(n):
            u, v = sorted((side[a - 1], side[b - 1]))
            sub.append(aX[index[(u, v)]])
        out *= float(stringy_amplitude(np.array(sub), 1.0, n).value)
    return out


__all__ = ["continued_amplitude", "facet_amplitude", "wall_rule"]
