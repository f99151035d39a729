"""A server trusts the transport, not the payload (part of [`hf_ext.core.federated`]).

What a `ClientApp` *says* about itself (a `partition-id`, an adapter size, the shapes of its arrays) is a claim; what
the transport says (the node id the SuperLink stamped on the reply, which it checks against the node the instruction
went to) is a fact. The helpers here check a reply against the **server's own reference** — never against another
client's reply — and either return clean numpy arrays or raise `ValueError` naming the sender and the problem, so a
strategy can reject that one reply with a logged reason and aggregate the rest:

* [`reply_arrays`]: the reply's `ArrayRecord` decoded and checked key by key against a reference (same keys, shape,
  dtype; finite; every |value| below a bound). Corrupt bytes, a `ConfigRecord` where arrays belong, a missing or an
  extra key all raise `ValueError`, never anything deeper.
* [`reply_metric`]: one metric as a finite number inside an allowed range (a NaN `num-examples` is refused).
* [`require_rounds`]: a run that aggregated fewer rounds than its configured minimum fails loudly instead of
  returning the initial model with exit code 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, Message, MetricRecord

from .records import _from_wire

# |x| above this in a model update is treated as an attack or a divergence, not as a weight (float32 LoRA factors
# and H2Tune's G live around 1e-2 .. 1e1; 1e30 was accepted before this bound existed).
DEFAULT_MAX_ABS = 1e6

Spec = tuple[tuple[int, ...], np.dtype]


def sender(message: Message) -> str:
    """`"node <id>"`: the sender as the transport identifies it (never a name the payload claims)."""
    return f"node {message.metadata.src_node_id}"


def array_spec(reference: Mapping[str, Any]) -> dict[str, Spec]:
    """Name → (shape, numpy dtype) of a reference state dict (numpy arrays, torch tensors or `(shape, dtype)`)."""
    out = {}
    for name, ref in reference.items():
        if isinstance(ref, tuple) and len(ref) == 2 and not hasattr(ref, "shape"):
            out[name] = (tuple(int(s) for s in ref[0]), np.dtype(ref[1]))
            continue
        if hasattr(ref, "detach"):  # torch tensor: bfloat16 travels as float32 (see state_dict_to_arrays)
            import torch

            bf16 = ref.dtype == torch.bfloat16
            dtype = np.dtype(np.float32) if bf16 else torch.empty(0, dtype=ref.dtype).numpy().dtype
            out[name] = (tuple(ref.shape), dtype)
        else:
            arr = np.asarray(ref)
            out[name] = (tuple(arr.shape), arr.dtype)
    return out


def array_problem(name: str, value: np.ndarray, spec: Spec, max_abs: float | None = DEFAULT_MAX_ABS) -> str | None:
    """Why `value` does not match `spec` (shape, dtype, finite, |x| < `max_abs`), or `None` when it does."""
    shape, dtype = spec
    if tuple(value.shape) != tuple(shape):
        return f"{name!r}: shape {tuple(value.shape)} does not match the server's {tuple(shape)}"
    if value.dtype != dtype:
        return f"{name!r}: dtype {value.dtype} does not match the server's {dtype}"
    if value.dtype.kind in "fc":
        finite = np.isfinite(value)
        if not finite.all():
            return f"{name!r}: {int((~finite).sum())} non-finite value(s) (NaN/Inf)"
    if max_abs is not None and value.dtype.kind in "iufc" and value.size:
        peak = float(np.abs(value).max())
        if not peak < max_abs:
            return f"{name!r}: |value| up to {peak:.3g}, the bound is < {max_abs:.3g}"
    return None


# one decoder for every received array: its data is checked against its own metadata (a peer controls both)
_decode = _from_wire


def reply_content(message: Message) -> Any:
    """The content of a reply, or `ValueError` for an error reply or one without content."""
    if not isinstance(message, Message):
        raise ValueError(f"expected a flwr Message, got {type(message).__name__}")
    if message.has_error():
        raise ValueError(f"{sender(message)} replied with an error (code {message.error.code}): {message.error.reason}")
    if not message.has_content():
        raise ValueError(f"{sender(message)} replied without content")
    return message.content


def reply_arrays(
    message: Message,
    reference: Mapping[str, Any],
    *,
    arrays_key: str = "arrays",
    max_abs: float | None = DEFAULT_MAX_ABS,
) -> dict[str, np.ndarray]:
    """The reply's arrays, checked against the server's own `reference`; `ValueError` names the sender and problem.

    Args:
        message (`Message`): a `ClientApp`'s reply.
        reference (`Mapping`): name → numpy array, torch tensor or `(shape, dtype)`: what the server itself holds
            (its global model), so one malformed client cannot redefine what the others are checked against.
        arrays_key (`str`, defaults to `"arrays"`): the record holding the update.
        max_abs (`float`, *optional*, defaults to `1e6`): every |value| must be below it; `None` disables the bound.

    Returns:
        `dict[str, np.ndarray]`: the arrays, in the reference's order.
    """
    content = reply_content(message)
    who = sender(message)
    if arrays_key not in content:
        raise ValueError(f"{who}: the reply has no {arrays_key!r} record (it has {sorted(content.keys())})")
    record = content[arrays_key]
    if not isinstance(record, ArrayRecord):
        raise ValueError(f"{who}: record {arrays_key!r} is a {type(record).__name__}, not an ArrayRecord")
    spec = array_spec(reference)
    extra = [k for k in record.keys() if k not in spec]
    missing = [k for k in spec if k not in record.keys()]
    if extra or missing:
        raise ValueError(
            f"{who}: keys differ from the server's (unexpected {sorted(extra)[:4]}, missing {sorted(missing)[:4]})"
        )
    out = {}
    for name, want in spec.items():
        try:
            value = _decode(name, record[name])
        except ValueError as err:
            raise ValueError(f"{who}: {err}") from err
        problem = array_problem(name, value, want, max_abs)
        if problem:
            raise ValueError(f"{who}: {problem}")
        out[name] = value
    return out


def reply_metric(
    message: Message,
    name: str,
    *,
    metrics_key: str = "metrics",
    low: float = 0.0,
    high: float = math.inf,
    integer: bool = False,
) -> float:
    """One metric of a reply as a finite number in `[low, high]`; `ValueError` names the sender, metric and range."""
    content = reply_content(message)
    who = sender(message)
    if metrics_key not in content or not isinstance(content[metrics_key], MetricRecord):
        raise ValueError(f"{who}: the reply has no MetricRecord {metrics_key!r}")
    metrics = content[metrics_key]
    if name not in metrics:
        raise ValueError(f"{who}: metric {name!r} is missing from {metrics_key!r}")
    value = metrics[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{who}: metric {name!r} must be a finite number in [{low}, {high}], got {value!r}")
    if integer and float(value) != int(value):
        raise ValueError(f"{who}: metric {name!r} must be an integer in [{low}, {high}], got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{who}: metric {name!r} must lie in [{low}, {high}], got {value!r}")
    return float(value)


class TooFewRounds(RuntimeError):
    """A run aggregated fewer rounds than its configured minimum (e.g. no reply arrived in time)."""


def require_rounds(aggregated: int, minimum: int, asked: int) -> None:
    """Fail a run that aggregated fewer than `minimum` of its `asked` rounds (at least one is always required).

    Called last in a `ServerApp`: a run whose every round timed out must not exit 0 with the initial model.
    """
    minimum = max(1, min(int(minimum), int(asked)))
    if aggregated < minimum:
        raise TooFewRounds(
            f"the run aggregated {aggregated} of {asked} rounds, fewer than the required minimum "
            f"{minimum} ('min-rounds'): no valid update arrived in time in the others"
        )


__all__ = [
    "DEFAULT_MAX_ABS",
    "TooFewRounds",
    "array_problem",
    "array_spec",
    "reply_arrays",
    "reply_content",
    "reply_metric",
    "require_rounds",
    "sender",
]
