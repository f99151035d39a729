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


def save_tiny_llama(folder, texts: list[str], vocab_size: int = 300, hidden_size: int = 32, num_layers: int = 4):
    """Saves a tiny random `LlamaForCausalLM` and a byte-level BPE tokenizer trained on `texts` into `folder` (what
    `--model_name_or_path` reads): the offline stand-in for a real Llama in the docs' "train on your own data"
    example and the tests. Returns the folder."""
    from pathlib import Path

    from .data import train_tokenizer

    tok = train_tokenizer(list(texts), vocab_size=vocab_size)
    model = tiny_llama(vocab_size=len(tok), hidden_size=hidden_size, num_layers=num_layers,
                       pad_token_id=tok.pad_token_id)  # fmt: skip
    folder = Path(folder)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


__all__ = ["save_tiny_llama", "tiny_llama"]
