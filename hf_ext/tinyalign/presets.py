"""Named vision encoders and LMs `hf-ext train tinyalign --data` accepts besides a Hub id or a local folder:
`--vision_model efficientnet-lite0` (the ImageNet EfficientNet-Lite0 tower, the default) and
`--language_model smollm2` (SmolLM2-135M-Instruct, the default), both loaded offline through
`hf_ext.core.pretrained`; and `tiny` for either, a few-thousand-parameter stand-in built in code (a random frozen
3-channel ConvNeXt at 16 px; a 1-block Llama with a word-level tokenizer over the training captions, pretrained
text-only on them), for tests and the docs' example."""

from __future__ import annotations

TINY_VISION = {
    "model_type": "convnext",
    "num_channels": 3,
    "patch_size": 4,
    "num_stages": 1,
    "hidden_sizes": [32],
    "depths": [1],
    "image_size": 16,
}
VISION_PRESETS = ("efficientnet-lite0", "tiny")
LANGUAGE_PRESETS = ("smollm2", "tiny")
TINY_LM_STEPS = 200


def tiny_vision_tower(seed: int = 0):
    """A random 3-channel ConvNeXt for 16×16 images (4×4 = 16 visual tokens), frozen: a test stand-in whose features
    are fixed random projections of the image."""
    import torch
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(seed)
    config = dict(TINY_VISION)
    return AutoModel.from_config(AutoConfig.for_model(config.pop("model_type"), **config))


def tiny_language_model(captions: list[str], steps: int = TINY_LM_STEPS, seed: int = 0):
    """`(LM, tokenizer)`: a word-level tokenizer over `captions` and a 1-block Llama (width 64) trained text-only on
    `prompt caption` for `steps` steps (`hf_ext.tinyalign.components.pretrain_lm`, not cached)."""
    from transformers import AutoConfig, LlamaForCausalLM

    from .components import pretrain_lm
    from .processing_tinyalign import build_tokenizer

    tokenizer = build_tokenizer(captions)
    state, info = pretrain_lm("small", tokenizer, list(captions), steps=steps, seed=seed, cache_dir=None)
    config = dict(info["text_config"])
    lm = LlamaForCausalLM(AutoConfig.for_model(config.pop("model_type"), **config))
    lm.load_state_dict(state)
    return lm.eval(), tokenizer


__all__ = ["LANGUAGE_PRESETS", "TINY_LM_STEPS", "TINY_VISION", "VISION_PRESETS", "tiny_language_model",
           "tiny_vision_tower"]  # fmt: skip
