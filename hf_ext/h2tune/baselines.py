"""Baselines for heterogeneous clients with plain LoRA: HetLoRA (rank-heterogeneous averaging) and FLoRA (stacking).

**HetLoRA** zero-pads every client's LoRA factors to the largest rank, averages them and truncates back to each
client's rank. That is defined only between clients whose factors live in the same feature space (the same base
decoder): A (r×d_in) is averaged with the A's of the same `d_in`, B (d_out×r) with the B's of the same `d_out`, per
(layer index, module slot); only the rank dimension is padded. A client whose base nobody else has gets its own
factors back (local-only for it). (An earlier version also zero-padded across hidden sizes, averaging unrelated
coordinates of different models: a strawman, removed. Grouping by feature size alone was not enough either: a
GPT-2 MLP and a Llama MLP of the same width share `d_out`, so the server groups by *base* as well, from its own run
config: `groups`, client id → base group, never a claim in the payload.) The server's reply keys carry the base group
and the feature size: `"<group>/A:<layer>:<slot>:<d_in>"`, `"<group>/B:<layer>:<slot>:<d_out>"` (no `<group>/`
without `groups`).

**FLoRA** (stacking): the server stacks the clients' scaled factors of the same module shape (and base group), so
the global update of a module is ΔW = (1/N)·Σ_c (α/r_c)·B_c·A_c exactly, whatever the ranks (no padding, no
cross-rank interference); each client adds ΔW of its own shape into its base weights and restarts its LoRA (A
re-drawn, B = 0) for the next round.

The round is split the way a federation runs it: [`hetlora_payload`] on each client (what it sends; FLoRA sends the
same factors with the scale folded into B), [`hetlora_mean`] / [`flora_stack`] on the server, [`load_hetlora`] /
[`apply_flora`] on each client; [`hetlora_round`] chains HetLoRA in-process.
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


def hetlora_payload(model, adapter: str = "default", scaled: bool = False) -> dict[str, np.ndarray]:
    """What a HetLoRA (or, with `scaled=True`, a FLoRA) client sends: `"A:<layer>:<slot>"` and `"B:<layer>:<slot>"`
    → float32 factor; `scaled` folds the LoRA scale α/r into B (so B·A is the module's ΔW)."""
    scaling = {}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and adapter in getattr(module, "lora_A", {}):
            scaling[module_slot(name)] = float(module.scaling[adapter])
    out = {}
    for (layer, slot), (a, b) in lora_factors(model, adapter).items():
        out[f"A:{layer}:{slot}"] = a.detach().float().cpu().numpy()
        out[f"B:{layer}:{slot}"] = (b.detach().float().cpu() * (scaling[(layer, slot)] if scaled else 1.0)).numpy()
    return out


def _feature_dim(key: str, arr: np.ndarray) -> int:
    """The non-rank dimension of a factor: d_in of A (r × d_in), d_out of B (d_out × r)."""
    return int(arr.shape[1] if key.startswith("A:") else arr.shape[0])


def payload_problem(
    payload: Mapping[str, np.ndarray],
    *,
    max_layers: int | None = None,
    num_slots: int | None = None,
    max_dim: int | None = None,
    max_abs: float | None = 1e6,
) -> str | None:
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


def _group_prefix(groups: Mapping[str, str] | None, cid: str) -> str:
    """`"<base group>/"` of client `cid` (empty without `groups`)."""
    if groups is None:
        return ""
    if cid not in groups:
        raise KeyError(f"client {cid!r} has no base group (known: {sorted(groups)})")
    return f"{groups[cid]}/"


def hetlora_mean(
    payloads: Mapping[str, Mapping[str, np.ndarray]], groups: Mapping[str, str] | None = None, **bounds
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Server side: per base group, key and feature size (see the module docstring), zero-pad every client's factor
    to the largest rank and average over the clients that sent it. Invalid payloads are rejected (logged) and never
    averaged in.

    Args:
        payloads (`Mapping`): client id → its [`hetlora_payload`].
        groups (`Mapping[str, str]`, *optional*): client id → base group (clients on one base decoder share one);
            the server's own knowledge. Without it, clients are grouped by feature size only.
        bounds: go to [`payload_problem`] (`max_layers`, `num_slots`, `max_dim`, `max_abs`).

    Returns `(mean, rejected)`: `"[<group>/]<key>:<feature size>"` → rank-padded mean, and client id → reason.
    """
    valid, rejected = _valid_payloads(payloads, bounds, "hetlora")
    by_key: dict[str, list[np.ndarray]] = defaultdict(list)
    for cid, payload in valid.items():
        prefix = _group_prefix(groups, cid)
        for key, arr in payload.items():
            by_key[f"{prefix}{key}:{_feature_dim(key, arr)}"].append(np.asarray(arr, dtype=np.float32))
    mean = {}
    for key, arrs in by_key.items():
        # pad the rank dimension only (A: rows, B: columns); the feature dimension is the group's own
        rows, cols = max(a.shape[0] for a in arrs), max(a.shape[1] for a in arrs)
        acc = np.zeros((rows, cols), dtype=np.float32)
        for a in arrs:
            acc[: a.shape[0], : a.shape[1]] += a / len(arrs)
        mean[key] = acc
    return mean, rejected


def _valid_payloads(payloads, bounds, method: str) -> tuple[dict, dict[str, str]]:
    """The payloads [`payload_problem`] accepts, and client id → reason for the others (logged)."""
    valid, rejected = {}, {}
    for cid, payload in payloads.items():
        reason = payload_problem(payload, **bounds)
        if reason is not None:
            logger.warning("%s: rejected update from client %s: %s", method, cid, reason)
            rejected[cid] = reason
        else:
            valid[cid] = payload
    return valid, rejected


def flora_stack(
    payloads: Mapping[str, Mapping[str, np.ndarray]], groups: Mapping[str, str] | None = None, **bounds
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """FLoRA's server: per module of one shape (within one base group, as in [`hetlora_mean`]), the stacked factors
    `A_stack` (Σ r_c × d_in) and `B_stack` (d_out × Σ r_c) / N, so that B_stack·A_stack = (1/N)·Σ_c B_c·A_c (B
    already scaled by α/r_c). Keys `"A:[<group>/]<layer>:<slot>:<d_in>x<d_out>"` and `"B:..."`."""
    valid, rejected = _valid_payloads(payloads, bounds, "flora")
    stacks: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for cid, payload in valid.items():
        prefix = _group_prefix(groups, cid)
        for key in payload:
            if key.startswith("A:") and "B:" + key[2:] in payload:
                a, b = payload[key], payload["B:" + key[2:]]
                group = f"{prefix}{key[2:]}:{a.shape[1]}x{b.shape[0]}"
                stacks[group][0].append(np.asarray(a, np.float32))
                stacks[group][1].append(np.asarray(b, np.float32))
    out = {}
    for group, (a_list, b_list) in stacks.items():
        out[f"A:{group}"] = np.concatenate(a_list, axis=0)
        out[f"B:{group}"] = np.concatenate(b_list, axis=1) / len(b_list)
    return out, rejected


@torch.no_grad()
def apply_flora(
    model, stacked: Mapping[str, np.ndarray], adapter: str = "default", seed: int = 0, group: str = ""
) -> dict[str, np.ndarray]:
    """FLoRA's client step: add the global ΔW = B_stack·A_stack of each of its modules (those of its base `group`)
    into the base weight ([`merge_flora`]), then restart the LoRA factors (A re-drawn as PEFT initialises it, B = 0),
    so the next round trains a fresh adapter on the updated base. Returns the entries of `stacked` it merged."""
    import math

    merged = {}
    for key, a, b in merge_flora(model, stacked, adapter, group):
        gen = torch.Generator().manual_seed(seed)
        bound = 1.0 / math.sqrt(a.shape[1])  # kaiming_uniform(a=√5) on A, as PEFT's default LoRA init
        a.copy_(torch.empty(a.shape).uniform_(-bound, bound, generator=gen).to(a.dtype))
        b.zero_()
        merged.update({f"A:{key}": stacked[f"A:{key}"], f"B:{key}": stacked[f"B:{key}"]})
    return merged


@torch.no_grad()
def merge_flora(model, stacked: Mapping[str, np.ndarray], adapter: str = "default", group: str = "") -> list:
    """Adds the global ΔW = B_stack·A_stack of each of the model's LoRA modules (those of its base `group`) into the
    module's base weight; returns `(key, A, B)` of the modules it changed (`key` without its `A:` / `B:`). A client
    rebuilt from its base (a Flower ClientApp, every round) replays the earlier rounds' merges with this, in order."""
    group_prefix = f"{group}/" if group else ""
    changed = []
    for name, module in model.named_modules():
        if not (hasattr(module, "lora_A") and adapter in getattr(module, "lora_A", {})):
            continue
        layer, slot = module_slot(name)
        a, b = module.lora_A[adapter].weight, module.lora_B[adapter].weight
        key = f"{group_prefix}{layer}:{slot}:{a.shape[1]}x{b.shape[0]}"
        if f"A:{key}" not in stacked:
            continue
        delta = torch.from_numpy(np.asarray(stacked[f"B:{key}"]) @ np.asarray(stacked[f"A:{key}"]))
        weight = module.get_base_layer().weight
        weight += (delta.T if module.fan_in_fan_out else delta).to(weight.dtype)
        changed.append((key, a, b))
    return changed


@torch.no_grad()
def load_hetlora(model, mean: Mapping[str, np.ndarray], adapter: str = "default", group: str = "") -> None:
    """Client side: truncate the server's rank-padded means of its own base `group` and feature sizes to its rank
    and load them."""
    prefix = f"{group}/" if group else ""
    for (layer, slot), (a, b) in lora_factors(model, adapter).items():
        for name, factor in (("A", a), ("B", b)):
            key = f"{prefix}{name}:{layer}:{slot}:{_feature_dim(name + ':', factor)}"
            if key in mean:
                arr = np.asarray(mean[key])
                if arr.shape[0] < factor.shape[0] or arr.shape[1] < factor.shape[1]:
                    raise ValueError(
                        f"HetLoRA mean {key} has shape {arr.shape}, smaller than the client's {tuple(factor.shape)}"
                    )
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
