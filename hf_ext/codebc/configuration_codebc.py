"""CodeBC's base-model configuration: a LLaMA decoder whose vocabulary carries the FIM and security-tag tokens.

This file is copied next to the weights when a CodeBC model is saved (transformers' `register_for_auto_class`), so
it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.
"""

from __future__ import annotations

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

    def __post_init__(self, **kwargs):
        if self.security_tags is None:
            self.security_tags = ["correct", "bug"]
        self.security_tags = [str(t) for t in self.security_tags]
        if self.tag_token_ids is None:
            self.tag_token_ids = {}
        self.tag_token_ids = {str(k): int(v) for k, v in self.tag_token_ids.items()}
        super().__post_init__(**kwargs)
        if len(set(self.security_tags)) != len(self.security_tags) or len(self.security_tags) < 2:
            raise ValueError(f"CodeBCConfig.security_tags must hold >= 2 distinct tags, got {self.security_tags}")
        bad = {k: v for k, v in self.tag_token_ids.items() if not 0 <= v < self.vocab_size}
        if bad:
            raise ValueError(f"CodeBCConfig.tag_token_ids outside the vocabulary (size {self.vocab_size}): {bad}")
