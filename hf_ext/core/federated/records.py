"""Tensors <-> `ArrayRecord`s and FedAvg (part of [`hf_ext.core.federated`]); replies are checked by `guard.py`.

`torch` and `peft` are imported inside the functions that need them, so importing this module stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Array, ArrayRecord

if TYPE_CHECKING:
    import torch


# --- Tensors <-> ArrayRecord ------------------------------------------------------------------------------------------


def _wire_dtype(value: torch.Tensor | np.ndarray) -> np.dtype:
    """The numpy dtype a tensor or array travels as."""
    import torch

    if isinstance(value, np.ndarray):
        return value.dtype
    # numpy has no bfloat16, so Flower's `Array` cannot hold one; float32 holds every bfloat16 value exactly.
    if value.dtype == torch.bfloat16:
        return np.dtype(np.float32)
    try:
        return torch.empty(0, dtype=value.dtype).numpy().dtype
    except TypeError as err:
        raise ValueError(f"dtype {value.dtype} has no numpy equivalent and cannot be sent") from err


def _to_wire(name: str, value: Any) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        try:
            return tensor.contiguous().numpy()
        except TypeError as err:
            raise ValueError(f"{name!r}: dtype {value.dtype} has no numpy equivalent and cannot be sent") from err
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise ValueError(f"{name!r}: numpy dtype {value.dtype} cannot be sent (numeric or bool only)")
        return value
    raise ValueError(f"{name!r}: expected a torch.Tensor or numpy.ndarray, got {type(value).__name__}")


def _from_wire(name: str, array: Any) -> np.ndarray:
    """Decode one `Array`, checking its data against its own metadata (a peer controls both)."""
    if not isinstance(array, Array):
        raise ValueError(f"{name!r}: expected a flwr Array, got {type(array).__name__}")
    try:
        value = array.numpy()
    except Exception as err:  # np.load raises ValueError, OSError or EOFError on corrupt bytes
        raise ValueError(f"{name!r}: array data cannot be decoded ({type(err).__name__}: {err})") from err
    if tuple(value.shape) != tuple(array.shape) or str(value.dtype) != array.dtype:
        raise ValueError(
            f"{name!r}: array data ({value.dtype}, shape {tuple(value.shape)}) contradicts its metadata "
            f"({array.dtype}, shape {tuple(array.shape)})"
        )
    return value


def state_dict_to_arrays(
    state_dict: Mapping[str, torch.Tensor | np.ndarray], *, keys: Iterable[str] | None = None
) -> ArrayRecord:
    """Convert a state dict into a Flower `ArrayRecord`, keeping names and order (`ValueError` names a bad key).

    Lossless for every dtype numpy knows (float32/16/64, int64, bool, ...): the bytes are copied as they are.
    `bfloat16` tensors travel as float32 (numpy has no bfloat16); the conversion is exact, and
    [`arrays_to_state_dict`] with a `reference` casts them back.

    Args:
        state_dict (`Mapping[str, torch.Tensor | np.ndarray]`): tensors (any device) or arrays by name.
        keys (`Iterable[str]`, *optional*): the names to send, in that order; defaults to all of them. Use it to
            send only what the method must (e.g. the trainable parameters).

    Returns:
        `ArrayRecord`: one `Array` per name.
    """
    names = list(state_dict) if keys is None else list(keys)
    record = ArrayRecord()
    for name in names:
        if name not in state_dict:
            raise ValueError(f"key {name!r} was requested but is not in the state dict")
        record[name] = Array(_to_wire(name, state_dict[name]))
    return record


def arrays_to_state_dict(
    record: ArrayRecord,
    *,
    reference: Mapping[str, torch.Tensor | np.ndarray] | None = None,
    strict: bool = True,
) -> dict[str, torch.Tensor]:
    """Convert an `ArrayRecord` (e.g. received from a peer) back into a state dict of tensors.

    Any problem (missing or unexpected key, shape or dtype mismatch, undecodable data) raises `ValueError` naming
    the key.

    Without `reference` the tensors keep the record's dtypes and lie on the CPU. With `reference`, every array is
    validated against it and cast back to its dtype and device (float32 -> bfloat16 for bfloat16 references).

    Args:
        record (`ArrayRecord`): the arrays.
        reference (`Mapping[str, torch.Tensor | np.ndarray]`, *optional*): the state dict the record must match
            (typically the receiver's own model): names, shapes and wire dtypes are checked.
        strict (`bool`, defaults to `True`): require every reference key to be present. With `strict=False` a
            record may carry a subset (a partial update); a key the reference does not know is always an error.

    Returns:
        `dict[str, torch.Tensor]`: tensors by name, in the reference's order when one is given.
    """
    import torch

    if not isinstance(record, ArrayRecord):
        raise ValueError(f"expected an ArrayRecord, got {type(record).__name__}")
    if reference is None:
        out = {}
        for name in record:
            value = _from_wire(name, record[name])
            if not value.dtype.isnative:  # torch.from_numpy refuses byte-swapped arrays
                value = value.astype(value.dtype.newbyteorder("="))
            try:
                out[name] = torch.from_numpy(value)
            except TypeError as err:
                raise ValueError(f"{name!r}: numpy dtype {value.dtype} has no torch equivalent") from err
        return out

    for name in record:
        if name not in reference:
            raise ValueError(f"unexpected key {name!r}: it is not in the reference state dict")
    if strict:
        for name in reference:
            if name not in record:
                raise ValueError(f"missing key {name!r}: the record does not carry it (strict=True)")
    out = {}
    for name, ref in reference.items():
        if name not in record:
            continue
        value = _from_wire(name, record[name])
        expected_shape, expected_dtype = tuple(ref.shape), _wire_dtype(ref)
        if tuple(value.shape) != expected_shape:
            raise ValueError(f"{name!r}: shape {tuple(value.shape)} does not match the expected {expected_shape}")
        if value.dtype != expected_dtype:
            raise ValueError(f"{name!r}: dtype {value.dtype} does not match the expected {expected_dtype}")
        tensor = torch.from_numpy(value)
        if isinstance(ref, torch.Tensor):
            tensor = tensor.to(dtype=ref.dtype, device=ref.device)
        out[name] = tensor
    return out


def adapter_state_to_arrays(peft_model: Any, adapter_name: str = "default") -> ArrayRecord:
    """The adapter weights of a PEFT model as an `ArrayRecord`: only the adapter crosses the wire.

    Uses `peft.get_peft_model_state_dict`, so names carry no adapter name (e.g.
    `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`) and the receiver may use another one.

    Args:
        peft_model (`peft.PeftModel`): the model holding the adapter.
        adapter_name (`str`, defaults to `"default"`): which adapter to send.

    Returns:
        `ArrayRecord`: the adapter's arrays.
    """
    from peft import get_peft_model_state_dict

    # save_embedding_layers=False: never send whole embedding matrices, and skip peft's Hub look-up that "auto"
    # makes for Hub-like base model names.
    state = get_peft_model_state_dict(peft_model, adapter_name=adapter_name, save_embedding_layers=False)
    return state_dict_to_arrays(state)


def load_adapter_arrays(peft_model: Any, record: ArrayRecord, adapter_name: str = "default") -> None:
    """Load adapter arrays (from [`adapter_state_to_arrays`], possibly aggregated) into a PEFT model in place.

    The record is validated against the model's own adapter first (same keys, shapes and dtypes); a mismatch
    raises `ValueError` naming the key.

    Args:
        peft_model (`peft.PeftModel`): the model holding the adapter.
        record (`ArrayRecord`): the adapter arrays.
        adapter_name (`str`, defaults to `"default"`): which adapter to overwrite.
    """
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    reference = get_peft_model_state_dict(peft_model, adapter_name=adapter_name, save_embedding_layers=False)
    state = arrays_to_state_dict(record, reference=reference, strict=True)
    result = set_peft_model_state_dict(peft_model, state, adapter_name=adapter_name)
    # `missing_keys` lists the whole base model and is meaningless here; unexpected keys would mean nothing loaded.
    if result.unexpected_keys:
        raise ValueError(f"adapter {adapter_name!r} did not accept keys {list(result.unexpected_keys)[:5]}")


# --- Aggregation ------------------------------------------------------------------------------------------------------


def weighted_average(records: Sequence[ArrayRecord], weights: Sequence[float]) -> ArrayRecord:
    """Weighted FedAvg of `ArrayRecord`s, key by key, for custom strategies.

    Floating arrays are averaged in float64 and cast back to their dtype (so float32 averages do not depend on the
    order of the records beyond float64 rounding). Integer and bool arrays get the weighted mean rounded to the
    nearest value. A key, shape or dtype mismatch raises `ValueError` naming the key and the record index.

    Args:
        records (`Sequence[ArrayRecord]`): one record per client; all with the same keys, shapes and dtypes.
        weights (`Sequence[float]`): one non-negative weight per record (e.g. `num-examples`), not all zero.

    Returns:
        `ArrayRecord`: the average, keys in the first record's order.
    """
    records, weights = list(records), [float(w) for w in weights]
    if not records:
        raise ValueError("no records to average")
    if len(records) != len(weights):
        raise ValueError(f"{len(records)} records but {len(weights)} weights")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights must be finite, non-negative and not all zero, got {weights}")
    keys = list(records[0].keys())
    for index, record in enumerate(records[1:], start=1):
        for key in keys:
            if key not in record:
                raise ValueError(f"key {key!r} is missing from record {index} (present in record 0)")
        for key in record:
            if key not in records[0]:
                raise ValueError(f"unexpected key {key!r} in record {index} (absent from record 0)")
    total = sum(weights)
    out = ArrayRecord()
    for key in keys:
        first = _from_wire(key, records[0][key])
        if first.dtype.kind not in "biuf":
            raise ValueError(f"{key!r}: cannot average dtype {first.dtype}")
        acc = np.zeros(first.shape, dtype=np.float64)
        for index, (record, weight) in enumerate(zip(records, weights)):
            value = first if index == 0 else _from_wire(key, record[key])
            if value.shape != first.shape:
                raise ValueError(f"{key!r}: record {index} has shape {value.shape}, record 0 has {first.shape}")
            if value.dtype != first.dtype:
                raise ValueError(f"{key!r}: record {index} has dtype {value.dtype}, record 0 has {first.dtype}")
            acc += (weight / total) * value
        if first.dtype.kind != "f":
            acc = np.rint(acc)
        out[key] = Array(acc.astype(first.dtype))
    return out
