"""The server's state pieces: [`ServerLimits`] (what one message and all clients together may ask), the copies of
part B with their optimiser and readers-writer lock, and the message-value checks the handlers share."""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .arguments import FlLlamaTrainingArguments, PartOptimizer, apply_lora
from .modeling_fl_llama import FlLlamaServerModel
from .transport import Meta, ProtocolError


@dataclass(frozen=True)
class ServerLimits:
    """What one message, and all clients together, may ask of the server (a 1.6 MiB message with L = 12,000 used to
    take 13 s and 680 MB).

    Args:
        max_seq_len (`int`, *optional*): longest sequence (and largest position + 1); defaults to the model's
            `max_position_embeddings`.
        max_batch (`int`, defaults to 64): largest batch of one message.
        max_message_bytes (`int`, defaults to 64 MiB): largest request.
        max_sessions (`int`, defaults to 64): open generation sessions, all clients together.
        max_sessions_per_client (`int`, defaults to 8): open sessions of one client.
        max_pending (`int`, defaults to 64): clients with a pending forward (and hierarchical sub-servers).
        step_timeout (`float`, defaults to 120): seconds a client may hold the shared part B between its training
            forward and its backward; after that its step is dropped and the next waiting client's forward runs.
        queue_timeout (`float`, defaults to 600): seconds a training forward waits for its turn before it is refused.
    """

    max_seq_len: int | None = None
    max_batch: int = 64
    max_message_bytes: int = 64 * 1024 * 1024
    max_sessions: int = 64
    max_sessions_per_client: int = 8
    max_pending: int = 64
    step_timeout: float = 120.0
    queue_timeout: float = 600.0

    def __post_init__(self):
        for name in ("max_batch", "max_message_bytes", "max_sessions", "max_sessions_per_client", "max_pending"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ServerLimits.{name} must be an integer >= 1, got {value!r}")
        for name in ("step_timeout", "queue_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"ServerLimits.{name} must be a finite number of seconds > 0, got {value!r}")
        if self.max_seq_len is not None and (
            isinstance(self.max_seq_len, bool) or not isinstance(self.max_seq_len, int) or self.max_seq_len < 1
        ):
            raise ValueError(f"ServerLimits.max_seq_len must be an integer >= 1 or None, got {self.max_seq_len!r}")


def _finite(name: str, t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise ProtocolError(f"tensor {name!r} holds {bad} NaN/Inf value(s); refused, server state unchanged")
    return t


def _meta_int(meta: Meta, key: str, default: int | None = None) -> int:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"meta field {key!r} must be an integer, got {value!r}")
    return value


def prepare_body(model: FlLlamaServerModel) -> list[torch.nn.Parameter]:
    """Marks what part B trains and returns those parameters.

    With LoRA on (`lora_rank > 0`) only the adapters train, and only when "body" is in `lora_parts`; a body left out
    of `lora_parts` is frozen (it still back-propagates `g_A` to the client). Without LoRA the active blocks train.
    """
    cfg = model.config
    a, n = cfg.num_input_blocks, cfg.num_layers
    active = [f"layers.{i - 1}" for i in range(a, n - cfg.num_output_blocks)]
    model.requires_grad_(False)
    if cfg.lora_rank > 0:
        if "body" not in cfg.lora_parts:
            return []
        existing = [p for n, p in model.named_parameters() if "lora_" in n]  # a sub-server copy already has LoRA
        params = existing or apply_lora(model, active, cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout,
                                        cfg.lora_target_modules)  # fmt: skip
    else:
        params = [p for layer in model.active_layers for p in layer.parameters()]
    for p in params:
        p.requires_grad_(True)
    return params


class _ReadWriteLock:
    """Many readers (forwards and backwards, which only read B's weights) or one writer (an optimiser step, FedAvg,
    a checkpoint load); a waiting writer holds off new readers so it cannot starve."""

    def __init__(self):
        self._cv = threading.Condition()
        self._readers, self._writer, self._writers_waiting = 0, False, 0

    @contextmanager
    def read(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._writer and not self._writers_waiting)
            self._readers += 1
        try:
            yield
        finally:
            with self._cv:
                self._readers -= 1
                self._cv.notify_all()

    @contextmanager
    def write(self):
        with self._cv:
            self._writers_waiting += 1
            self._cv.wait_for(lambda: not self._writer and self._readers == 0)
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cv:
                self._writer = False
                self._cv.notify_all()


class _Body:
    """One copy of part B with its optimiser (the server has one, or one per client in hierarchical mode) and the
    lock that keeps an optimiser step apart from the forwards and backwards reading its weights."""

    def __init__(self, model: FlLlamaServerModel, args: FlLlamaTrainingArguments, lock: _ReadWriteLock | None = None):
        self.model = model
        self.optimizer = PartOptimizer(prepare_body(model), args)
        self.lock = lock or _ReadWriteLock()


__all__ = ["ServerLimits", "prepare_body"]
