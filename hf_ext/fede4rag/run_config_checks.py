"""Input checks of FedE4RAG's `RunConfig` (called by `RunConfig.__post_init__` in `task.py`): the type and range of
every field (a string, `None` or a bool where a number is needed is refused, not converted), and the conversion of a
Flower run-config value, naming its key. Every failure is a `ValueError` naming the field and its allowed range
(pinned by `tests/fuzz/test_fede4rag.py`). Not a validation split: the held-out questions are in `evaluation.py`."""

from __future__ import annotations

import math
from typing import Any


def _int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"RunConfig.{name} must be an integer >= {low}, got {value!r}")


def _number(name: str, value: Any, low: float, high: float = math.inf, *, open_low: bool = False) -> None:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (value > low if open_low else value >= low) and value <= high
    if not ok:
        bracket = "(" if open_low else "["
        raise ValueError(f"RunConfig.{name} must be a finite number in {bracket}{low}, {high}], got {value!r}")


def check_run_config(run: Any) -> None:
    """Ranges of every numeric field of a FedE4RAG `RunConfig`."""
    _int("rounds", run.rounds, 1)
    _int("seed", run.seed, 0)
    for name in ("one_client", "encrypt"):
        if not isinstance(getattr(run, name), bool):
            raise ValueError(f"RunConfig.{name} must be a bool, got {getattr(run, name)!r}")
    for name in ("client_companies", "cache_dir", "encoder_path", "data_path", "user_data"):
        if not isinstance(getattr(run, name), str):
            raise ValueError(f"RunConfig.{name} must be a string, got {getattr(run, name)!r}")
    _int("batch_size", run.batch_size, 2)
    _int("client_steps", run.client_steps, 0)
    if 0 < run.client_steps < run.rounds:
        raise ValueError(
            f"RunConfig.client_steps must be 0 or >= rounds ({run.rounds}: every round trains), got {run.client_steps}"
        )
    _int("lora_rank", run.lora_rank, 1)
    _int("max_query_length", run.max_query_length, 2)
    _int("max_passage_length", run.max_passage_length, 2)
    _number("local_epochs", run.local_epochs, 0.0, open_low=True)
    _number("learning_rate", run.learning_rate, 0.0, open_low=True)
    _number("kd_lambda", run.kd_lambda, 0.0)
    _number("temperature", run.temperature, 0.0, 10.0, open_low=True)
    _number("holdout", run.holdout, 0.0, 0.9)
    _number("train_fraction", run.train_fraction, 0.0, 1.0, open_low=True)
    _number("test_fraction", run.test_fraction, 0.0, 0.9)
    if (
        not isinstance(run.lora_layers, tuple | list)
        or not run.lora_layers
        or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in run.lora_layers)
    ):
        raise ValueError(
            f"RunConfig.lora_layers must name at least one encoder layer (integers >= 0), got {run.lora_layers!r}"
        )


def convert(key: str, kind: type, value: Any) -> Any:
    """`kind(value)` for a run-config value, or a `ValueError` naming the key."""
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"run config {key!r} must be {kind.__name__}, got {value!r}") from None


__all__ = ["check_run_config", "convert"]
