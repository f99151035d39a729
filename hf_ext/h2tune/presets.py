"""Tiny decoders the library itself builds at run time: the quick-scale clients' random-init bases (`bases.py`), the
contract fixture's and the demo's fallbacks. Built in code from a transformers config, never downloaded.
"""

from __future__ import annotations

import torch

VOCAB = 64
BASE_SEED = 1234


def tiny_base_config(family: str = "llama", layers: int = 2, hidden: int = 32, vocab: int = VOCAB):
    """A tiny decoder config of `family` in {"llama", "qwen2", "gpt2"} (random init, built in code)."""
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    if family == "gpt2":
        return GPT2Config(
            vocab_size=vocab,
            n_embd=hidden,
            n_layer=layers,
            n_head=4,
            n_positions=64,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        )
    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config}[family]
    return cls(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )


def tiny_base(config=None, seed: int = BASE_SEED, **kwargs):
    """A randomly initialised causal LM, deterministic in `seed` (the global RNG is left untouched)."""
    from transformers import AutoModelForCausalLM

    config = config if config is not None else tiny_base_config(**kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(config)


__all__ = ["BASE_SEED", "VOCAB", "tiny_base", "tiny_base_config"]
