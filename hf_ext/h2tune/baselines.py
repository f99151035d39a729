"""HetLoRA-style baseline aggregation for heterogeneous clients with plain LoRA.

HetLoRA zero-pads every client's LoRA factors to the largest rank, averages them and truncates back to each client's
rank. Our clients also differ in width, which HetLoRA does not handle; as a stated extension [INF] the factors are
zero-padded in the feature dimension too (A: r×d_in → R×d_max, B: d_out×r → d_max×R), averaged per (layer index,
module slot) over the clients that have that module, and cut back to each client's shape. Its payload therefore grows
with the hidden size, unlike H2Tune's.

The round is split the way a federation runs it: [`hetlora_payload`] on each client (what it sends),
[`hetlora_mean`] on the server, [`load_hetlora`] on each client; [`hetlora_round`] chains them in-process.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .model import module_slot

logger = logging.getLogger(__name__)


def lora_factors(model, adapter: str = "default") -> dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]]:
    """(layer, slot) → (A, B) of a plain-LoRA PEFT model."""
    out = {}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and adapter in getattr(module, "lora_A", {}):
            out[module_slot(name)] = (module.lora_A[adapter].weight, module.lora_B[adapter].weight)
    return out


def hetlora_payload(model, adapter: str = "default") -> dict[str, np.ndarray]:
    """What a HetLoRA client sends: `"A:<layer>:<slot>"` and `"B:<layer>:<slot>"` → float32 factor."""
    out = {}
    for (layer, slot), (a, b) in lora_factors(model, adapter).items():
        out[f"A:{layer}:{slot}"] = a.detach().float().cpu().numpy()
        out[f"B:{layer}:{slot}"] = b.detach().float().cpu().numpy()
    return out


def payload_problem(payload: Mapping[str, np.ndarray], *, max_layers: int | None = None, num_slots: int | None = None,
                    max_dim: int | None = None, max_abs: float | None = 1e6) -> str | None:
    """Why a HetLoRA payload cannot be averaged, or `None`.

    Checked: keys `A|B:<layer>:<slot>` (with `layer < max_layers`, `slot < num_slots` when given), 2-D float32
    matrices no larger than `max_dim` in either dimension (the server's bound: every other client's mean is padded to
    the largest shape, so one oversized factor would inflate everyone's), finite, every |value| below `max_abs`.
    """
    if not payload:
        return "empty payload"
    for key, arr in payload.items():
        parts = key.split(":")
        if len(parts) != 3 or parts[0] not in ("A", "B") or not (parts[1].isdigit() and parts[2].isdigit()):
            return f"malformed key {key!r} (expected 'A|B:<layer>:<slot>')"
        if max_layers is not None and int(parts[1]) >= max_layers:
            return f"{key}: layer {parts[1]} outside [0, {max_layers})"
        if num_slots is not None and int(parts[2]) >= num_slots:
            return f"{key}: module slot {parts[2]} outside [0, {num_slots})"
        arr = np.asarray(arr)
        if arr.ndim != 2 or arr.dtype != np.float32:
            return f"{key}: expected a 2-D float32 matrix, got shape {arr.shape} dtype {arr.dtype}"
        if max_dim is not None and max(arr.shape) > max_dim:
            return f"{key}: shape {arr.shape} exceeds the server's bound of {max_dim} per dimension"
        if not np.isfinite(arr).all():
            return f"{key}: {int((~np.isfinite(arr)).sum())} non-finite value(s) (NaN/Inf)"
        if max_abs is not None and arr.size and not float(np.abs(arr).max()) < max_abs:
            return f"{key}: |value| up to {float(np.abs(arr).max()):.3g}, the bound is < {max_abs:.3g}"
    return None


def hetlora_mean(payloads: Mapping[str, Mapping[str, np.ndarray]], **bounds) -> tuple[dict[str, np.ndarray],
                                                                                     dict[str, str]]:
    """Server side: per key, zero-pad every client's factor to the largest shape and average over the clients that
    sent that key. Invalid payloads are rejected (logged) and never averaged in.

    `bounds` go to [`payload_problem`] (`max_layers`, `num_slots`, `max_dim`, `max_abs`).

    Returns `(mean, rejected)`: key → padded mean, and client id → reason.
    """
    groups: dict[str, list[np.ndarray]] = defaultdict(list)
    rejected = {}
    for cid, payload in payloads.items():
        reason = payload_problem(payload, **bounds)
        if reason is not None:
            logger.warning("hetlora: rejected update from client %s: %s", cid, reason)
            rejected[cid] = reason
            continue
        for key, arr in payload.items():
            groups[key].append(np.asarray(arr, dtype=np.float32))
    mean = {}
    for key, arrs in groups.items():
        rows, cols = max(a.shape[0] for a in arrs), max(a.shape[1] for a in arrs)
        acc = np.zeros((rows, cols), dtype=np.float32)
        for a in arrs:
            acc[: a.shape[0], : a.shape[1]] += a / len(arrs)
        mean[key] = acc
    return mean, rejected


@torch.no_grad()
def load_hetlora(model, mean: Mapping[str, np.ndarray], adapter: str = "default") -> None:
    """Client side: truncate the server's padded means to this client's factor shapes and load them."""
    for (layer, slot), (a, b) in lora_factors(model, adapter).items():
        for name, factor in (("A", a), ("B", b)):
            key = f"{name}:{layer}:{slot}"
            if key in mean:
                arr = np.asarray(mean[key])
                if arr.shape[0] < factor.shape[0] or arr.shape[1] < factor.shape[1]:
                    raise ValueError(f"HetLoRA mean {key} has shape {arr.shape}, smaller than the client's "
                                     f"{tuple(factor.shape)}")
                factor.copy_(torch.from_numpy(arr[: factor.shape[0], : factor.shape[1]].copy()).to(factor.dtype))


def payload_bytes(payload: Mapping[str, np.ndarray]) -> int:
    return int(sum(np.asarray(a).nbytes for a in payload.values()))


def hetlora_round(models: Sequence, adapter: str = "default") -> int:
    """One in-process HetLoRA round over `models` (pad → mean → truncate, in place). Returns the bytes the clients
    send (float32), summed over clients."""
    payloads = {str(i): hetlora_payload(m, adapter) for i, m in enumerate(models)}
    mean, _ = hetlora_mean(payloads)
    for m in models:
        load_hetlora(m, mean, adapter)
    return sum(payload_bytes(p) for p in payloads.values())
