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


def char_tokenizer():
    """A character-level fast tokenizer (printable ASCII, `<pad>` / `<s>` / `</s>` / `<unk>`), built in code: the
    tokenizer of [`write_tiny_decoder`]'s decoders (no chat template, so prompts are posed raw)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials + [chr(c) for c in range(32, 127)])}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))  # no merges: one token per char
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def write_tiny_decoder(path, family: str = "llama", layers: int = 2, hidden: int = 32, seed: int = BASE_SEED):
    """Saves a tiny random-init decoder of `family` ("llama", "qwen2", "gpt2") with [`char_tokenizer`] as a local
    model folder (what a federation file's `base_model` may name); for quick runs, the docs example and tests."""
    from pathlib import Path

    tokenizer = char_tokenizer()
    config = tiny_base_config(family, layers, hidden, vocab=len(tokenizer))
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(config, key, getattr(tokenizer, key))
    if family == "gpt2":
        config.n_positions = 256
    else:
        config.max_position_embeddings = 256
    path = Path(path)
    tiny_base(config, seed=seed).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


__all__ = ["BASE_SEED", "VOCAB", "char_tokenizer", "tiny_base", "tiny_base_config", "write_tiny_decoder"]
