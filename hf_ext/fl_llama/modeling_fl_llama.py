"""FL-LLaMA parts: the client's head (A) and tail (C) and the server's body (B) of a split LLaMA causal LM.

* [`FlLlamaClientModel`]: `embed_tokens` + blocks `[0, a)` (part A) and blocks `[L - c, L)` + RMSNorm + `lm_head`
  + the loss (part C). It stores the first and last `client_stored_blocks` blocks so `(a, c)` can move.
* [`FlLlamaServerModel`]: blocks `[a, L - c)` (part B), out of the stored blocks `[1, L - 1)`.

The blocks are transformers' own `LlamaDecoderLayer`s, so every part computes exactly what the centralized
`LlamaForCausalLM` computes; only the 4-D attention mask is built by the parts themselves (the server rebuilds it from
per-row real-token counts, "attention-mask compression"). Paper: [arXiv 2505.15683](https://arxiv.org/abs/2505.15683).

This file is copied next to the weights on save, so it imports only torch, transformers and its sibling config.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel
from transformers import initialization as init
from transformers.loss.loss_utils import ForCausalLMLoss
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

from .configuration_fl_llama import FlLlamaClientConfig, FlLlamaConfig, FlLlamaServerConfig


def check_token_ids(input_ids, vocab_size: int) -> None:
    """Token ids must be an integer tensor inside the vocabulary (an id out of range would crash deep inside the
    embedding, or on some devices read another row silently)."""
    if not torch.is_tensor(input_ids) or input_ids.is_floating_point() or input_ids.is_complex() or \
            input_ids.dtype == torch.bool:  # fmt: skip
        got = input_ids.dtype if torch.is_tensor(input_ids) else type(input_ids).__name__
        raise TypeError(f"input_ids must be an integer tensor, got {got}")
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids must have shape (batch, length), got {tuple(input_ids.shape)}")
    if input_ids.numel() and bool((input_ids < 0).any() or (input_ids >= vocab_size).any()):
        raise ValueError(
            f"input_ids must lie in [0, {vocab_size}) (the vocabulary), got values in "
            f"[{int(input_ids.min())}, {int(input_ids.max())}]"
        )


def check_hidden_states(name: str, hidden, hidden_size: int) -> None:
    """A hidden-state tensor `(batch, length, hidden_size)` of finite floats (NaN/Inf would flow on silently)."""
    if not torch.is_tensor(hidden) or not hidden.is_floating_point():
        got = hidden.dtype if torch.is_tensor(hidden) else type(hidden).__name__
        raise TypeError(f"{name} must be a floating-point tensor, got {got}")
    if hidden.ndim != 3 or hidden.shape[-1] != hidden_size:
        raise ValueError(f"{name} must have shape (batch, length, {hidden_size}), got {tuple(hidden.shape)}")
    if not bool(torch.isfinite(hidden).all()):
        raise ValueError(f"{name} holds {int((~torch.isfinite(hidden)).sum())} NaN/Inf value(s)")


def padding_mask_from_counts(n_real: torch.Tensor, length: int) -> torch.Tensor:
    """Rebuilds the left-padded 2-D mask `m[i, j] = 1[j >= L - n_real[i]]` from the per-row real-token counts."""
    cols = torch.arange(length, device=n_real.device)
    return cols[None, :] >= (length - n_real.to(cols.dtype))[:, None]


def position_ids_from_mask(mask2d: torch.Tensor) -> torch.Tensor:
    """Position ids of left-padded rows (`cumsum - 1`, pads at 0), as transformers' `generate` computes them."""
    return (mask2d.long().cumsum(-1) - 1).clamp(min=0)


def causal_mask_4d(mask2d: torch.Tensor, query_length: int) -> torch.Tensor:
    """The boolean 4-D mask `(B, 1, q, T)` (True = attend) of the last `query_length` queries over `T` keys: causal,
    with padded key columns hidden.

    Rows with no visible key (left pads) stay fully masked: torch's SDPA returns zeros for them, exactly what the
    centralized `LlamaForCausalLM` computes (so split and centralized agree even on pad rows, and no NaN appears).
    """
    total = mask2d.shape[-1]
    q_pos = torch.arange(total - query_length, total, device=mask2d.device)
    k_pos = torch.arange(total, device=mask2d.device)
    allowed = (k_pos[None, :] <= q_pos[:, None])[None] & mask2d.bool()[:, None, :]
    return allowed[:, None]


def to_additive(mask4d: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The float additive form of a boolean 4-D mask (0 where visible, the dtype's minimum elsewhere): what FL-GLM
    ships over the wire, and what the uncompressed baseline sends."""
    return torch.zeros(mask4d.shape, dtype=dtype, device=mask4d.device).masked_fill(~mask4d, torch.finfo(dtype).min)


def run_blocks(layers, rotary: nn.Module, hidden: torch.Tensor, mask4d: torch.Tensor, position_ids: torch.Tensor,
               cache=None) -> torch.Tensor:  # fmt: skip
    """Runs `LlamaDecoderLayer`s as `LlamaModel.forward` does (shared rotary embeddings, explicit mask)."""
    position_embeddings = rotary(hidden, position_ids=position_ids)
    for layer in layers:
        hidden = layer(hidden, attention_mask=mask4d, position_ids=position_ids, cache=cache,
                       use_cache=cache is not None, position_embeddings=position_embeddings)  # fmt: skip
    return hidden


class FlLlamaPreTrainedModel(PreTrainedModel):
    config_class = FlLlamaConfig
    base_model_prefix = "fl_llama"
    _no_split_modules = ["LlamaDecoderLayer"]
    supports_gradient_checkpointing = True
    _supports_sdpa = True

    def _init_weights(self, module):
        std = float(self.config.llama_config.get("initializer_range", 0.02))
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, std=std)
        else:  # RMSNorm weights and the rotary `inv_freq` buffers (recomputed, they are not saved)
            super()._init_weights(module)

    def _base_config(self) -> LlamaConfig:
        base = self.config.base
        base._attn_implementation = "sdpa"
        return base

    def set_partition(self, num_input_blocks: int, num_output_blocks: int) -> None:
        """Moves the partition points `(a, c)` over the stored weights (no new checkpoint needed)."""
        self.config.validate_partition(num_input_blocks, num_output_blocks)
        self.config.num_input_blocks, self.config.num_output_blocks = int(num_input_blocks), int(num_output_blocks)


def kept_positions_loss(logits: torch.Tensor, labels: torch.LongTensor, logits_to_keep: int = 0) -> torch.Tensor:
    """Causal-LM loss of logits computed for the last `logits_to_keep` positions only (`0`: all of them), paired
    with those positions' own next-token labels (transformers' loss would pair them with the start of the row)."""
    return ForCausalLMLoss(
        logits, labels[:, -logits_to_keep:] if logits_to_keep else labels, vocab_size=logits.shape[-1]
    )


class FlLlamaClientModel(FlLlamaPreTrainedModel):
    r"""The client's parts of a split LLaMA: head A (`embed_tokens` + blocks `[0, a)`) and tail C (blocks
    `[L - c, L)` + final norm + `lm_head` + loss). Token ids and labels stay here.

    Args:
        config ([`FlLlamaClientConfig`]): the partition and the full model's `LlamaConfig`.
    """

    config_class = FlLlamaClientConfig
    _tied_weights_keys = {"lm_head.weight": "embed_tokens.weight"}

    def __init__(self, config: FlLlamaClientConfig):
        super().__init__(config)
        base = self._base_config()
        k, n = int(config.client_stored_blocks), config.num_layers
        self.embed_tokens = nn.Embedding(base.vocab_size, base.hidden_size, base.pad_token_id)
        self.head_layers = nn.ModuleList(LlamaDecoderLayer(base, i) for i in range(k))
        self.tail_layers = nn.ModuleList(LlamaDecoderLayer(base, i) for i in range(n - k, n))
        self.norm = LlamaRMSNorm(base.hidden_size, eps=base.rms_norm_eps)
        self.lm_head = nn.Linear(base.hidden_size, base.vocab_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(base)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    @property
    def active_head_layers(self) -> list[nn.Module]:
        return list(self.head_layers[: self.config.num_input_blocks])

    @property
    def active_tail_layers(self) -> list[nn.Module]:
        return list(self.tail_layers[len(self.tail_layers) - self.config.num_output_blocks :])

    def head(self, input_ids: torch.LongTensor, mask4d: torch.Tensor, position_ids: torch.LongTensor,
             cache=None) -> torch.Tensor:  # fmt: skip
        """Part A: embeddings and the first `a` blocks; returns `h_A` `(B, q, d)`."""
        check_token_ids(input_ids, self.embed_tokens.num_embeddings)
        hidden = self.embed_tokens(input_ids)
        return run_blocks(self.active_head_layers, self.rotary_emb, hidden, mask4d, position_ids, cache)

    def tail(self, hidden: torch.Tensor, mask4d: torch.Tensor, position_ids: torch.LongTensor, labels=None,
             cache=None, logits_to_keep: int = 0) -> CausalLMOutputWithPast:  # fmt: skip
        """Part C: the last `c` blocks, the final norm, `lm_head` and the causal-LM loss (labels never leave);
        `logits_to_keep > 0` computes only the last positions' logits (generation needs one); with `labels`, the loss
        is then taken over those positions only (their next-token targets), which equals the full loss when every
        other label is `-100` (a cloze answer at the end) and skips the vocabulary projection of the whole prompt."""
        hidden = run_blocks(self.active_tail_layers, self.rotary_emb, hidden, mask4d, position_ids, cache)
        logits = self.lm_head(self.norm(hidden[:, -logits_to_keep:] if logits_to_keep else hidden))
        loss = None if labels is None else kept_positions_loss(logits, labels, logits_to_keep)
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                server_hidden: torch.Tensor | None = None, labels=None,
                **kwargs) -> CausalLMOutputWithPast:  # fmt: skip
        """Local forward of the client alone: `hidden_states` = `h_A`; with `server_hidden` (the body's output for
        the same batch) also the tail's `logits` and `loss`."""
        check_token_ids(input_ids, self.embed_tokens.num_embeddings)
        if server_hidden is not None:
            check_hidden_states("server_hidden", server_hidden, self.config.hidden_size)
        mask2d = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        mask4d = causal_mask_4d(mask2d, input_ids.shape[1])
        pos = position_ids_from_mask(mask2d)
        h_a = self.head(input_ids, mask4d, pos)
        if server_hidden is None:
            return CausalLMOutputWithPast(hidden_states=(h_a,))
        out = self.tail(server_hidden, mask4d, pos, labels=labels)
        out.hidden_states = (h_a,)
        return out


class FlLlamaServerModel(FlLlamaPreTrainedModel):
    r"""The server's part B of a split LLaMA: blocks `[a, L - c)` out of the stored blocks `[1, L - 1)`.

    Args:
        config ([`FlLlamaServerConfig`]): the partition and the full model's `LlamaConfig`.
    """

    config_class = FlLlamaServerConfig

    def __init__(self, config: FlLlamaServerConfig):
        super().__init__(config)
        base = self._base_config()
        self.layers = nn.ModuleList(LlamaDecoderLayer(base, i) for i in range(1, config.num_layers - 1))
        self.rotary_emb = LlamaRotaryEmbedding(base)
        self.post_init()

    @property
    def active_layers(self) -> list[nn.Module]:
        a, c = self.config.num_input_blocks, self.config.num_output_blocks
        return list(self.layers[a - 1 : self.config.num_layers - c - 1])

    def body(self, hidden: torch.Tensor, mask4d: torch.Tensor, position_ids: torch.LongTensor, cache=None):
        """Part B on the (noisy) hidden states received from the client; returns `h_B`."""
        return run_blocks(self.active_layers, self.rotary_emb, hidden, mask4d, position_ids, cache)

    def forward(self, hidden_states: torch.Tensor, n_real: torch.LongTensor | None = None,
                position_ids: torch.LongTensor | None = None, **kwargs) -> CausalLMOutputWithPast:  # fmt: skip
        """`h_B` from `h̃_A` and the per-row real-token counts (the compressed mask); full rows when omitted."""
        check_hidden_states("hidden_states", hidden_states, self.config.hidden_size)
        b, length = hidden_states.shape[:2]
        if n_real is not None and (
            not torch.is_tensor(n_real) or n_real.shape != (b,) or bool((n_real < 1).any() or (n_real > length).any())
        ):
            raise ValueError(f"n_real must be a ({b},) tensor of counts in [1, {length}], got {n_real!r}")
        if n_real is None:
            n_real = torch.full((b,), length, dtype=torch.long, device=hidden_states.device)
        mask2d = padding_mask_from_counts(n_real, length)
        pos = position_ids_from_mask(mask2d) if position_ids is None else position_ids
        out = self.body(hidden_states, causal_mask_4d(mask2d, length), pos)
        return CausalLMOutputWithPast(hidden_states=(out,))


def _sub_state(state: dict, prefix: str) -> dict:
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


def model_sha256(model: LlamaForCausalLM) -> str:
    """SHA-256 of a full model's config and of every tensor (name, dtype, shape, bytes) of its state dict.

    The config's `_name_or_path` is left out: it says where the model was loaded from, not what it is, and a client
    and a server splitting the same weights from two folders must agree at the handshake."""
    import hashlib
    import json

    config = {k: v for k, v in model.config.to_dict().items() if k != "_name_or_path"}
    h = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        if t.numel():
            h.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    return h.hexdigest()


def split_llama(model: LlamaForCausalLM, num_input_blocks: int = 1, num_output_blocks: int = 1,
                client_stored_blocks: int | None = None,
                **partition) -> tuple[FlLlamaClientModel, FlLlamaServerModel]:  # fmt: skip
    """Splits a `LlamaForCausalLM` (HF weights or a tiny config) into the client's and the server's parts.

    Args:
        model (`LlamaForCausalLM`): the full model; its weights are copied, it is left unchanged.
        num_input_blocks (`int`): `a`. num_output_blocks (`int`): `c`.
        client_stored_blocks (`int`, *optional*): first/last blocks the client stores (defaults to `max(a, c)`).
        partition: further [`FlLlamaConfig`] fields (`noise_scale`, `lora_rank`, ...).

    Returns:
        `(FlLlamaClientModel, FlLlamaServerModel)` whose composition computes the model's logits.
    """
    llama = model.config.to_dict()
    partition.setdefault("base_model_hash", model_sha256(model))
    kw = dict(llama_config=llama, num_input_blocks=num_input_blocks, num_output_blocks=num_output_blocks,
              client_stored_blocks=client_stored_blocks, **partition)  # fmt: skip
    client_cfg, server_cfg = FlLlamaClientConfig(**kw), FlLlamaServerConfig(**kw)
    state = model.state_dict()
    n, k = client_cfg.num_layers, int(client_cfg.client_stored_blocks)
    client_state = {"embed_tokens.weight": state["model.embed_tokens.weight"],
                    "norm.weight": state["model.norm.weight"],
                    "lm_head.weight": state.get("lm_head.weight", state["model.embed_tokens.weight"])}  # fmt: skip
    server_state = {}
    for i in range(n):
        block = _sub_state(state, f"model.layers.{i}.")
        if i < k:
            client_state.update({f"head_layers.{i}.{key}": v for key, v in block.items()})
        if i >= n - k:
            client_state.update({f"tail_layers.{i - (n - k)}.{key}": v for key, v in block.items()})
        if 1 <= i < n - 1:
            server_state.update({f"layers.{i - 1}.{key}": v for key, v in block.items()})
    weight = next(model.parameters())  # the parts take the model's dtype and device
    client = FlLlamaClientModel(client_cfg).to(device=weight.device, dtype=weight.dtype)
    server = FlLlamaServerModel(server_cfg).to(device=weight.device, dtype=weight.dtype)
    client.load_state_dict(client_state, strict=False)
    server.load_state_dict(server_state, strict=True)
    client.tie_weights()
    return client, server


def merge_parts(client: FlLlamaClientModel, server: FlLlamaServerModel) -> LlamaForCausalLM:
    """The centralized `LlamaForCausalLM` holding the parts' current weights (inverse of [`split_llama`]) under
    the current partition: blocks `[0, a)` and `[L - c, L)` from the client, the rest from the server."""
    cfg = client.config
    a, c, n, k = cfg.num_input_blocks, cfg.num_output_blocks, cfg.num_layers, int(cfg.client_stored_blocks)
    model = LlamaForCausalLM(cfg.base).to(next(client.parameters()).dtype)
    cs, ss = client.state_dict(), server.state_dict()
    state = {"model.embed_tokens.weight": cs["embed_tokens.weight"], "model.norm.weight": cs["norm.weight"],
             "lm_head.weight": cs["lm_head.weight"]}  # fmt: skip
    for i in range(n):
        if i < a:
            src = _sub_state(cs, f"head_layers.{i}.")
        elif i >= n - c:
            src = _sub_state(cs, f"tail_layers.{i - (n - k)}.")
        else:
            src = _sub_state(ss, f"layers.{i - 1}.")
        state.update({f"model.layers.{i}.{key}": v for key, v in src.items()})
    model.load_state_dict(state, strict=False)
    return model


__all__ = [
    "FlLlamaClientModel",
    "FlLlamaPreTrainedModel",
    "FlLlamaServerModel",
    "causal_mask_4d",
    "to_additive",
    "merge_parts",
    "model_sha256",
    "padding_mask_from_counts",
    "position_ids_from_mask",
    "split_llama",
]
