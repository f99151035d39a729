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


# ---- the scales of `hf-ext reproduce h2tune` (RunConfig fields; seeds; compared variants) -------------------------

# Quick: the comparison without the confound (local-only LoRA, the pooled ceiling, the adapter-only control, H2Tune)
# on four paired seeds, so a 95 % t-interval (t = 3.18) can exclude zero; HetLoRA / FLoRA and the ablations run with
# --full (or --variants). Client 2 (GPT-2, L2 d32) poses the sum as fill-in here, not as program output (its task in
# --full): on program output that base has no headroom at quick scale (local-only 0.06, pooled ceiling 0.11, ceiling −
# local-only +0.05 [-0.05, +0.15] over seeds 0-3 at 50 steps; 0.20 vs 0.21 at 80 steps), so no comparison could
# speak there; on fill-in it has (local-only 0.34, ceiling − local-only +0.22 [+0.11, +0.33], same seeds and steps).
# 50 local steps keep four seeds within today's quick budget (+30 %).
QUICK_CLIENT_2_TASK = "fill_in"
QUICK = {
    "rounds": 3,
    "local_steps": 50,
    "pretrain_steps": 300,
    "client_tasks": f"fill_in,modulo,{QUICK_CLIENT_2_TASK}",
}
QUICK_SEEDS = [0, 1, 2, 3]
QUICK_VARIANTS = ["local-only", "pooled", "adapter-only", "h2tune"]

# --full: every variant (HetLoRA, FLoRA, the three ablations, the adapter-only control), 3 rounds x 300 steps, on
# Flower's simulation engine: 27 federations in 1,994 s on the nearly idle 2-core machine (2026-12-05)
FULL = {"rounds": 3, "local_steps": 300, "pretrain_steps": 300}
FULL_SEEDS = [0, 1, 2]

# `--pretrained` on CPU: SmolLM2-135M-Instruct (fill-in, r 8) and two bases derived from it, smollm2-L24 (modulo,
# r 4) and smollm2-L28 (program, r 16), each healed by 100 distillation steps (cached; smollm2-L20 healed the same
# way stayed at chance locally on fill-in and smollm2-L12 on program, L24 / L28 reach 0.67 / 0.62 on fill-in after
# one round); prompts in SmolLM2's chat template (<= 42 tokens with the answer and EOS, so max_len 48); 3 rounds of
# 20 local steps of batch 8 on 64 training examples per client and 48 test pairs (of the 50 other clients' pairs);
# 4 paired seeds; local-only, the pooled ceiling, the adapter-only control and H2Tune. The earlier 2-seed, 24-pair,
# 3-variant run took 51.8 min on the idle 2-core machine; this one took 2.0 h there with `--workers 2` (2026-12-04:
# plain-LoRA federations ~11 min, H2Tune-adapter ones ~17 min on one core), so on a CPU it is a run of its own
# (`--resume` continues one cut short) and on a GPU a job for `--device cuda`.
PRETRAINED = {
    "client_models": "smollm2,smollm2-L24,smollm2-L28",
    "client_ranks": "8,4,16",
    "rounds": 3,
    "local_steps": 20,
    "batch_size": 8,
    "num_train": 64,
    "num_test": 48,
    "pretrain_steps": 0,
    "heal_steps": 100,
    "max_len": 48,
}
PRETRAINED_SEEDS = [0, 1, 2, 3]
PRETRAINED_VARIANTS = ["local-only", "pooled", "adapter-only", "h2tune"]

__all__ = [
    "BASE_SEED",
    "FULL",
    "FULL_SEEDS",
    "PRETRAINED",
    "PRETRAINED_SEEDS",
    "PRETRAINED_VARIANTS",
    "QUICK",
    "QUICK_SEEDS",
    "QUICK_VARIANTS",
    "VOCAB",
    "char_tokenizer",
    "tiny_base",
    "tiny_base_config",
    "write_tiny_decoder",
]
