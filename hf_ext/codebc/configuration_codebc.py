"""CodeBC's base-model configuration: a LLaMA decoder whose vocabulary carries the FIM and security-tag tokens.

This file is copied next to the weights when a CodeBC model is saved (transformers' `register_for_auto_class`), so
it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.
"""

from __future__ import annotations

import math

from huggingface_hub.errors import StrictDataclassError
from transformers import LlamaConfig


class CodeBCConfig(LlamaConfig):
    r"""Configuration of the CodeBC base model ([CodeBC, arXiv 2504.21043](https://arxiv.org/abs/2504.21043)):
    a LLaMA decoder pretrained on Solidity, later fine-tuned through code infilling → vulnerability detection →
    tag-guided instruction tuning with one LoRA adapter.

    The paper fine-tunes CodeLlama-7B; here the base is a tiny randomly initialised LLaMA pretrained by causal LM on
    the Solidity corpus (no code LLM ships offline). All LLaMA arguments apply; CodeBC adds:

    Args:
        security_tags (`list[str]`, defaults to `["correct", "bug"]`): the tag vocabulary (`correct` = secure).
        tag_token_ids (`dict[str, int]`, *optional*): ids of `[Tag]`, `[/Tag]`, `[INST]`, `[/INST]`, `<PRE>`,
            `<SUF>`, `<MID>`, `<EOT>` in the tokenizer the model was trained with (filled in by the tokenizer
            builder; informative, the tokenizer is the source of truth).
    """

    model_type = "hf_ext_codebc"

    security_tags: list[str] | None = None
    tag_token_ids: dict[str, int] | None = None

    def __setattr__(self, name, value):
        # LlamaConfig's fields are type- and range-checked on assignment by huggingface_hub's strict dataclasses, whose
        # error is neither a ValueError nor a TypeError: re-raised as a ValueError naming the field (kept as the cause)
        try:
            super().__setattr__(name, value)
        except StrictDataclassError as err:
            raise ValueError(f"CodeBCConfig.{name}={value!r} is refused: {err}") from err

    def __post_init__(self, **kwargs):
        if self.security_tags is None:
            self.security_tags = ["correct", "bug"]
        self.security_tags = [str(t) for t in self.security_tags]
        if self.tag_token_ids is None:
            self.tag_token_ids = {}
        self.tag_token_ids = {str(k): int(v) for k, v in self.tag_token_ids.items()}
        self.validate_sizes()  # before LlamaConfig divides by num_attention_heads
        super().__post_init__(**kwargs)
        if len(set(self.security_tags)) != len(self.security_tags) or len(self.security_tags) < 2:
            raise ValueError(f"CodeBCConfig.security_tags must hold >= 2 distinct tags, got {self.security_tags}")
        bad = {k: v for k, v in self.tag_token_ids.items() if not 0 <= v < self.vocab_size}
        if bad:
            raise ValueError(f"CodeBCConfig.tag_token_ids outside the vocabulary (size {self.vocab_size}): {bad}")
        for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            value = getattr(self, name, None)
            if isinstance(value, int) and not 0 <= value < self.vocab_size:
                raise ValueError(f"CodeBCConfig.{name}={value} must lie in [0, vocab_size={self.vocab_size})")

    def validate_sizes(self) -> None:
        """Zero, negative or NaN sizes fail here, naming the field, not later inside torch."""
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"CodeBCConfig.{name} must be an integer >= 1, got {value!r}")
        kv = self.num_key_value_heads if self.num_key_value_heads is not None else self.num_attention_heads
        if isinstance(kv, bool) or not isinstance(kv, int) or kv < 1 or self.num_attention_heads % kv:
            raise ValueError(
                f"CodeBCConfig.num_key_value_heads must be >= 1 and divide num_attention_heads="
                f"{self.num_attention_heads}, got {kv!r}"
            )
        if getattr(self, "head_dim", None) is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"CodeBCConfig.hidden_size={self.hidden_size} must be divisible by num_attention_heads="
                f"{self.num_attention_heads}"
            )
        dropout = self.attention_dropout
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:  # NaN fails
            raise ValueError(f"CodeBCConfig.attention_dropout must be a number in [0, 1), got {dropout!r}")
        std = self.initializer_range
        if isinstance(std, bool) or not isinstance(std, (int, float)) or not 0 <= std < math.inf:
            raise ValueError(f"CodeBCConfig.initializer_range must be a finite number >= 0, got {std!r}")
        eps = self.rms_norm_eps
        if not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise ValueError(f"CodeBCConfig.rms_norm_eps must be a finite number > 0, got {eps!r}")
