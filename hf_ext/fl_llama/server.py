"""The server party of FL-LLaMA: part B behind a message handler (training, client-batch, server-hierarchical,
split generation with a server-side KV cache).

Every message is checked before use (names, ranks, dtypes, sizes, finite values, positions, the limits of
[`ServerLimits`]); a bad one is answered with an `error` message that names the problem, and the server's state is
left as it was.

Who owns what: over gRPC with client tokens ([`~hf_ext.fl_llama.auth`]) every call arrives with an authenticated
[`~hf_ext.fl_llama.auth.Principal`], and all per-client state — the pending forward (whose backward returns
gradients), the hierarchical sub-server, the generation sessions — is keyed by its name; a `client_id` in the message
is ignored, so no message can touch another client's state. Only admin principals may send `partition` (which resets
everyone's state). In-process (no principal), the caller is the trusted local code and `client_id` names the client.

Concurrency (many clients on one server, gRPC worker threads): the server is thread-safe by itself
(`serve_grpc(..., serialize=False)`). Part B's autograd graph from a client's training `forward` is consumed by that
client's `backward`, and the backward's optimiser step changes B in place; a second client's forward in between would
see its saved tensors modified. So on the shared part B a training step (`forward` ... `backward` + optimiser step)
is a *turn*: one client holds it at a time, the others' training forwards wait in arrival order (FIFO) and then run on
the parameters the previous step left. Every step is therefore exactly the step that client would take alone on a
server that had already taken the steps before it, in the order recorded in [`SplitServer.step_log`]; replaying that
log one client at a time gives the same parameters (tested with 16 clients over gRPC). A client that holds the turn
longer than `ServerLimits.step_timeout` without its backward loses it (its step is dropped, its late backward is
refused with a message saying so); a forward that waited longer than `ServerLimits.queue_timeout` is refused, naming
the holder. Inference (`forward` without `train`, `prefill`, `decode`, `forward_full`) needs no turn and runs in
parallel with everything but an optimiser step (a readers-writer lock per copy of B). Server-hierarchical sub-servers
each have their own lock, so different clients' steps compute in parallel.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import shutil
import threading
import time
from collections import deque
from contextlib import ExitStack
from pathlib import Path

import torch
from transformers import DynamicCache

from .arguments import FlLlamaTrainingArguments
from .checkpoint import load_party_checkpoint, save_party_checkpoint
from .modeling_fl_llama import FlLlamaServerModel, causal_mask_4d, padding_mask_from_counts
from .server_generation import GenerationHandlers
from .server_state import ServerLimits, _Body, _finite, _meta_int, prepare_body
from .transport import FLOAT_DTYPES, AccessDenied, Meta, ProtocolError, Tensors, decode, encode, expect_tensor

_BATCH = "__batch__"  # the owner of a client-batch step (each client's hello is checked in handle_batch)


class SplitServer(GenerationHandlers):
    """Handles FL-LLaMA messages for part B.

    Args:
        model ([`FlLlamaServerModel`]): the server's part.
        args ([`FlLlamaTrainingArguments`], *optional*): optimisation of part B.
        hierarchical (`bool`): server-hierarchical mode: one sub-server copy of B per client id, trained
            independently and averaged by [`aggregate`] (FedAvg), which also broadcasts the mean back.
        limits ([`ServerLimits`], *optional*): what one message and all clients together may ask.
        output_dir (`str` or `os.PathLike`, *optional*): where `save` writes checkpoints (`checkpoint-<step>`);
            without it `save` is refused.
        save_total_limit (`int`): checkpoints kept in `output_dir` (the oldest are deleted).
        require_output_dir (`bool`): refuse training at the handshake unless `output_dir` is set and writable
            (`hf-ext fl_llama serve` sets it: a server process that cannot save would lose every trained step when it
            ends). In-process callers hold the model object themselves and may leave it off.

    Methods on the wire: `hello` (the handshake: `(a, c)`, model hash, sizes and, to train, the schedule length
    `max_steps`), `forward` (`hidden`, `n_real` or the uncompressed `mask`, `position_ids`), `backward` (`grad`),
    `step` (with `global_clip`: the optimiser step after a `backward` that returned B's squared gradient norm,
    scaled by the client's common clip factor), `save` (checkpoint part B and its optimiser), `prefill` / `decode` /
    `end` (split generation with a KV cache per session, any batch, left padding), `forward_full` (the FL-GLM-style
    no-cache step: the whole prefix and its 4-D mask), `partition` (move `(a, c)`). Training messages (`forward` with
    `train`, `backward`, `step`) are refused from a client that has not completed a training `hello`.

    The learning-rate schedule's length: `args.max_steps` when given (a client asking another length is refused),
    else the first training client's `max_steps`, fixed from then on (and saved in checkpoints).

    `step_log` lists, in order, the owner of every optimiser step of part B (`"__batch__"` for a client-batch step);
    with the shared part B (not hierarchical) replaying it one client at a time reproduces the run exactly.
    """

    def __init__(self, model: FlLlamaServerModel, args: FlLlamaTrainingArguments | None = None,
                 hierarchical: bool = False, limits: ServerLimits | None = None,
                 output_dir: str | os.PathLike | None = None, save_total_limit: int = 2,
                 require_output_dir: bool = False):  # fmt: skip
        if args is not None and not isinstance(args, FlLlamaTrainingArguments):
            raise TypeError(f"SplitServer: args must be FlLlamaTrainingArguments, got {type(args).__name__}")
        if limits is not None and not isinstance(limits, ServerLimits):
            raise TypeError(f"SplitServer: limits must be ServerLimits, got {type(limits).__name__}")
        if isinstance(save_total_limit, bool) or not isinstance(save_total_limit, int) or save_total_limit < 1:
            raise ValueError(f"SplitServer: save_total_limit must be an integer >= 1, got {save_total_limit!r}")
        self.args = args or FlLlamaTrainingArguments()
        self.model, self.hierarchical = model, bool(hierarchical)
        self.limits = limits or ServerLimits()
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.save_total_limit = int(save_total_limit)
        self.require_output_dir = bool(require_output_dir)
        self._main = _Body(model, self.args)
        self._subs: dict[str, _Body] = {}
        self._pending: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._sessions: dict[tuple[str, str], tuple[DynamicCache, torch.Tensor]] = {}
        self._busy_sessions: set[tuple[str, str]] = set()
        self._trainers: set[str] = set()  # owners whose training handshake succeeded
        self._schedule_fixed = self.args.max_steps is not None
        self._lock = threading.RLock()  # every dictionary and counter above; never held while B computes
        self._turn_cv = threading.Condition(self._lock)
        self._turn_owner: str | None = None  # who holds the shared part B between a training forward and backward
        self._turn_since = 0.0
        self._queue: deque[str] = deque()  # training forwards waiting for the turn, in arrival order
        self._expired: set[str] = set()  # owners whose step was dropped after step_timeout
        self._awaiting_step: dict[str, _Body] = {}  # global clip: gradients computed, waiting for the clip factor
        self._batch_parts = 1
        self.steps = 0
        self.step_log: list[str] = []

    @property
    def max_seq_len(self) -> int:
        return int(self.limits.max_seq_len or self.model.config.llama_config.get("max_position_embeddings", 2048))

    # ---- wire entry points -------------------------------------------------------------------------------------
    def handle_bytes(self, data: bytes, principal=None) -> bytes:
        """Decodes one request, runs it and encodes the reply (an `error` reply for a malformed or refused request).

        Args:
            data (`bytes`): the request.
            principal ([`~hf_ext.fl_llama.auth.Principal`], *optional*): the authenticated caller (set by
                [`~hf_ext.fl_llama.transport.serve_grpc`] with tokens); `None` for trusted in-process calls.
        """
        try:
            if len(data) > self.limits.max_message_bytes:
                raise ProtocolError(
                    f"message of {len(data)} bytes exceeds max_message_bytes={self.limits.max_message_bytes}"
                )
            method, tensors, meta = decode(data)
            out, out_meta = self.handle(method, self._to_device(tensors), meta, principal=principal)
            return encode(method, out, out_meta)
        except ProtocolError as exc:
            return encode("error", meta={"kind": "protocol", "message": str(exc)})
        except AccessDenied as exc:
            return encode("error", meta={"kind": "access", "message": str(exc)})
        except Exception as exc:  # noqa: BLE001  (reported to the peer; the server keeps serving)
            return encode("error", meta={"kind": "remote", "message": f"{type(exc).__name__}: {exc}"})

    def _to_device(self, tensors: Tensors) -> Tensors:
        """A message's tensors (decoded on the CPU) on the device part B lives on; replies go back through
        `encode`, which copies them to the CPU."""
        device = next(self.model.parameters()).device
        return tensors if device.type == "cpu" else {k: v.to(device) for k, v in tensors.items()}

    def handle(self, method: str, tensors: Tensors, meta: Meta, principal=None) -> tuple[Tensors, Meta]:
        """Runs one decoded request for its owner: the authenticated `principal`'s name, or (in-process, no
        principal) the message's `client_id`."""
        handlers = {"hello": self._hello, "forward": self._forward, "backward": self._backward, "save": self._save,
                    "prefill": self._prefill, "decode": self._decode, "end": self._end,
                    "forward_full": self._forward_full, "partition": self._partition, "step": self._step}  # fmt: skip
        if method not in handlers:
            raise ProtocolError(f"unknown method {method!r}; expected one of {sorted(handlers)}")
        if not isinstance(meta, dict):
            raise ProtocolError(f"message meta must be a JSON object, got {type(meta).__name__}")
        if method == "partition" and principal is not None and not principal.admin:
            raise AccessDenied(
                f"client {principal.name!r} may not send 'partition' (it resets every client's "
                "state): admin token required"
            )
        owner = principal.name if principal is not None else str(meta.get("client_id", "0"))
        return handlers[method](tensors, meta, owner)

    def handle_batch(self, requests: list[bytes], owners: list[str] | None = None) -> list[bytes]:
        """Client-batch mode: each client's `forward` (or `backward`) message of one step, handled as one batch
        (concatenated on the batch axis, one forward/backward and one optimiser step of B); replies in order.
        `owners` are the authenticated senders (default: each message's `client_id`)."""
        decoded = [decode(r) for r in requests]
        methods = {m for m, _, _ in decoded}
        if len(methods) != 1 or methods.pop() not in ("forward", "backward"):
            raise ProtocolError("a client-batch holds the forward (or backward) messages of one step")
        for owner in owners or [str(meta.get("client_id", "0")) for _, _, meta in decoded]:
            self._require_training_hello(owner)
        method = decoded[0][0]
        sizes = [int(t["hidden" if method == "forward" else "grad"].shape[0]) for _, t, _ in decoded]
        joined = self._to_device({k: torch.cat([t[k] for _, t, _ in decoded]) for k in decoded[0][1]})
        self._batch_parts = len(decoded)  # each client's message may use max_batch rows (in-process only)
        try:
            out, _ = self.handle(method, joined, {"client_id": _BATCH, "train": True})
        finally:
            self._batch_parts = 1
        key = "hidden" if method == "forward" else "grad"
        parts = torch.split(out[key], sizes)
        return [encode(method, {key: p}, {}) for p in parts]

    # ---- handshake ---------------------------------------------------------------------------------------------
    def _hello(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        """Refuses a client whose partition, model or sizes differ from this server's, and (to train) a server that
        could not save what it trains, and agrees the schedule length; every refusal names both values."""
        cfg = self.model.config
        mine = {"a": int(cfg.num_input_blocks), "c": int(cfg.num_output_blocks), "model_hash": cfg.model_hash(),
                "hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers}  # fmt: skip
        for key, value in mine.items():
            if meta.get(key) != value:
                raise ProtocolError(
                    f"handshake refused: the client's {key} is {meta.get(key)!r}, this server's is "
                    f"{value!r} (both parties must split the same model at the same (a, c); "
                    "restart one of them with consistent settings)"
                )
        purpose = meta.get("purpose", "train")
        if purpose not in ("train", "generate"):
            raise ProtocolError(f"handshake: purpose must be 'train' or 'generate', got {purpose!r}")
        with self._lock:
            if purpose == "train":
                self._check_can_save()
                steps = meta.get("max_steps")
                if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
                    raise ProtocolError(f"handshake: max_steps must be an integer >= 1 or null, got {steps!r}")
                if not self._schedule_fixed:  # the first training client sets the schedule's length
                    if self.steps:
                        raise ProtocolError("handshake: this server has trained without an agreed schedule")
                    self._set_schedule(steps)
                elif steps != self.args.max_steps:
                    raise ProtocolError(
                        f"handshake refused: this server's learning-rate schedule runs over max_steps="
                        f"{self.args.max_steps}, the client's over max_steps={steps}; start both with the "
                        "same max_steps"
                    )
                self._trainers.add(owner)
            return {}, {**mine, "max_steps": self.args.max_steps, "steps": self.steps}

    def _check_can_save(self) -> None:
        if not self.require_output_dir:
            return
        if self.output_dir is None:
            raise ProtocolError(
                "handshake refused: this server was started without --output-dir, so the part B a client trains "
                "could not be saved and would be lost when the server ends; restart it with --output-dir DIR "
                "(generation is still served)"
            )
        if not self.output_dir.is_dir() or not os.access(self.output_dir, os.W_OK):
            raise ProtocolError(
                f"handshake refused: the server's output directory {self.output_dir} is not a writable folder, "
                "so the part B a client trains could not be saved"
            )

    def _set_schedule(self, max_steps: int | None) -> None:
        self.args = dataclasses.replace(self.args, max_steps=max_steps)
        self._schedule_fixed = True
        self._main = _Body(self.model, self.args, self._main.lock)
        for key, sub in self._subs.items():
            self._subs[key] = _Body(sub.model, self.args, sub.lock)

    def _require_training_hello(self, owner: str) -> None:
        if owner != _BATCH and owner not in self._trainers:
            raise ProtocolError(
                f"client {owner!r} sent a training message before a training 'hello' (the "
                "(a, c, model hash, max_steps) handshake)"
            )

    # ---- the training turn on the shared part B ----------------------------------------------------------------
    def _release_turn(self, owner: str) -> None:
        """(holding `_lock`) Gives up `owner`'s turn, if it holds it, and wakes the queue."""
        if self._turn_owner == owner:
            self._turn_owner = None
            self._turn_cv.notify_all()

    def _expire_stale_turn(self, now: float) -> None:
        """(holding `_lock`) Drops the step of a holder that has not sent its backward within `step_timeout`."""
        holder = self._turn_owner
        if holder is not None and now - self._turn_since > self.limits.step_timeout:
            self._pending.pop(holder, None)
            self._drop_awaiting(holder)
            self._expired.add(holder)
            self._release_turn(holder)

    def _drop_awaiting(self, owner: str) -> None:
        """(holding `_lock`) Forgets a global-clip step that never got its `step` message (its gradients too)."""
        body = self._awaiting_step.pop(owner, None)
        if body is not None:
            body.optimizer.zero_grad()

    def _acquire_turn(self, owner: str) -> None:
        """(holding `_lock`) Waits, first come first served, until the shared part B is free or already `owner`'s."""
        if self._turn_owner == owner:
            self._turn_since = time.monotonic()
            return
        deadline = time.monotonic() + self.limits.queue_timeout
        self._queue.append(owner)
        try:
            while True:
                now = time.monotonic()
                self._expire_stale_turn(now)
                if self._turn_owner is None and self._queue[0] == owner:
                    break
                if now >= deadline:
                    raise ProtocolError(
                        f"training forward of client {owner!r} waited {self.limits.queue_timeout:.0f} s "
                        f"(queue_timeout) for its turn on the shared part B (held by {self._turn_owner!r}, "
                        f"{len(self._queue) - 1} other client(s) waiting); refused, try again"
                    )
                wake = deadline
                if self._turn_owner is not None:
                    wake = min(wake, self._turn_since + self.limits.step_timeout + 1e-3)
                self._turn_cv.wait(max(1e-3, wake - now))
        finally:
            self._queue.remove(owner)
            self._turn_cv.notify_all()  # the next in line re-checks
        self._turn_owner, self._turn_since = owner, time.monotonic()
        self._expired.discard(owner)

    # ---- training ----------------------------------------------------------------------------------------------
    def _body_for(self, client_id: str) -> _Body:
        if not self.hierarchical:
            return self._main
        with self._lock:
            if client_id not in self._subs:
                with self._main.lock.read():
                    sub = copy.deepcopy(self.model)
                self._subs[client_id] = _Body(sub, self.args)
            return self._subs[client_id]

    def _check_hidden(self, tensors: Tensors) -> torch.Tensor:
        d = self.model.config.hidden_size
        hidden = expect_tensor(tensors, "hidden", ndim=3, dtype=FLOAT_DTYPES, shape={2: d})
        b, length = hidden.shape[:2]
        max_batch = self.limits.max_batch * self._batch_parts
        if not 1 <= b <= max_batch:
            raise ProtocolError(f"batch size {b} outside [1, {max_batch}] (max_batch)")
        if not 1 <= length <= self.max_seq_len:
            raise ProtocolError(
                f"sequence length {length} outside [1, {self.max_seq_len}] (max_seq_len, the "
                "model's max_position_embeddings)"
            )
        return _finite("hidden", hidden)

    def _check_positions(self, pos: torch.Tensor) -> torch.Tensor:
        if pos.numel() and bool((pos < 0).any() or (pos >= self.max_seq_len).any()):
            raise ProtocolError(
                f"position_ids must lie in [0, {self.max_seq_len}), got values in [{int(pos.min())}, {int(pos.max())}]"
            )
        return pos

    def _check_counts(self, n_real: torch.Tensor, b: int, length: int) -> torch.Tensor:
        n_real = expect_tensor({"n_real": n_real}, "n_real", ndim=1, dtype=torch.int64, shape={0: b})
        if bool((n_real < 1).any() or (n_real > length).any()):
            raise ProtocolError(f"n_real must lie in [1, {length}], got {n_real.tolist()}")
        return n_real

    def _mask(self, tensors: Tensors, b: int, length: int) -> torch.Tensor:
        if "n_real" in tensors:  # attention-mask compression: B integers instead of B x L x L
            n_real = self._check_counts(tensors["n_real"], b, length)
            return causal_mask_4d(padding_mask_from_counts(n_real, length), length)
        mask = expect_tensor(tensors, "mask", ndim=4, dtype=FLOAT_DTYPES, shape={0: b, 1: 1, 2: length, 3: length})
        if bool(torch.isnan(mask).any()):
            raise ProtocolError("tensor 'mask' holds NaN values")
        return mask == 0  # the additive float mask as sent by an uncompressed (FL-GLM-style) client

    def _forward(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        hidden = self._check_hidden(tensors)
        b, length = hidden.shape[:2]
        pos = expect_tensor(tensors, "position_ids", ndim=2, dtype=torch.int64, shape={0: b, 1: length})
        self._check_positions(pos)
        mask = self._mask(tensors, b, length)
        client_id = owner
        train = meta.get("train", True)
        if not isinstance(train, bool):
            raise ProtocolError(f"meta field 'train' must be true or false, got {train!r}")
        if not train:
            body = self._body_for(client_id) if client_id in self._subs else self._main
            with body.lock.read(), torch.no_grad():
                return {"hidden": body.model.body(hidden, mask, pos)}, {}
        with self._lock:
            self._require_training_hello(owner)
            if client_id not in self._pending and len(self._pending) >= self.limits.max_pending:
                raise ProtocolError(
                    f"{len(self._pending)} clients already have a pending forward "
                    f"(max_pending={self.limits.max_pending})"
                )
            if self.hierarchical and client_id not in self._subs and len(self._subs) >= self.limits.max_pending:
                raise ProtocolError(
                    f"{len(self._subs)} sub-servers exist already (max_pending={self.limits.max_pending})"
                )
            if not self.hierarchical:
                self._acquire_turn(owner)
            self._pending.pop(client_id, None)  # a repeated forward replaces this client's unfinished step
            self._drop_awaiting(client_id)
        body = self._body_for(client_id)
        leaf = hidden.clone().requires_grad_(True)
        try:
            with body.lock.read(), torch.enable_grad():  # in-process, the call comes from the client's autograd
                out = body.model.body(leaf, mask, pos)
        except BaseException:
            with self._lock:
                self._release_turn(owner)
            raise
        with self._lock:
            if not self.hierarchical and self._turn_owner != owner:
                raise ProtocolError(
                    f"client {owner!r}'s training step was dropped while it computed (step_timeout or a partition "
                    "reset); send the forward again"
                )
            self._pending[client_id] = (leaf, out)
        return {"hidden": out.detach()}, {}

    def _backward(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        client_id = owner
        global_clip = meta.get("global_clip", False)
        if not isinstance(global_clip, bool):
            raise ProtocolError(f"meta field 'global_clip' must be true or false, got {global_clip!r}")
        with self._lock:
            self._require_training_hello(owner)
            self._expire_stale_turn(time.monotonic())
            if client_id not in self._pending:
                if client_id in self._expired:
                    raise ProtocolError(
                        f"client {client_id!r}'s step expired: its backward came more than "
                        f"{self.limits.step_timeout:.0f} s (step_timeout) after its forward, and the shared part B "
                        "went to the next client; send the forward again"
                    )
                raise ProtocolError(f"backward from client {client_id!r} without a pending forward")
            leaf, out = self._pending[client_id]
            grad = expect_tensor(tensors, "grad", ndim=3, dtype=FLOAT_DTYPES, shape=dict(enumerate(out.shape)))
            _finite("grad", grad)
            del self._pending[client_id]
        body = self._body_for(client_id)
        keep_turn = False
        try:
            with body.lock.read(), torch.enable_grad():
                out.backward(grad.to(out.dtype))
            if global_clip:  # the client adds the parts' norms and sends the common factor in `step`
                with self._lock:
                    self._awaiting_step[client_id] = body
                keep_turn = True
                return {"grad": leaf.grad}, {"grad_sq_norm": body.optimizer.grad_sq_norm()}
            with body.lock.write():  # no forward reads B while the optimiser changes it in place
                body.optimizer.step()
        finally:
            if not keep_turn:
                with self._lock:
                    self._release_turn(owner)
        with self._lock:
            self.steps += 1
            self.step_log.append(owner)
        return {"grad": leaf.grad}, {}

    def _step(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        """The optimiser step of a global-clip training step: part B's gradients times the client's `clip_coef`
        (`min(1, max_grad_norm / (‖(g_A, g_B, g_C)‖ + 1e-6))`, as torch's `clip_grad_norm_` over the whole model)."""
        coef = meta.get("clip_coef")
        if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef) or not 0 < coef <= 1:
            raise ProtocolError(f"meta field 'clip_coef' must be a number in (0, 1], got {coef!r}")
        with self._lock:
            self._require_training_hello(owner)
            body = self._awaiting_step.pop(owner, None)
            if body is None:
                raise ProtocolError(f"'step' from client {owner!r} without a global-clip backward awaiting it")
        try:
            with body.lock.write():
                body.optimizer.step(clip_coef=float(coef))
        finally:
            with self._lock:
                self._release_turn(owner)
                self.steps += 1
                self.step_log.append(owner)
        return {}, {"steps": self.steps}

    def save_checkpoint(self, path: str | os.PathLike) -> Path:
        """Part B's weights (adapters included), its optimiser and schedule position, the step count and the
        handshake's values, written atomically (safetensors + JSON). In server-hierarchical mode the main copy is
        saved: call [`aggregate`] first."""
        cfg = self.model.config
        state = {"steps": self.steps, "max_steps": self.args.max_steps, "a": int(cfg.num_input_blocks),
                 "c": int(cfg.num_output_blocks), "model_hash": cfg.model_hash()}  # fmt: skip
        with self._main.lock.read():
            return save_party_checkpoint(path, self.model, "server.safetensors", {"body": self._main.optimizer}, state)

    def load_checkpoint(self, path: str | os.PathLike) -> dict:
        """Resumes from [`save_checkpoint`]: the same partition and model are required, and the checkpoint's
        schedule length becomes this server's (refused if the server was started with another)."""
        state_file = Path(path) / "trainer_state.json"
        if not state_file.is_file():
            raise FileNotFoundError(f"{path} is not an FL-LLaMA server checkpoint (no trainer_state.json)")
        state = json.loads(state_file.read_text())
        cfg = self.model.config
        for key, value in (("a", cfg.num_input_blocks), ("c", cfg.num_output_blocks), ("model_hash", cfg.model_hash())):
            if state.get(key) != value:
                raise ValueError(
                    f"checkpoint {path} was saved with {key}={state.get(key)!r}, this server has {value!r}"
                )
        steps = state.get("steps")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"checkpoint {path}: trainer_state.json 'steps' must be an integer >= 0, got {steps!r}")
        if self._schedule_fixed and state.get("max_steps") != self.args.max_steps:
            raise ValueError(
                f"checkpoint {path} runs its schedule over max_steps={state.get('max_steps')}, this server "
                f"was started with max_steps={self.args.max_steps}"
            )
        with self._lock, self._main.lock.write():
            self._set_schedule(state["max_steps"])
            load_party_checkpoint(path, self.model, "server.safetensors", {"body": self._main.optimizer})
            self.steps = steps
            self._pending.clear(), self._sessions.clear()
            self._release_turn(self._turn_owner)
        return state

    def _save(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        if self.output_dir is None:
            raise ProtocolError("this server has no output directory (start it with --output-dir) to save into")
        with self._lock:
            if self._pending or self._awaiting_step:
                raise ProtocolError(
                    "cannot save between a forward and its optimiser step (pending: "
                    f"{sorted(set(self._pending) | set(self._awaiting_step))})"
                )
            path = self.save_checkpoint(self.output_dir / f"checkpoint-{self.steps}")
            kept = sorted(self.output_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])
                          if p.name.split("-")[1].isdigit() else -1)  # fmt: skip
            for old in kept[: max(0, len(kept) - self.save_total_limit)]:
                shutil.rmtree(old, ignore_errors=True)
            return {}, {"checkpoint": path.name, "steps": self.steps}

    def aggregate(self, weights: dict[str, float] | None = None) -> None:
        """FedAvg of the sub-servers' parameters (weighted by `weights`, e.g. samples seen), broadcast to every
        sub-server and to the main copy. Optimiser states stay per sub-server."""
        with self._lock:
            if not self._subs:
                return
            ids = sorted(self._subs)
            bodies = [self._main] + [self._subs[i] for i in ids]
        w = torch.tensor([float((weights or {}).get(i, 1.0)) for i in ids], dtype=torch.float64)
        if not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError(f"aggregate: weights must be finite, >= 0 and not all 0, got {weights}")
        w = w / w.sum()
        with ExitStack() as stack:
            for body in bodies:  # every copy at once: no step runs on a half-averaged sub-server
                stack.enter_context(body.lock.write())
            states = [self._subs[i].model.state_dict() for i in ids]
            mean = {k: sum(wi * s[k].double() for wi, s in zip(w, states)).to(states[0][k].dtype) for k in states[0]}
            with torch.no_grad():
                for body in bodies:
                    body.model.load_state_dict(mean)

    def _forward_full(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        """FL-GLM-style step without caches: the whole prefix's hidden states and its 4-D mask, every token."""
        hidden = self._check_hidden(tensors)
        b, length = hidden.shape[:2]
        mask = self._mask(tensors, b, length)
        with self._main.lock.read(), torch.no_grad():
            pos = torch.arange(length, device=hidden.device)[None].expand(b, -1)
            return {"hidden": self.model.body(hidden, mask, pos)}, {}

    def _partition(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        a, c = _meta_int(meta, "a"), _meta_int(meta, "c")
        with self._lock, self._main.lock.write():
            try:
                self.model.set_partition(a, c)
            except (KeyError, ValueError, TypeError) as exc:
                raise ProtocolError(str(exc)) from exc
            self._main = _Body(self.model, self.args, self._main.lock)
            self._subs.clear(), self._pending.clear(), self._sessions.clear(), self._trainers.clear()
            self._awaiting_step.clear()
            self._release_turn(self._turn_owner)
        return {}, {"a": self.model.config.num_input_blocks, "c": self.model.config.num_output_blocks}


__all__ = ["ServerLimits", "SplitServer", "prepare_body"]
