"""Tiny configurations the library itself uses at run time (the quick reproduction, the demo's fallback, the
`hf-ext train fl_llama` script): a randomly initialised small `LlamaForCausalLM`, the spec's offline stand-in for
LLaMA-2."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def tiny_llama(vocab_size: int = 1000, hidden_size: int = 64, num_layers: int = 6, num_heads: int = 4,
               max_positions: int = 1280, seed: int = 0, pad_token_id: int = 0) -> LlamaForCausalLM:  # fmt: skip
    """A randomly initialised small `LlamaForCausalLM` (the spec's offline stand-in for LLaMA-2)."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=hidden_size * 2,
                      num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_heads // 2,
                      max_position_embeddings=max_positions, pad_token_id=pad_token_id, bos_token_id=1,
                      eos_token_id=2)  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


__all__ = ["tiny_llama"]
