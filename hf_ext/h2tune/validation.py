"""Input validation at H2Tune's public entry points: the run config, what a client receives from the server, and
tensor shapes. Every failure is a `ValueError` naming the field and its allowed range (the fuzz suite
`tests/fuzz/test_h2tune.py` pins them)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

MAX_ABS = 1e6  # the server's bound on |G| (aggregation.MAX_ABS): a client refuses a global beyond it too

_INT_FIELDS = {
    "rounds": 1,
    "local_steps": 1,
    "batch_size": 1,
    "num_train": 1,
    "num_test": 1,
    "pretrain_steps": 0,
    "max_len": 4,
    "heal_steps": 0,
}
# run-config key → the type its value must convert to
_RUN_CONFIG_TYPES = {
    "num-server-rounds": int,
    "local-steps": int,
    "batch-size": int,
    "lr": float,
    "num-train": int,
    "num-test": int,
    "seed": int,
    "pretrain-steps": int,
    "max-len": int,
    "heal-steps": int,
}


def check_run_config(run: Any, num_clients: int) -> None:
    """Field ranges of an H2Tune `RunConfig`."""
    for name, low in _INT_FIELDS.items():
        value = getattr(run, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"RunConfig.{name} must be an integer >= {low}, got {value!r}")
    lr = run.learning_rate
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"RunConfig.learning_rate must be a finite number > 0, got {lr!r}")


def check_run_config_types(run_config: Mapping[str, Any]) -> None:
    """Each known run-config key converts to its type (a text `local-steps` names the key, not a bare int())."""
    for key, kind in _RUN_CONFIG_TYPES.items():
        if key in run_config:
            value = run_config[key]
            try:
                if isinstance(value, bool):
                    raise TypeError
                kind(value)
            except (TypeError, ValueError):
                raise ValueError(
                    f"run config {key!r} must be {'an integer' if kind is int else 'a number'}, got {value!r}"
                ) from None


def check_shape(name: str, shape: Any, ndim: int | None = None) -> tuple[int, ...]:
    """A shape of positive integers."""
    try:
        shape = tuple(shape)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of positive integers, got {shape!r}") from None
    if (ndim is not None and len(shape) != ndim) or any(
        isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in shape
    ):
        want = f"{ndim} positive integers" if ndim else "positive integers"
        raise ValueError(f"{name} must be {want}, got {shape!r}")
    return tuple(int(s) for s in shape)


def check_global(
    incoming: Mapping[str, Any] | None, mode: str, global_shape: tuple[int, ...]
) -> Mapping[str, Any] | None:
    """What a client received from the server, before it trains on it.

    H2Tune: only `"g"`, float, the server's global shape, finite, |x| < 1e6. HetLoRA: 2-D finite float factors.
    """
    if not incoming:
        return incoming
    if mode == "h2tune":
        extra = sorted(set(incoming) - {"g"})
        if extra:
            raise ValueError(f"the server's global message has unexpected key(s) {extra} (H2Tune sends only 'g')")
        arrays = {"g": incoming["g"]} if "g" in incoming else {}
    else:
        arrays = dict(incoming)
    for key, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype.kind != "f":
            raise ValueError(f"the global {key!r} from the server must be float, got dtype {arr.dtype}")
        if mode == "h2tune" and tuple(arr.shape) != tuple(global_shape):
            raise ValueError(
                f"the global {key!r} from the server has shape {tuple(arr.shape)}, expected "
                f"{tuple(global_shape)} (L_max, M, R, R)"
            )
        if mode == "hetlora" and arr.ndim != 2:
            raise ValueError(f"the global {key!r} from the server must be a 2-D factor, got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(
                f"the global {key!r} from the server holds {int((~np.isfinite(arr)).sum())} NaN/Inf "
                "value(s): refusing to train on it"
            )
        if arr.size and not float(np.abs(arr).max()) < MAX_ABS:
            raise ValueError(
                f"the global {key!r} from the server has |value| up to {float(np.abs(arr).max()):.3g}, "
                f"the bound is < {MAX_ABS:.3g}"
            )
    return incoming


__all__ = ["check_global", "check_run_config", "check_run_config_types", "check_shape"]
