"""FL-LLaMA partition configurations: one per party's artifact (the client's head + tail, the server's body).

This file is copied next to the weights when a part is saved (transformers' `register_for_auto_class`), so it
imports nothing from hf_ext: a Hub user loads a part with `trust_remote_code=True` without hf_ext installed.

Two configuration classes, not one with a `role` field: the client and the server are different organisations that
each hold (and publish) only their own part, and `AutoModel` maps one model class per config class.
"""

from __future__ import annotations

import hashlib
import json
import math

from transformers import LlamaConfig, PreTrainedConfig


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_int(owner: str, name: str, value, low: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not _is_int(value) or value < low:
        extra = " or None" if optional else ""
        raise (TypeError if not _is_int(value) else ValueError)(
            f"{owner}.{name} must be an integer >= {low}{extra}, got {value!r}"
        )


def _check_real(owner: str, name: str, value, low: float, high: float | None = None, low_open: bool = False) -> None:
    if not _is_real(value):
        raise (TypeError if not isinstance(value, (int, float)) or isinstance(value, bool) else ValueError)(
            f"{owner}.{name} must be a finite number, got {value!r}"
        )
    if value < low or (low_open and value == low) or (high is not None and value >= high):
        bounds = f"{'>' if low_open else '>='} {low}" + (f" and < {high}" if high is not None else "")
        raise ValueError(f"{owner}.{name} must be {bounds}, got {value!r}")


def _check_str_list(owner: str, name: str, value, allowed: set[str] | None = None) -> None:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise TypeError(f"{owner}.{name} must be a list of non-empty strings, got {value!r}")
    if allowed is not None and set(value) - allowed:
        raise ValueError(f"{owner}.{name} must be a subset of {sorted(allowed)}, got {sorted(set(value) - allowed)}")


class FlLlamaConfig(PreTrainedConfig):
    r"""Partition of a LLaMA causal LM between a client and a server
    ([FL-LLaMA / FedSEA-LLaMA, arXiv 2505.15683](https://arxiv.org/abs/2505.15683)).

    The client holds part A (`embed_tokens` + blocks `[0, a)`) and part C (blocks `[L - c, L)` + final RMSNorm +
    `lm_head` + the loss); the server holds part B (blocks `[a, L - c)`). Labels and token ids never leave the client.

    Args:
        llama_config (`dict`): `LlamaConfig.to_dict()` of the full model being split (L = its `num_hidden_layers`).
        num_input_blocks (`int`, defaults to 1): `a`, blocks in the client's head.
        num_output_blocks (`int`, defaults to 1): `c`, blocks in the client's tail.
        client_stored_blocks (`int`, *optional*): `K`, how many first and last blocks the client artifact stores
            (defaults to `max(a, c)`). The server artifact stores blocks `[1, L - 1)`. Any `(a, c)` with
            `1 <= a, c <= K` and `a + c < L` re-partitions the same stored weights, as the official code's
            "adaptive" partition does (it stores 5 + 5 client blocks and 30 server blocks).
        noise_scale (`float`, defaults to 0.0): `s`; the client adds `N(0, σ²)` with `σ = s·sqrt(π/2)` (so that
            `E|ε| = s`) to every hidden state it sends.
        lora_rank (`int`, defaults to 0): LoRA rank on each part (0: full fine-tuning of the part).
        lora_alpha (`float`, defaults to 16.0): LoRA scaling numerator.
        lora_dropout (`float`, defaults to 0.05): LoRA dropout.
        lora_target_modules (`list[str]`, *optional*): modules carrying LoRA (defaults to q, k, v, o projections).
        lora_parts (`list[str]`, *optional*): which parts carry LoRA, a subset of `["head", "body", "tail"]`
            (defaults to all three). With `lora_rank > 0` a listed part trains only its adapters and a part left out is
            frozen (client and server alike); with `lora_rank = 0` every part is fully fine-tuned and this is unused.
        base_model_hash (`str`, *optional*): SHA-256 of the full model the parts were split from (its config and
            every weight; set by `split_llama`). Client and server compare it at the handshake, so parts split from
            different models refuse to train together.
    """

    model_type = "hf_ext_fl_llama"

    llama_config: dict | None = None
    num_input_blocks: int = 1
    num_output_blocks: int = 1
    client_stored_blocks: int | None = None
    noise_scale: float = 0.0
    lora_rank: int = 0
    lora_alpha: float = 16.0
    lora_dropout: float = 0.05
    lora_target_modules: list[str] | None = None
    lora_parts: list[str] | None = None
    base_model_hash: str | None = None

    def __post_init__(self, **kwargs):
        if self.llama_config is not None and not isinstance(self.llama_config, dict):
            raise TypeError(
                f"{type(self).__name__}.llama_config must be a dict (LlamaConfig.to_dict()), "
                f"got {type(self.llama_config).__name__}"
            )
        if self.llama_config is None:
            self.llama_config = LlamaConfig(
                vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=256,
            ).to_dict()  # fmt: skip
        # JSON-canonical (int dict keys become strings) so the config is the same before and after a save/load
        self.llama_config = json.loads(json.dumps(dict(self.llama_config)))
        self._check_fields()
        if self.client_stored_blocks is None:
            self.client_stored_blocks = max(int(self.num_input_blocks), int(self.num_output_blocks))
        if self.lora_target_modules is None:
            self.lora_target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]
        if self.lora_parts is None:
            self.lora_parts = ["head", "body", "tail"]
        # The parts tie lm_head to the embeddings exactly when the split model does (SmolLM2 does, tiny ones not).
        self.tie_word_embeddings = bool(self.llama_config.get("tie_word_embeddings", False))
        super().__post_init__(**kwargs)
        self.validate_partition()

    def _check_fields(self) -> None:
        """Types and ranges of every field, at construction and on load (`from_pretrained` builds the config through
        `__init__`); each error names the field."""
        name = type(self).__name__
        for key in ("num_hidden_layers", "hidden_size", "vocab_size", "num_attention_heads"):
            value = self.llama_config.get(key)
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name}.llama_config[{key!r}] must be an integer >= 1, got {value!r}")
        _check_int(name, "num_input_blocks", self.num_input_blocks, 1)
        _check_int(name, "num_output_blocks", self.num_output_blocks, 1)
        _check_int(name, "client_stored_blocks", self.client_stored_blocks, 1, optional=True)
        _check_real(name, "noise_scale", self.noise_scale, 0.0)
        _check_int(name, "lora_rank", self.lora_rank, 0)
        _check_real(name, "lora_alpha", self.lora_alpha, 0.0, low_open=True)
        _check_real(name, "lora_dropout", self.lora_dropout, 0.0, 1.0)
        if self.lora_target_modules is not None:
            _check_str_list(name, "lora_target_modules", self.lora_target_modules)
        if self.lora_parts is not None:
            _check_str_list(name, "lora_parts", self.lora_parts, {"head", "body", "tail"})
        if self.base_model_hash is not None and not isinstance(self.base_model_hash, str):
            raise TypeError(f"{name}.base_model_hash must be a string or None, got {self.base_model_hash!r}")

    @property
    def base(self) -> LlamaConfig:
        """The full model's `LlamaConfig` (eager attention is not forced: the parts pass an explicit 4-D mask)."""
        return LlamaConfig.from_dict(self.llama_config)

    @property
    def num_layers(self) -> int:
        return int(self.llama_config["num_hidden_layers"])

    @property
    def hidden_size(self) -> int:
        return int(self.llama_config["hidden_size"])

    @property
    def noise_std(self) -> float:
        """`σ = s·sqrt(π/2)`: the half-normal mean identity `E|N(0, σ²)| = σ·sqrt(2/π)` makes `E|ε| = s`."""
        _check_real(type(self).__name__, "noise_scale", self.noise_scale, 0.0)  # also after an attribute assignment
        return float(self.noise_scale) * math.sqrt(math.pi / 2)

    def model_hash(self) -> str:
        """What the handshake compares: `base_model_hash`, or (parts built without `split_llama`) the SHA-256 of the
        full model's config, which at least pins the architecture."""
        if self.base_model_hash:
            return str(self.base_model_hash)
        return hashlib.sha256(json.dumps(self.llama_config, sort_keys=True).encode()).hexdigest()

    def validate_partition(self, a: int | None = None, c: int | None = None) -> None:
        """Checks a partition (this config's, or `(a, c)`); every failure is a `ValueError` naming the field."""
        name = type(self).__name__
        a = self.num_input_blocks if a is None else a
        c = self.num_output_blocks if c is None else c
        _check_int(name, "num_input_blocks (a)", a, -(2**62))
        _check_int(name, "num_output_blocks (c)", c, -(2**62))
        n = self.num_layers
        if a < 1 or c < 1:
            raise ValueError(f"{name}: num_input_blocks (a={a}) and num_output_blocks (c={c}) must both be >= 1")
        if a + c >= n:
            raise ValueError(
                f"{name}: a + c must be < the number of layers so the server keeps at least one block; "
                f"got a={a}, c={c}, num_hidden_layers={n}"
            )
        k = int(self.client_stored_blocks)
        if a > k or c > k:
            raise ValueError(
                f"{name}: the client stores only its first and last client_stored_blocks={k} blocks; "
                f"a={a}, c={c} needs a new client artifact with client_stored_blocks >= {max(a, c)}"
            )
        self._check_fields()


class FlLlamaClientConfig(FlLlamaConfig):
    r"""[`FlLlamaConfig`] of the client's artifact: embeddings, the first and last `client_stored_blocks` blocks,
    the final norm and `lm_head` (see [`FlLlamaClientModel`])."""

    model_type = "hf_ext_fl_llama_client"


class FlLlamaServerConfig(FlLlamaConfig):
    r"""[`FlLlamaConfig`] of the server's artifact: blocks `[1, L - 1)` (see [`FlLlamaServerModel`])."""

    model_type = "hf_ext_fl_llama_server"


__all__ = ["FlLlamaClientConfig", "FlLlamaConfig", "FlLlamaServerConfig"]
