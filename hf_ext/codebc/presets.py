"""Configs CodeBC uses at run time: the reproduction scales (`QUICK`, `FULL`, `PRETRAINED`, also the bases of
`hf-ext train codebc`) and the tiny LLaMA config of the Space's offline fallback (also the contract fixture's base,
see `testing.py`)."""

from __future__ import annotations

import dataclasses

from .configuration_codebc import CodeBCConfig
from .pipeline import ScaleConfig

QUICK = ScaleConfig()
FULL = dataclasses.replace(
    QUICK,
    layers=4,
    block_size=256,
    pretrain_steps=1500,
    n_secure=160,
    n_injected_per_pattern=10,
    stage_steps=300,
    samples=5,
    max_chars=1600,
    max_length=768,
    max_new_tokens=256,
    max_prompt_tokens=768,
)
# SmolLM2-135M-Instruct on CPU (issue 28's budget: about 150 training steps): seq 512, batch 2, 8 evaluation tasks.
# The learning rate is 5x the paper's 1e-4 because 40 steps per stage are ~1 % of the paper's 10 epochs.
PRETRAINED = dataclasses.replace(
    QUICK,
    base="smollm2",
    n_secure=48,
    n_injected_per_pattern=4,
    stage_steps=40,
    stage_lr=5e-4,
    stage_batch=2,
    max_chars=1400,
    max_length=512,
    samples=1,
    max_new_tokens=160,
    max_prompt_tokens=512,
    tasks=8,
    vd_real=48,
)

# The paper-scale job for one GPU (`hf-ext reproduce codebc --gpu --device cuda`, prepared, not run on CPU): the
# SmolLM2 recipe with 10x the steps, all 41 tasks, 5 sampled generations per task (the paper's 5) with 512 new tokens
# (the fenced reference fits in 160 / 400 / 512 / 768 tokens for 20 / 30 / 34 / 38 of the 41 tasks under SmolLM2's
# tokenizer: the parser-pass rate is also reported on the fitting ones), batched 64 prompts at a time.
GPU = dataclasses.replace(
    PRETRAINED,
    n_secure=160,
    n_injected_per_pattern=10,
    stage_steps=400,
    stage_batch=8,
    max_chars=1600,
    max_length=1024,
    samples=5,
    max_new_tokens=512,
    max_prompt_tokens=1024,
    tasks=41,
    n_probe=40,
    gen_batch=64,
)

VOCAB = 96
BASE_SEED = 1234


def tiny_config(**overrides) -> CodeBCConfig:
    kwargs = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tag_token_ids={"[Tag]": 90, "[/Tag]": 91},
        tie_word_embeddings=True,
    )
    kwargs.update(overrides)
    return CodeBCConfig(**kwargs)


def save_tiny_causal_lm(folder, codes: list[str], hidden_size: int = 32, layers: int = 2, seed: int = BASE_SEED):
    """Saves a tiny random `LlamaForCausalLM` with a byte-level BPE trained on `codes` (CodeBC's tokenizer) into
    `folder`: the offline stand-in for "any causal LM" in the docs' "train on your own data" example and the tests
    (`--model_name_or_path folder`). Returns the folder."""
    from pathlib import Path

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from .tokenizer import train_tokenizer

    tok = train_tokenizer(codes, vocab_size=400, min_frequency=1)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=1024, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, tie_word_embeddings=True)  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    folder = Path(folder)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
