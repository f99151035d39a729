"""The determinant form of the n-gluon residue integrand: the sum over permutations σ of the n - 1 non-special legs
of [`~hf_ext.amplitudes.cycle_classes`] packed into one determinant.

The class-sum identity reads, pointwise in the gluon positions Z,

    integrand = Σ_{σ in S_{n-1}} sgn(σ) Π_{cycles c of σ, |c| >= 2} ½ tr(N_{c1 c2} N_{c2 c3} ... N_{ck c1}) B_{fix(σ)},
    N_ij = 2α′ F_i / Z_ij,

with B_S the mixed bosonic integrand (gluons S and leg 1, the rest scalars) = e^{P_0} [ε^S] e^{P - P_0}, P the
multilinear exponent series of the bosonic term ([`~hf_ext.amplitudes.residues.exponent_series`]). Attach a
nilpotent ε_i (ε_i² = 0, the same ε as in P) to row i; closed walks that revisit a leg then vanish, and the
exponential formula turns the permutation sum into a determinant over the legs 2..n:

    integrand = e^{P_0} [ε_1 ... ε_n] exp(P - P_0) det(𝟙 + 𝕄)^{1/2},   𝕄_ij = ε_i N_ij (i != j), 𝕄_ii = 0,

since log det(𝟙 + 𝕄) = Σ_k (-1)^{k+1} tr 𝕄^k / k = Σ_{oriented simple cycles} sgn(c) ε_c tr N_c; the square root
gives every cycle its ½. F_i = U_i Ω U_i^T G with U_i = (k_i, ε_i) and Ω = ((0, 1), (-1, 0)) has rank 2, so by
Sylvester's identity the Lorentz blocks shrink to 2 x 2 blocks 2α′ Ω Γ_ij / Z_ij, Γ_ij = U_i^T G U_j: an
(n-1) x (n-1) determinant of 2 x 2 blocks. det(𝟙 + 𝕄) is evaluated as a determinant: it is a polynomial of degree
<= 2 in each ε_i (row block i has rank <= 2), so its multilinear coefficients are exact sign-alternating sums of
numerical determinants at ε_i = ±1, 2^|T| of them for the monomial ε^T. (Its square root is, up to sign, the Pfaffian
of the antisymmetric matrix Ω^{-1}(𝟙 + 𝕄) with symmetric nilpotent placement: the CHY Ψ structure with the
diagonal replaced by Ω.)

Convention note: the abstract speaks of an "n x n symmetrical determinant"; the paper body was not available. What
is implemented is the (n-1) x (n-1) block determinant above (leg 1 is the special (-1)-picture leg), square-rooted.
A determinant of scalar pairwise entries cannot give the 3-cycle weight tr(F_2F_3F_4), which is not a product of
pairwise invariants, so the blocks are needed.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import itertools

import numpy as np

from .gluons import GluonKinematics
from .residues import _exp_coefficient, exponent_series, residue_terms
from .yang_mills import gluon_vectors

OMEGA = np.array([[0.0, 1.0], [-1.0, 0.0]])


def _positions(gaps: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros(gaps.shape[:-1] + (1,)), np.cumsum(gaps, axis=-1)], axis=-1)


def cycle_blocks(kin: GluonKinematics, alpha, gaps: np.ndarray) -> np.ndarray:
    """The 2 x 2 blocks 2α′ Ω Γ_ij / Z_ij of the legs 2..n (0-based 1..n-1), zero on the diagonal: shape
    (*nodes, n - 1, n - 1, 2, 2)."""
    kap, e, G = gluon_vectors(kin)
    U = np.stack([kap, e], axis=-1)  # (n, 2n, 2): U_i = (k_i, ε_i)
    gamma = np.einsum("iak,ab,jbl->ijkl", U, G, U)  # Γ_ij = U_i^T G U_j
    Z = _positions(gaps)
    legs = range(1, kin.n)
    blocks = np.zeros(gaps.shape[:-1] + (kin.n - 1, kin.n - 1, 2, 2), dtype=np.result_type(gamma, gaps, alpha))
    for a, i in enumerate(legs):
        for b, j in enumerate(legs):
            if i != j:
                blocks[..., a, b, :, :] = (2 * alpha / (Z[..., j] - Z[..., i]))[..., None, None] * (OMEGA @ gamma[i, j])
    return blocks


def multilinear_determinant(blocks: np.ndarray) -> np.ndarray:
    """The multilinear coefficients of det(𝟙 + Σ_i ε_i R_i), R_i = row block i of `blocks`: shape (*nodes, 2^m)
    over the subsets of the m legs (bit a = leg a), each an exact signed sum of 2^|T| numerical determinants."""
    m = blocks.shape[-3]
    full = np.swapaxes(blocks, -3, -2).reshape(blocks.shape[:-4] + (2 * m, 2 * m))
    out = np.zeros(blocks.shape[:-4] + (1 << m,), dtype=blocks.dtype)
    eye = np.eye(2 * m)
    for T in range(1 << m):
        legs = [a for a in range(m) if T >> a & 1]
        total = 0
        for signs in itertools.product((1.0, -1.0), repeat=len(legs)):
            scale = np.zeros(2 * m)
            for a, sg in zip(legs, signs):
                scale[2 * a : 2 * a + 2] = sg
            total = total + np.prod(signs) * np.linalg.det(eye + scale[:, None] * full)
        out[..., T] = total / 2 ** len(legs)
    return out


def _product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Product in the algebra of multilinear series (ε_i² = 0): the subset convolution over the last axis."""
    out = np.zeros(np.broadcast_shapes(A.shape, B.shape), dtype=np.result_type(A, B))
    size = A.shape[-1]
    for S in range(size):
        T = S
        while True:
            out[..., S] += A[..., T] * B[..., S ^ T]
            if T == 0:
                break
            T = (T - 1) & S
    return out


def multilinear_log(D: np.ndarray) -> np.ndarray:
    """log D for a multilinear series with D[∅] = 1 (finite sum: (D - 1)^k = 0 beyond the number of legs)."""
    X = D.copy()
    X[..., 0] -= 1.0
    out, power = np.zeros_like(X), X
    for k in range(1, X.shape[-1].bit_length()):
        out = out + (-1) ** (k + 1) * power / k
        power = _product(power, X)
    return out


def determinant_integrand(kin: GluonKinematics, alpha, gaps: np.ndarray) -> np.ndarray:
    """e^{P_0} [ε_1...ε_n] exp(P - P_0) det(𝟙 + 𝕄)^{1/2} at the nodes `gaps` (shape (*nodes, n - 1)): equal,
    pointwise, to the sum of the (2n-3)!! superstring residue terms (before the Faddeev-Popov factor)."""
    n = kin.n
    bosonic = next(t for t in residue_terms(n, "super") if t.subset == (1 << n) - 1)
    P = exponent_series(kin, alpha, (bosonic,), gaps)[0]  # (*nodes, 2^n)
    half_log_det = 0.5 * multilinear_log(multilinear_determinant(cycle_blocks(kin, alpha, gaps)))
    Q = P.copy()
    Q[..., 0::2] += half_log_det  # legs 2..n are bits 1..n-1 of the n-leg subsets (leg 1 never in a cycle)
    return np.exp(P[..., 0]) * _exp_coefficient(Q, (1 << n) - 1)


__all__ = ["cycle_blocks", "determinant_integrand", "multilinear_determinant", "multilinear_log"]
