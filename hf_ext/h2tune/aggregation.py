"""Server-side aggregation for H2Tune and the compared methods (numpy / torch only; the Flower strategy that calls it
is [`~hf_ext.h2tune.strategy.H2TuneStrategy`], and the in-process loop of `reproduce` calls it directly).

**Per-slot averaging.** G has one R × R slot per module type (q, k, v, o, gate, up, down: `model.MODULE_SLOTS`).
A client whose base lacks a module type (GPT-2 has no k, v or gate projection) has nothing to say about that slot
and uploads exactly 0 there; averaging those zeros in would shrink the other clients' k/v/gate matrices by 1/N every
round. So each slot is averaged only over the clients that have it: a client "has" a slot when its upload is not
identically zero there (an all-zero slot is an abstention; it can only lower that client's own influence). A slot
no client has keeps the server's previous value.

Every update is checked first ([`update_problem`]: float, shape, finite, |x| < 1e6); an invalid one is left out and
reported, and with none valid the global tensor is kept unchanged. The Flower strategy also checks who sent what,
replays and outliers (see [`hf_ext.core.federated.strategy`]).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import torch

logger = logging.getLogger(__name__)
MAX_ABS = 1e6  # |G_c| entries live around 1e-2..1e1; anything this large is an attack or a divergence


def update_problem(update, expected_shape: tuple[int, ...], max_abs: float | None = MAX_ABS) -> str | None:
    """Why `update` cannot be averaged (dtype, shape, NaN/Inf, |x| ≥ `max_abs`), or `None` when it is fine."""
    arr = np.asarray(update.detach().cpu() if isinstance(update, torch.Tensor) else update)
    if not np.issubdtype(arr.dtype, np.floating):
        return f"dtype {arr.dtype} is not floating point"
    if tuple(arr.shape) != tuple(expected_shape):
        return f"shape {tuple(arr.shape)} != expected {tuple(expected_shape)}"
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        return f"{bad} non-finite value(s) (NaN/Inf)"
    if max_abs is not None and arr.size and not float(np.abs(arr).max()) < max_abs:
        return f"|value| up to {float(np.abs(arr).max()):.3g}, the bound is < {max_abs:.3g}"
    return None


def slot_presence(update: np.ndarray) -> np.ndarray:
    """Which slots of a (L_max, M, R, R) update carry anything: a bool vector of length M (all-zero = absent)."""
    arr = np.asarray(update)
    return np.abs(arr).reshape(arr.shape[0], arr.shape[1], -1).max(axis=(0, 2)) > 0


def aggregate_mean(
    updates: Mapping[str, object], expected_shape: tuple[int, ...], current: torch.Tensor | None = None
) -> tuple[torch.Tensor | None, dict[str, str]]:
    """G[:, m] ← (1/|C_m|)·Σ_{c ∈ C_m} G_c[:, m] over the valid updates, C_m the clients that have slot m: an
    *unweighted* mean, as in the paper, taken per slot (see the module docstring).

    Args:
        updates (`Mapping[str, array]`): client id → G_c.
        expected_shape (`tuple`): (L_max, M, R, R).
        current (`torch.Tensor`, *optional*): returned unchanged when no update is valid; its slots that no client
            has are kept.

    Returns:
        `(G, rejected)`: the new global tensor, and client id → reason for each rejected update.
    """
    from .validation import check_shape

    expected_shape = check_shape("expected_shape", expected_shape)
    valid, rejected = [], {}
    for cid, upd in updates.items():
        reason = update_problem(upd, expected_shape)
        if reason is not None:
            logger.warning("h2tune: rejected update from client %s: %s", cid, reason)
            rejected[cid] = reason
            continue
        valid.append(np.asarray(upd.detach().cpu() if isinstance(upd, torch.Tensor) else upd, dtype=np.float32))
    if not valid:
        logger.warning("h2tune: no valid update this round; keeping the global tensor")
        return current, rejected
    stacked = torch.from_numpy(np.stack(valid))  # (N, L_max, M, R, R)
    if len(expected_shape) < 2:  # no slot axis: a plain mean
        return stacked.mean(0), rejected
    have = torch.from_numpy(np.stack([slot_presence(v) for v in valid]))  # (N, M): who has which slot
    trailing = (1,) * (len(expected_shape) - 2)
    mask = have.view(len(valid), 1, -1, *trailing).to(stacked.dtype)
    count = have.sum(0).view(1, -1, *trailing)  # clients per slot
    mean = (stacked * mask).sum(0) / count.clamp(min=1).to(stacked.dtype)
    if bool((count == 0).any()):  # a slot no client has: keep the server's previous value
        keep = torch.zeros_like(mean) if current is None else torch.as_tensor(current, dtype=mean.dtype)
        mean = torch.where(count == 0, keep, mean)
    return mean, rejected


def server_update(
    mode: str,
    payloads: Mapping[str, Mapping[str, np.ndarray]],
    global_shape: tuple[int, ...],
    current: Mapping[str, np.ndarray] | None = None,
    groups: Mapping[str, str] | None = None,
) -> tuple[dict[str, np.ndarray] | None, dict[str, str]]:
    """The server's step for every compared method, on what the clients sent (client id → named arrays).

    - `"h2tune"`: G ← unweighted per-slot mean of the valid G_c (key `"g"`, [`aggregate_mean`]); with none valid,
      `current` is kept.
    - `"hetlora"`: rank-pad → mean per LoRA factor within a feature space ([`~hf_ext.h2tune.baselines.hetlora_mean`]).
    - `"flora"`: the stacked factors per module shape ([`~hf_ext.h2tune.baselines.flora_stack`]).
    - `"local"`: nothing is exchanged.

    `groups` (client id → base group, from the server's own run config) keeps HetLoRA / FLoRA within one base.

    Returns `(message, rejected)`: the arrays sent back to every client (`None`: nothing), client id → reason.
    """
    from .baselines import flora_stack, hetlora_mean

    if mode == "local":
        return None, {}
    if mode in ("hetlora", "flora"):
        mean, rejected = (hetlora_mean if mode == "hetlora" else flora_stack)(payloads, groups=groups)
        if mode == "flora" and not mean:
            return None, rejected  # FLoRA's ΔW was merged already: never resend an old one
        return (mean or (dict(current) if current else None)), rejected
    if mode != "h2tune":
        raise ValueError(f"unknown aggregation mode {mode!r}")
    prev = torch.from_numpy(np.asarray(current["g"])) if current and "g" in current else None
    updates = {cid: p["g"] if "g" in p else np.zeros(0, dtype=np.float32) for cid, p in payloads.items()}
    glob, rejected = aggregate_mean(updates, global_shape, current=prev)
    return (None if glob is None else {"g": glob.numpy().astype(np.float32)}), rejected
