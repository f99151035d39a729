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
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import DynamicCache

from .arguments import FlLlamaTrainingArguments, PartOptimizer, apply_lora
from .checkpoint import load_party_checkpoint, save_party_checkpoint
from .modeling_fl_llama import FlLlamaServerModel, causal_mask_4d, padding_mask_from_counts, position_ids_from_mask
from .transport import FLOAT_DTYPES, AccessDenied, Meta, ProtocolError, Tensors, decode, encode, expect_tensor

_BATCH = "__batch__"  # the owner of a client-batch step (each client's hello is checked in handle_batch)


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
    """

    max_seq_len: int | None = None
    max_batch: int = 64
    max_message_bytes: int = 64 * 1024 * 1024
    max_sessions: int = 64
    max_sessions_per_client: int = 8
    max_pending: int = 64

    def __post_init__(self):
        for name in ("max_batch", "max_message_bytes", "max_sessions", "max_sessions_per_client", "max_pending"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ServerLimits.{name} must be an integer >= 1, got {value!r}")
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


class _Body:
    """One copy of part B with its optimiser (the server has one, or one per client in hierarchical mode)."""

    def __init__(self, model: FlLlamaServerModel, args: FlLlamaTrainingArguments):
        self.model = model
        self.optimizer = PartOptimizer(prepare_body(model), args)


class SplitServer:
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

    Methods on the wire: `hello` (the handshake: `(a, c)`, model hash, sizes and, to train, the schedule length
    `max_steps`), `forward` (`hidden`, `n_real` or the uncompressed `mask`, `position_ids`), `backward` (`grad`),
    `save` (checkpoint part B and its optimiser), `prefill` / `decode` / `end` (split generation with a KV cache per
    session, any batch, left padding), `forward_full` (the FL-GLM-style no-cache step: the whole prefix and its 4-D
    mask), `partition` (move `(a, c)`). Training messages (`forward` with `train`, `backward`) are refused from a
    client that has not completed a training `hello`.

    The learning-rate schedule's length: `args.max_steps` when given (a client asking another length is refused),
    else the first training client's `max_steps`, fixed from then on (and saved in checkpoints).
    """

    def __init__(self, model: FlLlamaServerModel, args: FlLlamaTrainingArguments | None = None,
                 hierarchical: bool = False, limits: ServerLimits | None = None,
                 output_dir: str | os.PathLike | None = None, save_total_limit: int = 2):  # fmt: skip
        self.args = args or FlLlamaTrainingArguments()
        self.model, self.hierarchical = model, hierarchical
        self.limits = limits or ServerLimits()
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.save_total_limit = int(save_total_limit)
        self._main = _Body(model, self.args)
        self._subs: dict[str, _Body] = {}
        self._pending: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._sessions: dict[tuple[str, str], tuple[DynamicCache, torch.Tensor]] = {}
        self._trainers: set[str] = set()  # owners whose training handshake succeeded
        self._schedule_fixed = self.args.max_steps is not None
        self._lock = threading.Lock()
        self._batch_parts = 1
        self.steps = 0

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
            out, out_meta = self.handle(method, tensors, meta, principal=principal)
            return encode(method, out, out_meta)
        except ProtocolError as exc:
            return encode("error", meta={"kind": "protocol", "message": str(exc)})
        except AccessDenied as exc:
            return encode("error", meta={"kind": "access", "message": str(exc)})
        except Exception as exc:  # noqa: BLE001  (reported to the peer; the server keeps serving)
            return encode("error", meta={"kind": "remote", "message": f"{type(exc).__name__}: {exc}"})

    def handle(self, method: str, tensors: Tensors, meta: Meta, principal=None) -> tuple[Tensors, Meta]:
        """Runs one decoded request for its owner: the authenticated `principal`'s name, or (in-process, no
        principal) the message's `client_id`."""
        handlers = {"hello": self._hello, "forward": self._forward, "backward": self._backward, "save": self._save,
                    "prefill": self._prefill, "decode": self._decode, "end": self._end,
                    "forward_full": self._forward_full, "partition": self._partition}  # fmt: skip
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
        joined = {k: torch.cat([t[k] for _, t, _ in decoded]) for k in decoded[0][1]}
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
        """Refuses a client whose partition, model or sizes differ from this server's, and (to train) agrees the
        schedule length; every refusal names both values."""
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
        if meta.get("purpose", "train") == "train":
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

    def _set_schedule(self, max_steps: int | None) -> None:
        self.args = dataclasses.replace(self.args, max_steps=max_steps)
        self._schedule_fixed = True
        self._main = _Body(self.model, self.args)
        for key, sub in self._subs.items():
            self._subs[key] = _Body(sub.model, self.args)

    def _require_training_hello(self, owner: str) -> None:
        if owner != _BATCH and owner not in self._trainers:
            raise ProtocolError(
                f"client {owner!r} sent a training message before a training 'hello' (the "
                "(a, c, model hash, max_steps) handshake)"
            )

    # ---- training ----------------------------------------------------------------------------------------------
    def _body_for(self, client_id: str) -> _Body:
        if not self.hierarchical:
            return self._main
        with self._lock:
            if client_id not in self._subs:
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
        if train:
            self._require_training_hello(owner)
        if train and client_id not in self._pending and len(self._pending) >= self.limits.max_pending:
            raise ProtocolError(
                f"{len(self._pending)} clients already have a pending forward (max_pending={self.limits.max_pending})"
            )
        if self.hierarchical and client_id not in self._subs and len(self._subs) >= self.limits.max_pending:
            raise ProtocolError(f"{len(self._subs)} sub-servers exist already (max_pending={self.limits.max_pending})")
        body = self._body_for(client_id)
        if not train:
            with torch.no_grad():
                return {"hidden": body.model.body(hidden, mask, pos)}, {}
        leaf = hidden.clone().requires_grad_(True)
        with torch.enable_grad():  # in-process, the call arrives from inside the client's autograd.Function
            out = body.model.body(leaf, mask, pos)
        self._pending[client_id] = (leaf, out)
        return {"hidden": out.detach()}, {}

    def _backward(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        client_id = owner
        self._require_training_hello(owner)
        if client_id not in self._pending:
            raise ProtocolError(f"backward from client {client_id!r} without a pending forward")
        leaf, out = self._pending[client_id]
        grad = expect_tensor(tensors, "grad", ndim=3, dtype=FLOAT_DTYPES, shape=dict(enumerate(out.shape)))
        _finite("grad", grad)
        del self._pending[client_id]
        with torch.enable_grad():
            out.backward(grad.to(out.dtype))
        self._body_for(client_id).optimizer.step()
        self.steps += 1
        return {"grad": leaf.grad}, {}

    def save_checkpoint(self, path: str | os.PathLike) -> Path:
        """Part B's weights (adapters included), its optimiser and schedule position, the step count and the
        handshake's values, written atomically (safetensors + JSON). In server-hierarchical mode the main copy is
        saved: call [`aggregate`] first."""
        cfg = self.model.config
        state = {"steps": self.steps, "max_steps": self.args.max_steps, "a": int(cfg.num_input_blocks),
                 "c": int(cfg.num_output_blocks), "model_hash": cfg.model_hash()}  # fmt: skip
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
        if self._schedule_fixed and state["max_steps"] != self.args.max_steps:
            raise ValueError(
                f"checkpoint {path} runs its schedule over max_steps={state['max_steps']}, this server "
                f"was started with max_steps={self.args.max_steps}"
            )
        self._set_schedule(state["max_steps"])
        load_party_checkpoint(path, self.model, "server.safetensors", {"body": self._main.optimizer})
        self.steps = int(state["steps"])
        self._pending.clear(), self._sessions.clear()
        return state

    def _save(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        if self.output_dir is None:
            raise ProtocolError("this server has no output directory (start it with --output-dir) to save into")
        if self._pending:
            raise ProtocolError(f"cannot save between a forward and its backward (pending: {sorted(self._pending)})")
        path = self.save_checkpoint(self.output_dir / f"checkpoint-{self.steps}")
        kept = sorted(self.output_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])
                      if p.name.split("-")[1].isdigit() else -1)  # fmt: skip
        for old in kept[: max(0, len(kept) - self.save_total_limit)]:
            shutil.rmtree(old, ignore_errors=True)
        return {}, {"checkpoint": path.name, "steps": self.steps}

    def aggregate(self, weights: dict[str, float] | None = None) -> None:
        """FedAvg of the sub-servers' parameters (weighted by `weights`, e.g. samples seen), broadcast to every
        sub-server and to the main copy. Optimiser states stay per sub-server."""
        if not self._subs:
            return
        ids = sorted(self._subs)
        w = torch.tensor([float((weights or {}).get(i, 1.0)) for i in ids], dtype=torch.float64)
        w = w / w.sum()
        states = [self._subs[i].model.state_dict() for i in ids]
        mean = {k: sum(wi * s[k].double() for wi, s in zip(w, states)).to(states[0][k].dtype) for k in states[0]}
        with torch.no_grad():
            for body in [self._main] + [self._subs[i] for i in ids]:
                body.model.load_state_dict(mean)

    # ---- split generation --------------------------------------------------------------------------------------
    def _session(self, meta: Meta, owner: str) -> tuple[str, str]:
        session = meta.get("session", "0")
        if not isinstance(session, (str, int)) or isinstance(session, bool) or len(str(session)) > 128:
            raise ProtocolError(f"meta field 'session' must be a string of at most 128 characters, got {session!r}")
        return owner, str(session)  # a session belongs to its owner: another client's name finds nothing

    def _prefill(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        hidden = self._check_hidden(tensors)
        b, length = hidden.shape[:2]
        key = self._session(meta, owner)
        if key not in self._sessions:
            mine = sum(1 for o, _ in self._sessions if o == owner)
            if mine >= self.limits.max_sessions_per_client:
                raise ProtocolError(
                    f"client {owner!r} has {mine} open sessions (max_sessions_per_client="
                    f"{self.limits.max_sessions_per_client}); end one first"
                )
            if len(self._sessions) >= self.limits.max_sessions:
                raise ProtocolError(
                    f"{len(self._sessions)} sessions are open (max_sessions={self.limits.max_sessions})"
                )
        n_real = tensors.get("n_real", torch.full((b,), length, dtype=torch.long))
        mask2d = padding_mask_from_counts(self._check_counts(n_real, b, length), length)
        pos = position_ids_from_mask(mask2d)
        if "position_ids" in tensors:
            pos = self._check_positions(expect_tensor(tensors, "position_ids", ndim=2, dtype=torch.int64,
                                                      shape={0: b, 1: length}))  # fmt: skip
        cache = DynamicCache()
        with torch.no_grad():
            out = self.model.body(hidden, causal_mask_4d(mask2d, length), pos, cache)
        self._sessions[key] = (cache, mask2d)
        return {"hidden": out}, {}

    def _decode(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        session = self._session(meta, owner)
        if session not in self._sessions:
            raise ProtocolError(f"decode for unknown session {session[1]!r} of client {owner!r}: send prefill first")
        cache, mask2d = self._sessions[session]
        b, d = mask2d.shape[0], self.model.config.hidden_size
        hidden = _finite(
            "hidden", expect_tensor(tensors, "hidden", ndim=3, dtype=FLOAT_DTYPES, shape={0: b, 1: 1, 2: d})
        )
        expected = mask2d.sum(-1, keepdim=True)  # a new token's position = the real tokens before it (left pads)
        if "position_ids" in tensors:
            pos = expect_tensor(tensors, "position_ids", ndim=2, dtype=torch.int64, shape={0: b, 1: 1})
        else:
            pos = torch.full((b, 1), _meta_int(meta, "position", int(mask2d.shape[1])), dtype=torch.long)
        if not torch.equal(pos, expected):
            raise ProtocolError(
                f"decode position {pos.flatten().tolist()} does not follow the cached "
                f"{expected.flatten().tolist()} tokens"
            )
        if mask2d.shape[1] >= self.max_seq_len:
            raise ProtocolError(
                f"decode position {mask2d.shape[1]} reaches max_seq_len={self.max_seq_len}; end the session"
            )
        mask2d = torch.cat([mask2d, torch.ones(b, 1, dtype=torch.bool)], dim=1)  # one more visible column
        with torch.no_grad():
            out = self.model.body(hidden, causal_mask_4d(mask2d, 1), pos, cache)
        self._sessions[session] = (cache, mask2d)
        return {"hidden": out}, {}

    def _end(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        self._sessions.pop(self._session(meta, owner), None)
        return {}, {}

    def _forward_full(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        """FL-GLM-style step without caches: the whole prefix's hidden states and its 4-D mask, every token."""
        hidden = self._check_hidden(tensors)
        b, length = hidden.shape[:2]
        mask = self._mask(tensors, b, length)
        with torch.no_grad():
            return {"hidden": self.model.body(hidden, mask, torch.arange(length)[None].expand(b, -1))}, {}

    def _partition(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        a, c = _meta_int(meta, "a"), _meta_int(meta, "c")
        try:
            self.model.set_partition(a, c)
        except (KeyError, ValueError, TypeError) as exc:
            raise ProtocolError(str(exc)) from exc
        self._main = _Body(self.model, self.args)
        self._subs.clear(), self._pending.clear(), self._sessions.clear(), self._trainers.clear()
        return {}, {"a": self.model.config.num_input_blocks, "c": self.model.config.num_output_blocks}


__all__ = ["ServerLimits", "SplitServer", "prepare_body"]
