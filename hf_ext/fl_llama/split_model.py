"""The client's view of a split LLaMA: [`FlLlamaSplitForCausalLM`] runs part A, adds the noise, sends `h̃_A` through
a transport, runs part C and the loss on the server's `h_B`, and exposes `forward`, a training step, transformers'
`generate` (with a KV cache held by each party, or the no-cache baseline) and a resumable checkpoint.

The boundary is a `torch.autograd.Function`: its forward sends `h̃_A` and receives `h_B`; its backward sends
`g_B = ∂loss/∂h_B` (optionally clipped per sample and noised) and returns the server's `g_A = ∂loss/∂h̃_A`,
which autograd carries into part A (the noise is additive, so the Jacobian of `h̃_A` w.r.t. `h_A` is the identity). One
`loss.backward()` therefore runs steps 3-5 of the protocol, and a plain `transformers.Trainer` can drive it.
"""

from __future__ import annotations

import copy
import math
import uuid
from pathlib import Path

import torch
from torch import nn
from transformers import DynamicCache, GenerationConfig, GenerationMixin
from transformers.modeling_outputs import CausalLMOutputWithPast

from .arguments import FlLlamaTrainingArguments, PartOptimizer, apply_lora
from .checkpoint import load_party_checkpoint, save_party_checkpoint
from .configuration_fl_llama import FlLlamaClientConfig
from .modeling_fl_llama import (
    FlLlamaClientModel,
    FlLlamaPreTrainedModel,
    causal_mask_4d,
    padding_mask_from_counts,
    position_ids_from_mask,  # fmt: skip
    to_additive,
)
from .transport import FLOAT_DTYPES, PeerDisconnected, ProtocolError, Tensors, Transport, expect_tensor


def _reply_tensor(tensors: Tensors, name: str, method: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The server's reply tensor `name`, checked like the server checks what it receives (rank, float dtype, every
    size): a server that answers with the wrong shape fails here, naming the message, not deep inside part C."""
    try:
        t = expect_tensor(tensors, name, ndim=len(shape), dtype=FLOAT_DTYPES, shape=dict(enumerate(shape)))
    except ProtocolError as exc:
        raise ProtocolError(f"server's reply to {method!r} is malformed: {exc}") from exc
    if not bool(torch.isfinite(t).all()):  # part C (or A's gradient) would carry it on silently
        raise ProtocolError(f"server's reply to {method!r}: tensor {name!r} holds NaN/Inf values; refused")
    return t


class _Boundary(torch.autograd.Function):
    """`h_B = B(h̃_A)` computed by the server; backward exchanges `g_B` for `g_A` over the transport."""

    @staticmethod
    def forward(ctx, h_send, split, extra: dict, train: bool):
        out = split._call("forward", {"hidden": h_send, **extra}, {"client_id": split.client_id, "train": train})
        ctx.split, ctx.shape = split, tuple(h_send.shape)
        return _reply_tensor(out, "hidden", "forward", ctx.shape).to(device=h_send.device, dtype=h_send.dtype)

    @staticmethod
    def backward(ctx, grad_b):
        split = ctx.split
        meta = {"client_id": split.client_id}
        if split.args.global_clip:
            meta["global_clip"] = True
        out = split._call("backward", {"grad": split.privatize_gradient(grad_b)}, meta)
        split._server_grad_sq_norm = split._last_meta.get("grad_sq_norm") if split.args.global_clip else None
        grad_a = _reply_tensor(out, "grad", "backward", ctx.shape).to(device=grad_b.device, dtype=grad_b.dtype)
        return grad_a, None, None, None


class FlLlamaSplitCache(DynamicCache):
    """The KV caches of one split generation: the client's own (`DynamicCache` layers of its head blocks `[0, a)` and
    tail blocks `[L - c, L)`, indexed by their global layer numbers) plus the name of the server's session holding
    part B's cache. [`FlLlamaSplitForCausalLM.generate`] makes one per call and ends its server session after it;
    pass your own (`cache=`) to continue a conversation, then call `split.end_session(cache)`.
    """

    def __init__(self, session: str | None = None):
        super().__init__()
        self.session = session or uuid.uuid4().hex[:16]
        self.server_open = False  # whether the server holds this session (after the prefill)


class FlLlamaSplitForCausalLM(FlLlamaPreTrainedModel, GenerationMixin):
    """A client's split model: parts A and C locally, part B behind `transport`.

    A `PreTrainedModel` with `GenerationMixin`, so transformers drives it: `Trainer(model=split)` trains and saves
    checkpoints (tied embeddings stored once), and `generate(**inputs, generation_config=..., streamer=..., top_k=...)`
    runs transformers' own decoding loop, batch > 1 with left padding included, with the KV cache split between the
    parties ([`FlLlamaSplitCache`]): the client sends the prompt's `h̃_A` once (`prefill`), then one `B x 1 x d` vector
    per new token (`decode`). `use_cache=False` is the no-cache baseline that resends the whole prefix every token.

    Args:
        client ([`FlLlamaClientModel`]): the client's parts (its config holds `(a, c)`, the noise scale, LoRA).
        transport ([`~hf_ext.fl_llama.transport.Transport`]): the wire to the server.
        args ([`FlLlamaTrainingArguments`], *optional*): optimisation of parts A and C (one AdamW each).
        client_id (`str`): this client's id (the server keeps per-client state between forward and backward).
        compress_mask (`bool`): send `n_real` (B integers) instead of the B x 1 x L x L additive mask (training and
            the no-cache baseline; cached generation always sends `n_real`).
        generation_config (`GenerationConfig`, *optional*): defaults of `generate` (e.g. the pretrained model's
            `generation_config`, with its EOS ids); by default built from the split model's bos/eos/pad ids.
    """

    config_class = FlLlamaClientConfig
    _no_split_modules = ["LlamaDecoderLayer"]

    def __init__(self, client: FlLlamaClientModel, transport: Transport, args: FlLlamaTrainingArguments | None = None,
                 client_id: str = "0", compress_mask: bool = True,
                 generation_config: GenerationConfig | None = None):  # fmt: skip
        super().__init__(client.config)  # the same config object: a moved partition or noise scale is seen here
        self.client = client
        # post_init gathers the client's tied-weight keys (so save_pretrained stores lm_head once) and initialises
        # nothing: the client's modules are already marked initialised, and LoRA is injected only below.
        self.post_init()
        self.transport, self.client_id = transport, str(client_id)
        self.compress_mask = compress_mask
        self.args = args or FlLlamaTrainingArguments()
        self.noise_generator = torch.Generator().manual_seed(self.args.seed)
        self.head_params, self.tail_params = self._prepare_parameters()
        self.head_optimizer = PartOptimizer(self.head_params, self.args)
        self.tail_optimizer = PartOptimizer(self.tail_params, self.args)
        self.steps = 0
        self.agreed: set[str] = set()  # handshakes done with the current server ("generate", "train")
        self._last_meta: dict = {}  # the meta of the last reply (a global-clip backward carries B's gradient norm)
        self._server_grad_sq_norm: float | None = None
        llama = self.config.llama_config
        self.generation_config = copy.deepcopy(generation_config) if generation_config is not None else \
            GenerationConfig(bos_token_id=llama.get("bos_token_id"), eos_token_id=llama.get("eos_token_id"),
                             pad_token_id=llama.get("pad_token_id"))  # fmt: skip

    def get_input_embeddings(self):
        return self.client.embed_tokens

    def handshake(self, purpose: str = "train") -> dict:
        """Sends `hello`: this client's `(a, c)`, model hash, hidden size, layer count and, with `purpose="train"`,
        its schedule length (`max_steps`). The server refuses any mismatch with an error naming both values; returns
        the server's reply. Made automatically before the first training or generation message."""
        cfg = self.config
        meta = {"client_id": self.client_id, "purpose": purpose, "a": int(cfg.num_input_blocks),
                "c": int(cfg.num_output_blocks), "model_hash": cfg.model_hash(), "hidden_size": cfg.hidden_size,
                "num_layers": cfg.num_layers, "max_steps": self.args.max_steps}  # fmt: skip
        _, reply = self.transport.call("hello", {}, meta)
        self.agreed.add(purpose)
        return reply

    def _call(self, method: str, tensors: Tensors, meta: dict) -> Tensors:
        """One call to the server, after the handshake its purpose needs (made on first use, and again after a lost
        server: a restarted one has not seen this client)."""
        training = method in ("backward", "step") or (method == "forward" and meta.get("train"))
        purpose = "train" if training else "generate"
        if purpose not in self.agreed and "train" not in self.agreed:
            self.handshake(purpose)
        try:
            out, self._last_meta = self.transport.call(method, tensors, meta)
        except PeerDisconnected:
            self.agreed.clear()
            raise
        return out

    def _prepare_parameters(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        cfg, m = self.client.config, self.client
        k, a, c = int(cfg.client_stored_blocks), cfg.num_input_blocks, cfg.num_output_blocks
        head_blocks, tail_blocks = [f"head_layers.{i}" for i in range(a)], [f"tail_layers.{i}" for i in range(k - c, k)]
        m.requires_grad_(False)
        if cfg.lora_rank > 0:
            # Only the adapters of the parts listed in lora_parts train; a part left out stays frozen (the server
            # does the same for the body), so an empty list here is expected and PartOptimizer skips it.
            head_blocks = head_blocks if "head" in cfg.lora_parts else []
            tail_blocks = tail_blocks if "tail" in cfg.lora_parts else []
            params = [(n, p) for n, p in m.named_parameters() if "lora_" in n]
            if not params and head_blocks + tail_blocks:  # one injection for both parts (a second one makes PEFT warn)
                apply_lora(m, head_blocks + tail_blocks, cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout,
                           cfg.lora_target_modules)  # fmt: skip
                params = [(n, p) for n, p in m.named_parameters() if "lora_" in n]
            head = [p for n, p in params if n.split(".self_attn")[0].split(".mlp")[0] in head_blocks]
            tail = [p for n, p in params if n.split(".self_attn")[0].split(".mlp")[0] in tail_blocks]
        else:
            head = [m.embed_tokens.weight] + [p for layer in m.active_head_layers for p in layer.parameters()]
            seen = {id(p) for p in head}  # a tied lm_head is the embedding matrix: trained once, by part A
            tail = [p for layer in m.active_tail_layers for p in layer.parameters()] + [m.norm.weight]
            tail += [m.lm_head.weight] if id(m.lm_head.weight) not in seen else []
        for p in head + tail:
            p.requires_grad_(True)
        return head, tail

    # ---- what leaves the client --------------------------------------------------------------------------------
    def add_noise(self, hidden: torch.Tensor) -> torch.Tensor:
        """`h̃ = h + ε`, `ε ~ N(0, σ²)`, `σ = s·sqrt(π/2)` (a detached copy; no noise when `s = 0`). `ε` is drawn
        from the client's CPU generator and then moved, so a seed gives the same noise on every device."""
        sigma = self.client.config.noise_std
        out = hidden.detach()
        if sigma > 0:
            out = out + sigma * torch.randn(out.shape, generator=self.noise_generator, dtype=out.dtype).to(out.device)
        return out

    def privatize_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        """Optional DP on `g_B`: per-sample L2 clip to `dp_grad_clip`, then `N(0, σ²)` (`--add_DP_gradient`)."""
        if not self.args.dp_gradient:
            return grad
        norms = grad.flatten(1).norm(dim=1).clamp(min=1e-12)
        grad = grad * (self.args.dp_grad_clip / norms).clamp(max=1.0)[:, None, None]
        noise = torch.randn(grad.shape, generator=self.noise_generator, dtype=grad.dtype).to(grad.device)
        return grad + self.client.config.noise_std * noise

    # ---- training ----------------------------------------------------------------------------------------------
    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                labels: torch.LongTensor | None = None, cache: FlLlamaSplitCache | None = None,
                use_cache: bool | None = None, logits_to_keep: int = 0,
                **kwargs) -> CausalLMOutputWithPast:  # fmt: skip
        """Split forward of a left-padded batch; `loss` when `labels` (`-100` = ignored) are given.

        With a [`FlLlamaSplitCache`] (what `generate` passes), `input_ids` are the tokens not yet cached and
        `attention_mask` covers the cached and the new ones; the server's part runs from its own cache. Position ids
        always come from `attention_mask` (left padding), as the server rebuilds them the same way.
        """
        past = cache.get_seq_length() if cache is not None else 0
        b, q = input_ids.shape
        mask2d = (torch.ones(b, past + q, dtype=torch.bool, device=input_ids.device) if attention_mask is None
                  else attention_mask.bool())  # fmt: skip
        total = mask2d.shape[-1]
        if mask2d.ndim != 2 or mask2d.shape[0] != input_ids.shape[0] or total != past + q:
            raise ValueError(
                f"attention_mask of shape {tuple(mask2d.shape)} must be (batch, cached + new tokens) = "
                f"({input_ids.shape[0]}, {past} + {q})"
            )
        n_real = mask2d.sum(-1).long()
        if (self.compress_mask or cache is not None) and not torch.equal(
            padding_mask_from_counts(n_real, total), mask2d
        ):
            raise ValueError(
                "attention-mask compression sends per-row real-token counts, so the batch must be left "
                "padded (tokenizer.padding_side = 'left', no holes); pass compress_mask=False to send "
                "the full mask for training"
            )
        mask4d = causal_mask_4d(mask2d, q)
        pos = position_ids_from_mask(mask2d)[:, -q:]
        h_a = self.client.head(input_ids, mask4d, pos, cache)
        if cache is not None:
            h_b = self._cached_body(h_a, n_real, pos, cache)
        else:
            h_send = self.add_noise(h_a) + (h_a - h_a.detach())  # value exactly h̃_A, gradient identity into h_A
            extra = {"position_ids": pos}
            extra.update({"n_real": n_real} if self.compress_mask else {"mask": to_additive(mask4d)})
            # The server trains (keeps B's graph for a backward) whenever gradients are on, whether or not part A
            # has anything to train: B may have trainable parameters of its own. With a frozen part A, a leaf that
            # requires grad still routes loss.backward() through the boundary to B; the g_A it receives is unused.
            train = torch.is_grad_enabled()
            if train and not h_send.requires_grad:
                h_send = h_send.detach().requires_grad_(True)
            h_b = _Boundary.apply(h_send, self, extra, train)
        return self.client.tail(h_b, mask4d, pos, labels=labels, cache=cache, logits_to_keep=logits_to_keep)

    def _cached_body(self, h_a: torch.Tensor, n_real: torch.Tensor, pos: torch.Tensor,
                     cache: FlLlamaSplitCache) -> torch.Tensor:  # fmt: skip
        """Part B from the server's session cache: `prefill` with the prompt, then `decode` with one token per row."""
        if torch.is_grad_enabled():
            raise ValueError("a cached split forward is for generation (run it under torch.no_grad())")
        hidden = self.add_noise(h_a)
        if not cache.server_open:
            out = self._call("prefill", {"hidden": hidden, "n_real": n_real, "position_ids": pos},
                             {"session": cache.session})  # fmt: skip
            cache.server_open = True
            method = "prefill"
        else:
            if h_a.shape[1] != 1:
                raise ValueError(f"a split decode step sends one token per row, got {h_a.shape[1]}")
            out = self._call("decode", {"hidden": hidden, "position_ids": pos}, {"session": cache.session})
            method = "decode"
        return _reply_tensor(out, "hidden", method, tuple(h_a.shape)).to(device=h_a.device, dtype=h_a.dtype)

    def end_session(self, cache: FlLlamaSplitCache) -> None:
        """Frees the server's KV cache of `cache`'s session (generate does it for the caches it makes)."""
        if cache.server_open:
            cache.server_open = False
            self.transport.call("end", meta={"session": cache.session})

    def prepare_inputs_for_generation(self, input_ids, cache=None, attention_mask=None, **kwargs):
        inputs = super().prepare_inputs_for_generation(input_ids, cache=cache, attention_mask=attention_mask, **kwargs)
        inputs.pop("position_ids", None)  # rebuilt from the mask in forward, exactly as the server rebuilds them
        return inputs

    @torch.no_grad()
    def generate(self, inputs: torch.LongTensor | None = None, generation_config: GenerationConfig | None = None,
                 **kwargs):  # fmt: skip
        """transformers' `generate` through the split model (every argument of `GenerationMixin.generate`).

        Unless `use_cache=False`, a [`FlLlamaSplitCache`] is made for the call and its server session ended after
        it (also when generation fails); a cache passed as `cache=` stays open for the caller to continue.
        """
        use_cache = kwargs.get("use_cache", (generation_config or self.generation_config).use_cache)
        own = None
        if use_cache is not False and kwargs.get("cache") is None:
            own = kwargs["cache"] = FlLlamaSplitCache()
        if isinstance(kwargs.get("cache"), DynamicCache) and not isinstance(kwargs["cache"], FlLlamaSplitCache):
            raise TypeError("pass an FlLlamaSplitCache as `cache` (it names the server's session)")
        self.client.eval()
        try:
            return super().generate(inputs, generation_config=generation_config, **kwargs)
        finally:
            if own is not None:
                try:
                    self.end_session(own)
                except (PeerDisconnected, ProtocolError):
                    pass  # the server is gone or already dropped the session; nothing is left to free

    def train_step(self, batch: dict[str, torch.Tensor], logits_to_keep: int = 0) -> float:
        """One protocol step (forward A -> B -> C, loss, backward C -> B -> A, one optimiser step per part).

        The client steps A and C only once the server has returned `g_A`, so a step interrupted by a lost server or
        a rejected message leaves the client exactly as it was (gradients are dropped, the error is re-raised).
        `logits_to_keep > 0` takes the loss over the last positions only (see `FlLlamaClientModel.tail`).
        """
        self.client.train()
        self._server_grad_sq_norm = None
        coef = None
        try:
            out = self(batch["input_ids"], batch.get("attention_mask"), batch["labels"], logits_to_keep=logits_to_keep)
            out.loss.backward()
            if self.args.global_clip:
                coef = self._global_clip_coef()
                self._call("step", {}, {"client_id": self.client_id, "clip_coef": coef})
        except BaseException:
            self.head_optimizer.zero_grad(), self.tail_optimizer.zero_grad()
            raise
        self.tail_optimizer.step(clip_coef=coef)
        self.head_optimizer.step(clip_coef=coef)
        self.steps += 1
        return float(out.loss.detach())

    def _global_clip_coef(self) -> float:
        """`min(1, max_grad_norm / (‖g‖ + 1e-6))` over the gradients of A, B and C together (torch's
        `clip_grad_norm_` rule over the whole model); 1.0 without `max_grad_norm`."""
        server_sq = self._server_grad_sq_norm
        if isinstance(server_sq, bool) or not isinstance(server_sq, (int, float)) or not math.isfinite(server_sq) \
                or server_sq < 0:  # fmt: skip
            raise ProtocolError(f"the server's backward reply carries no valid 'grad_sq_norm' (got {server_sq!r})")
        if self.args.max_grad_norm is None:
            return 1.0
        total = math.sqrt(self.head_optimizer.grad_sq_norm() + self.tail_optimizer.grad_sq_norm() + server_sq)
        return min(1.0, self.args.max_grad_norm / (total + 1e-6))

    # ---- checkpoints -------------------------------------------------------------------------------------------
    def save_server(self) -> str:
        """Asks the server to checkpoint part B and its optimiser (into its `--output-dir`); returns the
        checkpoint's folder name (`checkpoint-<server step>`). Pair it with [`save_checkpoint`] of the client."""
        if not self.agreed:
            self.handshake()
        _, meta = self.transport.call("save", {}, {"client_id": self.client_id})
        return str(meta["checkpoint"])

    def save_checkpoint(self, path: str | Path, state: dict | None = None) -> Path:
        """The client's weights, both optimisers, the noise generator and the step count (safetensors + JSON),
        written atomically; [`load_checkpoint`] resumes from it. `state` adds JSON fields to `trainer_state.json`
        (e.g. the name of the server checkpoint saved with it)."""
        return save_party_checkpoint(path, self.client, "client.safetensors",
                                     {"head": self.head_optimizer, "tail": self.tail_optimizer},
                                     {**(state or {}), "steps": self.steps, "client_id": self.client_id},
                                     {"noise_generator": self.noise_generator.get_state()})  # fmt: skip

    def load_checkpoint(self, path: str | Path) -> dict:
        """Resumes from [`save_checkpoint`] in place; returns the checkpoint's `trainer_state.json`."""
        state, tensors = load_party_checkpoint(path, self.client, "client.safetensors",
                                               {"head": self.head_optimizer, "tail": self.tail_optimizer})  # fmt: skip
        self.noise_generator.set_state(tensors["noise_generator"])
        self.steps = int(state["steps"])
        return state


__all__ = ["FlLlamaSplitCache", "FlLlamaSplitForCausalLM"]
