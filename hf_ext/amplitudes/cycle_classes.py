"""Per-cycle-class trace identities of the superstring residue (spec §2.6, "prefactors = traces of field strengths").

Group the (2n-3)!! Pfaffian matchings by the cycles they join the non-special pairs into (a 4-cycle of the
integrand's graph joins two pairs, a 6-cycle three, ...). On the scaffolding residue, pointwise in the gluon
positions Z, the terms of one class sum to

    Σ_{μ in class} term_μ(Z) = prod_{pair-cycles c} [ (-1)^{|c|-1} Σ_{orientations} 2^{|c|-1} α′^{|c|}
                                tr(F_{c_1} ... F_{c_k}) C_Z(c) ] × B_rest(Z),

with C_Z(c) = 1 / (Z_{c1 c2} Z_{c2 c3} ... Z_{ck c1}) (Z_IJ = Z_J - Z_I), (-1)^{|c|-1} = sgn of the cycle, and
B_rest the bosonic-gluon integrand of the gluons outside every cycle (leg 1 included) with the cycle pairs as
scalars (their flavour edge single, no derivative). A 2-cycle {i, j} thus carries +2α′² tr(F_iF_j)/Z_ij², the
3-cycle {2, 3, 4} (both orientations) -8α′³ tr(F2F3F4)/(Z23 Z34 Z24). Checked pointwise at n = 4 (15 terms in
1 + 3 + 1 classes) and n = 5 (105 terms in 15 classes, including two 2-cycles and one 4-cycle of pairs) by the
tests; the sum over classes is the full residue integrand.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np

from .gluons import GluonKinematics
from .residues import ResidueTerm, _term_values, residue_terms


def pair_cycles(term: ResidueTerm) -> frozenset[frozenset[int]]:
    """The (unoriented) cycles of pairs of a term: 0-based gluons joined by one cycle of length >= 4."""
    parent: dict[int, int] = {}

    def find(g):
        while parent.setdefault(g, g) != g:
            g = parent[g]
        return g

    for a, b in term.edges:
        ga, gb = (a - 1) // 2, (b - 1) // 2
        if ga != gb:
            parent[find(ga)] = find(gb)
    groups = defaultdict(set)
    for g in list(parent):
        groups[find(g)].add(g)
    return frozenset(frozenset(v) for v in groups.values() if len(v) >= 2)


def cycle_classes(n: int) -> dict[frozenset, list[int]]:
    """Class (set of pair-cycles) -> indices of its terms in [`~hf_ext.amplitudes.residues.residue_terms`]."""
    out: dict[frozenset, list[int]] = defaultdict(list)
    for k, term in enumerate(residue_terms(n, "super")):
        out[pair_cycles(term)].append(k)
    return dict(out)


def cycle_factor(kin: GluonKinematics, alpha: float, cycle, Z: np.ndarray):
    """(-1)^{|c|-1} Σ over the (|c|-1)! cyclic orders of 2^{|c|-1} α′^{|c|} tr(F_c1...F_ck) C_Z(c) (0-based
    gluons; `Z` the gluon positions, shape (..., n)). A 2-cycle has one order, a 3-cycle its two orientations."""
    first, *rest = sorted(cycle)
    k = len(rest) + 1
    total = 0
    for perm in itertools.permutations(rest):
        order = (first,) + perm
        cz = 1.0
        for a, b in zip(order, order[1:] + order[:1]):
            cz = cz / (Z[..., b] - Z[..., a])
        total = total + 2 ** (k - 1) * alpha**k * kin.trace(*[g + 1 for g in order]) * cz
    return (-1) ** (k - 1) * total


def rest_integrand(kin: GluonKinematics, alpha: float, cycles, gaps: np.ndarray) -> np.ndarray:
    """B_rest: the bosonic-gluon integrand of the gluons outside `cycles`, the cycle pairs as scalars."""
    n = kin.n
    inside = set().union(*cycles) if cycles else set()
    edges, subset = [], 0
    for g in range(n):
        pair = (2 * g + 1, 2 * g + 2)
        edges += [pair] if g in inside else [pair, pair]
        subset |= (g not in inside) << g
    pseudo = ResidueTerm(tuple(edges), (), 1, subset, ())
    return _term_values(kin, alpha, (pseudo,), gaps)[0]


def class_sums(kin: GluonKinematics, alpha: float, gaps: np.ndarray) -> dict[frozenset, tuple[np.ndarray, np.ndarray]]:
    """For every class: (Σ of its terms, the trace prediction) at the nodes `gaps` (shape (nodes, n - 1))."""
    terms = residue_terms(kin.n, "super")
    values = _term_values(kin, alpha, terms, gaps)
    Z = np.concatenate([np.zeros(gaps.shape[:-1] + (1,)), np.cumsum(gaps, axis=-1)], axis=-1)
    out = {}
    for cls, idx in cycle_classes(kin.n).items():
        pred = rest_integrand(kin, alpha, cls, gaps)
        for cycle in cls:
            pred = pred * cycle_factor(kin, alpha, cycle, Z)
        out[cls] = (values[idx].sum(axis=0), pred)
    return out
