"""CodeBC's base model: `LlamaForCausalLM` under its own config class, so it has its own Auto registration.

Self-contained (copied next to the weights by `register_for_auto_class`); imports nothing from hf_ext. The CodeBC
stages add one PEFT LoRA adapter (r 8, α 32, dropout 0.1 on `q_proj`/`v_proj`) on top of this model.
"""

from __future__ import annotations

from transformers import LlamaForCausalLM

from .configuration_codebc import CodeBCConfig


class CodeBCForCausalLM(LlamaForCausalLM):
    """A LLaMA causal LM with a [`CodeBCConfig`]; behaviour is LLaMA's, the security tags live in the vocabulary."""

    config_class = CodeBCConfig
