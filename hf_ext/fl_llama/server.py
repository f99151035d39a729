"""The server party of FL-LLaMA: part B behind a message handler (training, client-batch, server-hierarchical,
split generation with a server-side KV cache).

Every message is checked before use (names, ranks, dtypes, sizes); a bad one is answered with an `error` message
that names the problem, and the server's state is left as it was.
"""

from __future__ import annotations

import copy
import threading

import torch
from transformers import DynamicCache

from .arguments import FlLlamaTrainingArguments, PartOptimizer, apply_lora
from .modeling_fl_llama import FlLlamaServerModel, causal_mask_4d, padding_mask_from_counts
from .transport import FLOAT_DTYPES, Meta, ProtocolError, Tensors, decode, encode, expect_tensor


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

    Methods on the wire: `forward` (`hidden`, `n_real` or the uncompressed `mask`, `position_ids`), `backward`
    (`grad`), `prefill` / `decode` / `end` (split generation with a KV cache per session), `forward_full` (the
    no-cache baseline: the whole prefix and its 4-D mask every step), `partition` (move `(a, c)`).
    """

    def __init__(self, model: FlLlamaServerModel, args: FlLlamaTrainingArguments | None = None,
                 hierarchical: bool = False):  # fmt: skip
        self.args = args or FlLlamaTrainingArguments()
        self.model, self.hierarchical = model, hierarchical
        self._main = _Body(model, self.args)
        self._subs: dict[str, _Body] = {}
        self._pending: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._sessions: dict[str, tuple[DynamicCache, int]] = {}
        self._lock = threading.Lock()
        self.steps = 0

    # ---- wire entry points -------------------------------------------------------------------------------------
    def handle_bytes(self, data: bytes) -> bytes:
        """Decodes one request, runs it and encodes the reply (an `error` reply for a malformed request)."""
        try:
            method, tensors, meta = decode(data)
            out, out_meta = self.handle(method, tensors, meta)
            return encode(method, out, out_meta)
        except ProtocolError as exc:
            return encode("error", meta={"kind": "protocol", "message": str(exc)})
        except Exception as exc:  # noqa: BLE001  (reported to the peer; the server keeps serving)
            return encode("error", meta={"kind": "remote", "message": f"{type(exc).__name__}: {exc}"})

    def handle(self, method: str, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        handlers = {"forward": self._forward, "backward": self._backward, "prefill": self._prefill,
                    "decode": self._decode, "end": self._end, "forward_full": self._forward_full,
                    "partition": self._partition}  # fmt: skip
        if method not in handlers:
            raise ProtocolError(f"unknown method {method!r}; expected one of {sorted(handlers)}")
        return handlers[method](tensors, meta)

    def handle_batch(self, requests: list[bytes]) -> list[bytes]:
        """Client-batch mode: each client's `forward` (or `backward`) message of one step, handled as one batch
        (concatenated on the batch axis, one forward/backward and one optimiser step of B); replies in order."""
        decoded = [decode(r) for r in requests]
        methods = {m for m, _, _ in decoded}
        if len(methods) != 1 or methods.pop() not in ("forward", "backward"):
            raise ProtocolError("a client-batch holds the forward (or backward) messages of one step")
        method = decoded[0][0]
        sizes = [int(t["hidden" if method == "forward" else "grad"].shape[0]) for _, t, _ in decoded]
        joined = {k: torch.cat([t[k] for _, t, _ in decoded]) for k in decoded[0][1]}
        out, _ = self.handle(method, joined, {"client_id": "__batch__", "train": True})
        key = "hidden" if method == "forward" else "grad"
        parts = torch.split(out[key], sizes)
        return [encode(method, {key: p}, {}) for p in parts]

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
        return expect_tensor(tensors, "hidden", ndim=3, dtype=FLOAT_DTYPES, shape={2: d})

    def _mask(self, tensors: Tensors, b: int, length: int) -> torch.Tensor:
        if "n_real" in tensors:  # attention-mask compression: B integers instead of B x L x L
            n_real = expect_tensor(tensors, "n_real", ndim=1, dtype=torch.int64, shape={0: b})
            if bool((n_real < 1).any() or (n_real > length).any()):
                raise ProtocolError(f"n_real must lie in [1, {length}], got {n_real.tolist()}")
            return causal_mask_4d(padding_mask_from_counts(n_real, length), length)
        mask = expect_tensor(tensors, "mask", ndim=4, dtype=FLOAT_DTYPES, shape={0: b, 1: 1, 2: length, 3: length})
        return mask == 0  # the additive float mask as sent by an uncompressed (FL-GLM-style) client

    def _forward(self, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        hidden = self._check_hidden(tensors)
        b, length = hidden.shape[:2]
        pos = expect_tensor(tensors, "position_ids", ndim=2, dtype=torch.int64, shape={0: b, 1: length})
        mask = self._mask(tensors, b, length)
        client_id = str(meta.get("client_id", "0"))
        body = self._body_for(client_id)
        if not meta.get("train", True):
            with torch.no_grad():
                return {"hidden": body.model.body(hidden, mask, pos)}, {}
        leaf = hidden.clone().requires_grad_(True)
        with torch.enable_grad():  # in-process, the call arrives from inside the client's autograd.Function
            out = body.model.body(leaf, mask, pos)
        self._pending[client_id] = (leaf, out)
        return {"hidden": out.detach()}, {}

    def _backward(self, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        client_id = str(meta.get("client_id", "0"))
        if client_id not in self._pending:
            raise ProtocolError(f"backward from client {client_id!r} without a pending forward")
        leaf, out = self._pending[client_id]
        grad = expect_tensor(tensors, "grad", ndim=3, dtype=FLOAT_DTYPES, shape=dict(enumerate(out.shape)))
        del self._pending[client_id]
        with torch.enable_grad():
            out.backward(grad.to(out.dtype))
        self._body_for(client_id).optimizer.step()
        self.steps += 1
        return {"grad": leaf.grad}, {}

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
    def _prefill(self, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        hidden = self._check_hidden(tensors)
        if hidden.shape[0] != 1:
            raise ProtocolError(f"split generation runs with batch 1 (padding removed), got batch {hidden.shape[0]}")
        length = hidden.shape[1]
        pos = torch.arange(length)[None]
        cache = DynamicCache()
        with torch.no_grad():
            mask = causal_mask_4d(torch.ones(1, length, dtype=torch.bool), length)
            out = self.model.body(hidden, mask, pos, cache)
        self._sessions[str(meta.get("session", "0"))] = (cache, length)
        return {"hidden": out}, {}

    def _decode(self, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        session = str(meta.get("session", "0"))
        if session not in self._sessions:
            raise ProtocolError(f"decode for unknown session {session!r}: send prefill first")
        d = self.model.config.hidden_size
        hidden = expect_tensor(tensors, "hidden", ndim=3, dtype=FLOAT_DTYPES, shape={0: 1, 1: 1, 2: d})
        cache, length = self._sessions[session]
        pos = int(meta.get("position", length))
        if pos != length:
            raise ProtocolError(f"decode position {pos} does not follow the cached {length} tokens")
        mask = torch.ones(1, 1, 1, length + 1, dtype=torch.bool)  # the mask grows by one visible column
        with torch.no_grad():
            out = self.model.body(hidden, mask, torch.tensor([[pos]]), cache)
        self._sessions[session] = (cache, length + 1)
        return {"hidden": out}, {}

    def _end(self, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        self._sessions.pop(str(meta.get("session", "0")), None)
        return {}, {}

    def _forward_full(self, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        """FL-GLM-style step without caches: the whole prefix's hidden states and its 4-D mask, every token."""
        hidden = self._check_hidden(tensors)
        b, length = hidden.shape[:2]
        mask = self._mask(tensors, b, length)
        with torch.no_grad():
            return {"hidden": self.model.body(hidden, mask, torch.arange(length)[None].expand(b, -1))}, {}

    def _partition(self, tensors: Tensors, meta: Meta) -> tuple[Tensors, Meta]:
        try:
            self.model.set_partition(int(meta["a"]), int(meta["c"]))
        except (KeyError, ValueError) as exc:
            raise ProtocolError(str(exc)) from exc
        self._main = _Body(self.model, self.args)
        self._subs.clear(), self._pending.clear(), self._sessions.clear()
        return {}, {"a": self.model.config.num_input_blocks, "c": self.model.config.num_output_blocks}


__all__ = ["SplitServer", "prepare_body"]
