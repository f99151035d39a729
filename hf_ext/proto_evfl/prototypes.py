"""Class priors and local prototypes of Proto-EVFL: the mixed prior, the soft pseudo-label mass a party reports as
its local prior, the EMA prototype update, and the discovery of prototypes for classes that have no labels.

Priors are float64 numpy vectors (they cross the wire as arrays); prototypes are torch tensors on the party.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

PRIOR_TOLERANCE = 1e-4


def validate_prior(prior, num_classes: int | None = None, what: str = "class prior") -> np.ndarray:
    """Returns `prior` as a float64 vector after checking it is a probability vector.

    Raises:
        `ValueError` naming `what` if it is not 1-D, has the wrong length, holds NaN/inf or negative mass, or does
        not sum to 1 (within `PRIOR_TOLERANCE`).
    """
    p = np.asarray(prior, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"{what} must be a vector, got shape {p.shape}")
    if num_classes is not None and p.shape[0] != num_classes:
        raise ValueError(f"{what} has {p.shape[0]} entries for {num_classes} classes")
    if not np.isfinite(p).all():
        raise ValueError(f"{what} contains NaN or inf: {p}")
    if (p < -PRIOR_TOLERANCE).any():
        raise ValueError(f"{what} has negative mass: {p}")
    total = float(p.sum())
    if abs(total - 1.0) > PRIOR_TOLERANCE:
        raise ValueError(f"{what} sums to {total:.6f}, not 1")
    return np.clip(p, 0.0, None) / max(float(np.clip(p, 0.0, None).sum()), 1e-300)


def uniform_prior(num_classes: int) -> np.ndarray:
    return np.full(num_classes, 1.0 / num_classes)


def mixed_prior(local_prior, global_prior, mix: float) -> np.ndarray:
    """The mixed prior `π̃^k = λ π^k + (1 − λ) π^g`.

    Args:
        local_prior (`array-like` of shape `(C,)`): the party's own class-prior estimate `π^k`.
        global_prior (`array-like` of shape `(C,)`): the federation's prior `π^g`, sent by the active party.
        mix (`float`): `λ ∈ [0, 1]`; 1 trusts the party's (biased) estimate alone, 0 the global one alone.
    """
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"prior mix λ must be in [0, 1], got {mix}")
    local = validate_prior(local_prior, what="local prior")
    glob = validate_prior(global_prior, local.shape[0], what="global prior")
    return mix * local + (1.0 - mix) * glob


def global_prior(local_priors, counts) -> np.ndarray:
    """`π^g`: the count-weighted mean of the parties' local priors.

    Args:
        local_priors (`array-like` of shape `(K, C)`): one prior per party.
        counts (`array-like` of shape `(K,)`): each party's number of unaligned samples (the weights).
    """
    priors = np.asarray(local_priors, dtype=np.float64)
    weights = np.asarray(counts, dtype=np.float64)
    if priors.ndim != 2 or weights.shape != priors.shape[:1]:
        raise ValueError(f"need (K, C) priors and K counts, got {priors.shape} and {weights.shape}")
    for k, p in enumerate(priors):
        validate_prior(p, what=f"local prior of party {k}")
    if not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"party counts must be finite, non-negative and not all zero, got {weights}")
    return validate_prior(weights @ priors / weights.sum(), what="global prior")


@torch.no_grad()
def soft_label_mass(prototype_logits: torch.Tensor, iterations: int = 20) -> np.ndarray:
    """A party's local prior estimate `π^k`: its soft pseudo-label mass, made self-consistent by EM.

    Starting from the uniform prior, repeat `π ← mean_i softmax(s_i + log π)` over the party's unaligned samples
    (the EM prior re-estimation of Saerens et al., 2002). `iterations=0` gives the plain mean of
    `softmax(cos(z, p^k) / τ_p)`. Deliberately not the OT plan's class mass: the plan's column sums equal the prior
    it was given, so re-estimating the prior from it would only return that prior.

    Args:
        prototype_logits (`torch.Tensor` of shape `(n, C)`): `cos(z_i, p^k_c) / τ_p` of the unaligned samples.
        iterations (`int`, defaults to 20): EM iterations (the estimate moves little after about 10 on digits).
    """
    if prototype_logits.ndim != 2 or prototype_logits.shape[0] == 0:
        raise ValueError(f"need (n > 0, C) prototype logits, got shape {tuple(prototype_logits.shape)}")
    logits = prototype_logits.double()
    prior = logits.new_full((logits.shape[1],), 1.0 / logits.shape[1])
    mass = logits.softmax(-1).mean(0)
    for _ in range(iterations):
        prior = mass
        mass = (logits + prior.clamp_min(1e-12).log()).softmax(-1).mean(0)
    mass = mass.cpu().numpy()
    return mass / mass.sum()


def _em_mass(logits: torch.Tensor, iterations: int) -> torch.Tensor:
    prior = logits.new_full((logits.shape[1],), 1.0 / logits.shape[1])
    mass = logits.softmax(-1).mean(0)
    for _ in range(iterations):
        prior = mass
        mass = (logits + prior.clamp_min(1e-12).log()).softmax(-1).mean(0)
    return mass / mass.sum()


@torch.no_grad()
def novelty_scores(embeddings: torch.Tensor, prototypes: torch.Tensor, labelled_mask) -> torch.Tensor:
    """`max_{c labelled} cos(z_i, p_c)`: how well the best labelled class explains each sample (low: novel)."""
    mask = torch.as_tensor(np.asarray(labelled_mask, dtype=bool))
    if mask.sum() == 0:
        raise ValueError("no class has labels: there is nothing to tell novel samples from")
    z = F.normalize(embeddings.double(), dim=-1)
    return (z @ F.normalize(prototypes.double()[mask], dim=-1).T).max(1).values


def unseen_mass(unaligned_scores, reference_scores, quantile: float = 0.1) -> float:
    """The share `ν` of a party's unaligned pool that no labelled class explains (an open-set estimate).

    The threshold `t` is the `quantile`-quantile of the novelty scores of samples known to come from labelled
    classes (the party's aligned entities); a labelled-class sample then falls below `t` with probability
    `quantile`, an unseen-class sample (far from every labelled prototype) with probability about 1. The observed
    share `f = mean(s_i < t)` is thus `ν + (1 − ν)·quantile`, which gives `ν = (f − quantile) / (1 − quantile)`,
    clipped to `[0, 1]`.

    Args:
        unaligned_scores (`array-like` of shape `(n,)`): [`novelty_scores`] of the unaligned samples.
        reference_scores (`array-like` of shape `(m,)`): the same scores of labelled-class samples.
        quantile (`float`, defaults to 0.1): the reference quantile `q ∈ (0, 1)`.
    """
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"novelty quantile must be in (0, 1), got {quantile}")
    u = np.asarray(unaligned_scores, dtype=np.float64)
    r = np.asarray(reference_scores, dtype=np.float64)
    if u.ndim != 1 or r.ndim != 1 or u.size == 0 or r.size == 0:
        raise ValueError(f"need non-empty score vectors, got shapes {u.shape} and {r.shape}")
    threshold = np.quantile(r, quantile)
    below = float((u < threshold).mean())
    return float(np.clip((below - quantile) / (1.0 - quantile), 0.0, 1.0))


@torch.no_grad()
def local_class_prior(
    prototype_logits: torch.Tensor,
    labelled_mask,
    unseen_share: float,
    *,
    iterations: int = 20,
) -> np.ndarray:
    """A party's local prior `π^k` when some classes have no labels: `1 − ν` spread over the labelled classes by
    the EM mass of their logits ([`soft_label_mass`] restricted to them), `ν` over the unlabelled ones (by the EM
    mass of their logits when there are several).

    Why not EM over every class: an unlabelled class starts with a random prototype that explains no sample, so its
    EM mass is ~0, which the mixed prior then keeps at ~0 and the OT never sends it a sample (the collapse this
    replaces). `ν` comes from [`unseen_mass`], which does not need the unseen prototype.

    Args:
        prototype_logits (`torch.Tensor` of shape `(n, C)`): `cos(z_i, p^k_c) / τ_p` of the unaligned samples.
        labelled_mask (`array-like` of shape `(C,)`): `True` for classes with labelled aligned samples.
        unseen_share (`float`): `ν ∈ [0, 1]`, the mass of the unlabelled classes together.
        iterations (`int`, defaults to 20): EM iterations.
    """
    mask = np.asarray(labelled_mask, dtype=bool)
    if prototype_logits.ndim != 2 or prototype_logits.shape[0] == 0 or prototype_logits.shape[1] != mask.shape[0]:
        raise ValueError(f"need (n > 0, {mask.shape[0]}) prototype logits, got shape {tuple(prototype_logits.shape)}")
    if not 0.0 <= unseen_share <= 1.0:
        raise ValueError(f"unseen_share ν must be in [0, 1], got {unseen_share}")
    if mask.all():
        return soft_label_mass(prototype_logits, iterations)
    if not mask.any():
        raise ValueError("no class has labels: the local prior needs at least one labelled class")
    logits = prototype_logits.double()
    seen, unseen = torch.from_numpy(np.flatnonzero(mask)), torch.from_numpy(np.flatnonzero(~mask))
    prior = np.zeros(mask.shape[0])
    prior[mask] = (1.0 - unseen_share) * _em_mass(logits[:, seen], iterations).cpu().numpy()
    prior[~mask] = unseen_share * _em_mass(logits[:, unseen], iterations).cpu().numpy()
    return prior / prior.sum()


def prototype_contrastive_loss(prototype_logits: torch.Tensor, soft_labels: torch.Tensor) -> torch.Tensor:
    """The lower-level loss `ℓ_u = −(1/n) Σ_i Σ_c q_ic log softmax_c(s_i)` on the selected unaligned samples
    (`s_i = cos(z_i, p^k_c) / τ_p`, `q_i` their OT soft labels). Minimising it pulls each sample towards the
    prototypes the OT assigned it to."""
    if prototype_logits.shape != soft_labels.shape or prototype_logits.ndim != 2:
        raise ValueError(f"logits and soft labels must be (n, C) of one shape, got {tuple(prototype_logits.shape)} "
                         f"and {tuple(soft_labels.shape)}")  # fmt: skip
    return -(soft_labels * prototype_logits.log_softmax(-1)).sum(1).mean()


@torch.no_grad()
def ema_update_prototypes(
    prototypes: torch.Tensor, embeddings: torch.Tensor, assignments: torch.Tensor, momentum: float
) -> torch.Tensor:
    """`p_c ← normalize(m p_c + (1 − m) mean_{i: ĉ_i = c} z_i)` for every class with assigned samples, in place.

    Args:
        prototypes (`torch.Tensor` of shape `(C, d)`): updated in place (a parameter's `.data` is fine).
        embeddings (`torch.Tensor` of shape `(n, d)`): the selected samples' embeddings.
        assignments (`torch.LongTensor` of shape `(n,)`): their classes `ĉ_i`.
        momentum (`float`): `m ∈ [0, 1)`.

    Returns:
        `torch.LongTensor`: the classes that moved.
    """
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"prototype momentum must be in [0, 1), got {momentum}")
    classes = assignments.unique()
    for c in classes.tolist():
        mean = F.normalize(embeddings[assignments == c].mean(0), dim=-1)
        current = F.normalize(prototypes[c], dim=-1)
        prototypes[c] = F.normalize(momentum * current + (1.0 - momentum) * mean, dim=-1)
    return classes


@torch.no_grad()
def discover_unseen_prototypes(
    embeddings: torch.Tensor,
    prototypes: torch.Tensor,
    labelled_mask,
    novel_fraction: float,
    *,
    iterations: int = 10,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Initial local prototypes for the classes without labels, from the party's own unaligned samples.

    The samples least similar to every labelled class's prototype (the lowest `novel_fraction` by
    `max_{c labelled} cos(z, p_c)`) are clustered by spherical k-means into as many clusters as there are unseen
    classes; the normalised centroids are returned in class order. The OT selection then refines them. (The spec
    leaves the initialisation open; from random prototypes the OT would have to find the unseen cluster by chance.)

    Args:
        embeddings (`torch.Tensor` of shape `(n, d)`): normalised embeddings of the party's unaligned samples.
        prototypes (`torch.Tensor` of shape `(C, d)`): the current local prototypes.
        labelled_mask (`array-like` of shape `(C,)`): `True` for classes that have labelled aligned samples.
        novel_fraction (`float`): share of samples treated as candidates, e.g. the prior mass of unseen classes.
        iterations (`int`, defaults to 10): k-means iterations.
        generator (`torch.Generator`, *optional*): for the k-means++ seeding.

    Returns:
        `torch.Tensor` of shape `(num_unseen, d)`: the new prototypes of `np.flatnonzero(~labelled_mask)`.
    """
    mask = torch.as_tensor(np.asarray(labelled_mask, dtype=bool))
    unseen = int((~mask).sum())
    if unseen == 0:
        return prototypes.new_zeros(0, prototypes.shape[1])
    if mask.sum() == 0:
        raise ValueError("no class has labels: there is nothing to tell novel samples from")
    z = F.normalize(embeddings, dim=-1)
    similarity = z @ F.normalize(prototypes[mask], dim=-1).T
    novelty_order = similarity.max(1).values.argsort()
    take = min(z.shape[0], max(unseen, math.ceil(novel_fraction * z.shape[0])))
    candidates = z[novelty_order[:take]]
    # k-means++ seeding on cosine distance, then spherical k-means.
    centroids = candidates[:1].clone()
    while centroids.shape[0] < unseen:
        dist = (1 - candidates @ centroids.T).min(1).values.clamp_min(0)
        probs = dist / dist.sum() if dist.sum() > 0 else torch.full_like(dist, 1 / dist.numel())
        centroids = torch.cat([centroids, candidates[torch.multinomial(probs, 1, generator=generator)]])
    for _ in range(iterations):
        assign = (candidates @ centroids.T).argmax(1)
        for j in range(unseen):
            if (assign == j).any():
                centroids[j] = F.normalize(candidates[assign == j].mean(0), dim=-1)
    return centroids


__all__ = [
    "discover_unseen_prototypes",
    "ema_update_prototypes",
    "local_class_prior",
    "novelty_scores",
    "prototype_contrastive_loss",
    "unseen_mass",
    "global_prior",
    "mixed_prior",
    "soft_label_mass",
    "uniform_prior",
    "validate_prior",
]
