"""Field-theory Tr(φ³): the sum over planar cubic diagrams (triangulations of the N-gon) of prod 1/X.

This is the α′ → 0 limit of the stringy amplitude: α′^{N-3} A_N → sum_T prod_{X in T} 1/X (spec §2.3).
Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import functools

import numpy as np

from .kinematics import as_planar_array, check_points, variable_index


@functools.cache
def triangulations(N: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """All triangulations of the N-gon (Catalan(N-2) of them), each as the N-3 chords (i, j), 1-based, i < j.

    Vertex labels match the planar variables: the chord (i, j) is X_{i,j}.
    """
    N = check_points(N, minimum=3)

    @functools.cache
    def polygon(vertices: tuple[int, ...]) -> tuple[frozenset, ...]:
        # triangulations of the polygon on `vertices` (in cyclic order): the edge (v0, v_last) lies in one
        # triangle (v0, vk, v_last); recurse on the two sides.
        if len(vertices) < 4:
            return (frozenset(),)
        first, last = vertices[0], vertices[-1]
        out = []
        for k in range(1, len(vertices) - 1):
            chords = set()
            if k > 1:
                chords.add((first, vertices[k]))
            if k < len(vertices) - 2:
                chords.add((vertices[k], last))
            for left in polygon(vertices[: k + 1]):
                for right in polygon(vertices[k:]):
                    out.append(frozenset(chords) | left | right)
        return tuple(out)

    return tuple(tuple(sorted(t)) for t in sorted(polygon(tuple(range(1, N + 1))), key=sorted))


def field_theory_amplitude(X, N: int | None = None) -> np.ndarray:
    """Planar Tr(φ³) amplitude sum_T prod_{X in T} 1/X, vectorised over leading axes.

    Args:
        X (`np.ndarray` of shape (..., N(N-3)/2) or a mapping): planar variables (see
            [`~hf_ext.amplitudes.kinematics.planar_variables`]).
        N (`int`, *optional*): number of points; inferred from the last axis when omitted.

    Raises:
        ValueError: some planar variable is zero (a propagator pole).
    """
    from .stringy import infer_points

    N = infer_points(X, N)
    X = as_planar_array(X, N)
    if np.any(X == 0):
        raise ValueError("field-theory amplitude is singular: some planar variable X is 0 (a propagator pole)")
    inv = 1.0 / X
    index = variable_index(N)
    return sum(np.prod([inv[..., index[c]] for c in t], axis=0) for t in triangulations(N))
