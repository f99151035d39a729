"""Conditional optimal-transport selection of unaligned samples (Proto-EVFL's probabilistic dual-prototype step),
and the confidence-threshold selection used by the baselines and the ablation.

For a batch of `n` unaligned embeddings and the party's prototypes, the cost is `C_ic = 1 − cos(z_i, p_c)` and the
plan solves `min_{Q ∈ Π(𝟙/n, π̃)} ⟨Q, C⟩ − ε H(Q)` with POT's Sinkhorn, where `π̃` is the mixed prior. The soft
pseudo-labels are `q_i = n Q_i`, and sample `i` is kept with probability `ρ_i = max_c q_ic` (or when `ρ_i ≥ τ`).
Everything here runs on the party; the plan never leaves it.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .prototypes import validate_prior

logger = logging.getLogger(__name__)

SELECTION_MODES = ("bernoulli", "threshold")


@dataclass
class TransportPlan:
    """A Sinkhorn plan and how it was obtained.

    Args:
        plan (`np.ndarray` of shape `(n, C)`): the coupling `Q`; rows sum to `1/n`.
        marginal_error (`float`): L1 distance of the column sums to the prior.
        method (`str`): `"sinkhorn"`, `"sinkhorn_log"` (retried in the log domain) or `"prior_softmax"` (last
            resort: `Q_ic ∝ π̃_c exp(−C_ic / ε)` per row, column sums not enforced).
        converged (`bool`): whether the column sums are within the tolerance.
    """

    plan: np.ndarray
    marginal_error: float
    method: str
    converged: bool

    @property
    def soft_labels(self) -> np.ndarray:
        """`q_i = n Q_i`, renormalised per row (each row is a distribution over classes)."""
        q = self.plan / np.clip(self.plan.sum(1, keepdims=True), 1e-300, None)
        return q

    def sample_costs(self, cost: np.ndarray) -> np.ndarray:
        """Per-sample OT cost `⟨q_i, C_i⟩` (low cost: confident)."""
        return (self.soft_labels * cost).sum(1)


def _pot_sinkhorn(a, b, cost, epsilon, max_iter, method) -> np.ndarray:
    import ot  # POT is imported lazily: only a party running the lower level needs it

    with warnings.catch_warnings():
        # POT warns on non-convergence and on numerical errors; both are judged below from the marginals.
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return np.asarray(ot.sinkhorn(a, b, cost, epsilon, method=method, numItermax=max_iter, stopThr=1e-9))


def _column_error(plan: np.ndarray, prior: np.ndarray) -> float:
    if not np.isfinite(plan).all():
        return float("inf")
    return float(np.abs(plan.sum(0) - prior).sum())


def sinkhorn_plan(
    cost,
    prior,
    *,
    epsilon: float = 0.05,
    max_iter: int = 50,
    tolerance: float = 5e-2,
) -> TransportPlan:
    """Entropic OT between the uniform distribution over `n` samples and the class prior `prior`.

    Falls back, with a logged warning, when Sinkhorn does not converge: first to POT's log-domain Sinkhorn with ten
    times the iterations, then to the last plan if it is finite, then to the prior-weighted softmax. The result is
    always finite, with rows summing to `1/n`.

    Args:
        cost (`array-like` of shape `(n, C)`): `C_ic = 1 − cos(z_i, p_c)`.
        prior (`array-like` of shape `(C,)`): the column marginal (the mixed prior); must sum to 1.
        epsilon (`float`, defaults to 0.05): entropic regularisation `ε`.
        max_iter (`int`, defaults to 50): Sinkhorn iterations.
        tolerance (`float`, defaults to 5e-2): accepted L1 error of the column sums.
    """
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2 or cost.shape[0] == 0:
        raise ValueError(f"cost must be a non-empty (n, C) matrix, got shape {cost.shape}")
    if not np.isfinite(cost).all():
        raise ValueError("cost contains NaN or inf (are the embeddings finite?)")
    b = validate_prior(prior, cost.shape[1], what="OT class prior")
    if not epsilon > 0 or max_iter < 1:
        raise ValueError(f"need epsilon > 0 and max_iter >= 1, got {epsilon} and {max_iter}")
    n = cost.shape[0]
    a = np.full(n, 1.0 / n)
    plan = _pot_sinkhorn(a, b, cost, epsilon, max_iter, "sinkhorn")
    error = _column_error(plan, b)
    if error <= tolerance:
        return TransportPlan(plan, error, "sinkhorn", True)
    first_error = error
    plan = _pot_sinkhorn(a, b, cost, epsilon, 10 * max_iter, "sinkhorn_log")
    error = _column_error(plan, b)
    if error <= tolerance:
        logger.warning(
            "Sinkhorn (ε=%g, %d iterations) did not converge (column marginal error %.3g); the log-domain retry did",
            epsilon, max_iter, first_error,
        )  # fmt: skip
        return TransportPlan(plan, error, "sinkhorn_log", True)
    if np.isfinite(plan).all() and np.allclose(plan.sum(1), a, rtol=1e-6, atol=1e-12):
        logger.warning(
            "Sinkhorn (ε=%g) did not converge, not even in the log domain (column marginal error %.3g > %.3g): "
            "using the unconverged log-domain plan (its rows are exact)",
            epsilon, error, tolerance,
        )  # fmt: skip
        return TransportPlan(plan, error, "sinkhorn_log", False)
    logits = np.log(np.clip(b, 1e-300, None)) - cost / epsilon
    logits -= logits.max(1, keepdims=True)
    rows = np.exp(logits)
    plan = rows / rows.sum(1, keepdims=True) / n
    error = _column_error(plan, b)
    logger.warning(
        "Sinkhorn (ε=%g) failed (non-finite plan); falling back to the prior-weighted softmax assignment "
        "(column marginal error %.3g)",
        epsilon, error,
    )  # fmt: skip
    return TransportPlan(plan, error, "prior_softmax", False)


def cosine_cost(embeddings: torch.Tensor, prototypes: torch.Tensor) -> np.ndarray:
    """`C_ic = 1 − cos(z_i, p_c)` as float64 numpy (detached)."""
    z = torch.nn.functional.normalize(embeddings.detach().double(), dim=-1)
    p = torch.nn.functional.normalize(prototypes.detach().double(), dim=-1)
    return (1.0 - z @ p.T).cpu().numpy()


def select_by_ot(
    soft_labels: np.ndarray, *, mode: str = "bernoulli", threshold: float = 0.5, generator: np.random.Generator
) -> np.ndarray:
    """Probabilistic selection: keep sample `i` with probability `ρ_i = max_c q_ic` (`"bernoulli"`) or when
    `ρ_i ≥ threshold` (`"threshold"`). Returns a boolean mask."""
    if mode not in SELECTION_MODES:
        raise ValueError(f"selection mode must be one of {SELECTION_MODES}, got {mode!r}")
    rho = soft_labels.max(1)
    if mode == "bernoulli":
        return generator.random(rho.shape[0]) < rho
    return rho >= threshold


def select_by_confidence(probabilities: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Confidence-threshold pseudo-labelling: keep samples whose top class probability is `≥ threshold`.

    Returns `(mask, one-hot targets)`.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"confidence threshold must be in (0, 1], got {threshold}")
    mask = probabilities.max(1) >= threshold
    targets = np.eye(probabilities.shape[1])[probabilities.argmax(1)]
    return mask, targets


__all__ = [
    "SELECTION_MODES",
    "TransportPlan",
    "cosine_cost",
    "select_by_confidence",
    "select_by_ot",
    "sinkhorn_plan",
]
