"""TinyAlign in the paper's setting: a frozen pretrained vision encoder (EfficientNet-Lite0, ImageNet weights) and a
frozen pretrained small LM (SmolLM2-135M-Instruct), both loaded offline through `hf_ext.core.pretrained`, with the
connectors trained. Also: visual features precomputed once per image (the tower is frozen).

```python
>>> from hf_ext.tinyalign.pretrained_parts import pretrained_tinyalign
>>> model, processor = pretrained_tinyalign(memory_top_k=4)  # frozen parts referenced by path, not copied
```
"""

from __future__ import annotations

from pathlib import Path

import torch

from hf_ext.core.paths import cache_dir

from .processing_tinyalign import PROMPT, TinyAlignImageProcessor, TinyAlignProcessor, add_placeholder_tokens

IMAGE_SIZE = 64  # 2×2 = 4 visual tokens of width 1280: what a CPU run affords (EfficientNet-Lite0 is 224 native)


def efficientnet_tower_path(cache: str | Path | None = None) -> Path:
    """A `from_pretrained` folder of [`TinyAlignEfficientNetModel`] with the ImageNet EfficientNet-Lite0 weights
    (written once from `hf_ext.core.pretrained.load_efficientnet_lite0`), so an artifact can reference it by path."""
    from hf_ext.core.hub import atomic_write_dir
    from hf_ext.core.pretrained import load_efficientnet_lite0

    from .configuration_tinyalign import TinyAlignEfficientNetConfig
    from .modeling_efficientnet import TinyAlignEfficientNetModel

    folder = Path(cache) if cache is not None else cache_dir("tinyalign", "efficientnet-lite0-tower")
    if (folder / "model.safetensors").is_file():
        return folder
    net = load_efficientnet_lite0()
    state = {k: v for k, v in net.state_dict().items() if not k.startswith("_fc.")}
    tower = TinyAlignEfficientNetModel(TinyAlignEfficientNetConfig(image_size=IMAGE_SIZE))
    tower.net.load_state_dict(state, strict=True)
    return atomic_write_dir(folder, lambda tmp: tower.save_pretrained(tmp))


def smollm2_tokenizer():
    """SmolLM2's tokenizer with `<image>` / `<rag>` added (ids past the LM vocabulary; never embedded)."""
    from transformers import AutoTokenizer

    from hf_ext.core.pretrained import smollm2_path

    return add_placeholder_tokens(AutoTokenizer.from_pretrained(smollm2_path()))


def efficientnet_image_processor(image_size: int = IMAGE_SIZE) -> TinyAlignImageProcessor:
    """RGB at `image_size`, ImageNet mean/std (what the EfficientNet-Lite weights were trained with)."""
    from hf_ext.core.pretrained import EFFICIENTNET_MEAN, EFFICIENTNET_STD

    return TinyAlignImageProcessor(
        size=image_size, num_channels=3, image_mean=EFFICIENTNET_MEAN, image_std=EFFICIENTNET_STD
    )


def load_frozen_parts():
    """`(vision tower, SmolLM2, tokenizer)`, loaded once; the modules are frozen and may be shared by several
    TinyAlign models (nothing writes to them)."""
    from transformers import AutoModel

    from hf_ext.core.pretrained import load_smollm2

    tower = AutoModel.from_pretrained(efficientnet_tower_path()).eval().requires_grad_(False)
    lm, _ = load_smollm2()
    return tower, lm.requires_grad_(False), smollm2_tokenizer()


def pretrained_tinyalign(parts=None, image_size: int = IMAGE_SIZE, prompt: str = PROMPT, **config_kwargs):
    """`(model, processor)`: TinyAlign over EfficientNet-Lite0 and SmolLM2-135M-Instruct, frozen, referenced by
    path (the save holds only what trains). `parts` = [`load_frozen_parts`]'s triple, to share it across models.
    `config_kwargs` go to [`TinyAlignConfig`] (e.g. `use_retrieval`, `memory_top_k`, `value_num_latents`)."""
    from .modeling_tinyalign import TinyAlignForConditionalGeneration

    tower, lm, tokenizer = parts or load_frozen_parts()
    prompt_length = len(tokenizer(" " + prompt, add_special_tokens=False)["input_ids"])
    model = TinyAlignForConditionalGeneration.from_pretrained_parts(
        tower,
        lm,
        image_size=image_size,
        query_prompt_length=prompt_length,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        rag_token_id=tokenizer.convert_tokens_to_ids("<rag>"),
        **config_kwargs,
    )
    processor = TinyAlignProcessor(
        efficientnet_image_processor(image_size),
        tokenizer,
        model.config.num_image_tokens,
        model.config.num_memory_tokens,
        prompt=prompt,
    )
    processor.config = model.config
    processor.check_config(model.config)
    return model, processor


def _vision_part(name: str, seed: int):
    """`(tower, image processor)` for `--vision_model`: a preset name, a Hub id or a local folder."""
    from transformers import AutoModel

    from .presets import TINY_VISION, tiny_vision_tower

    if name == "efficientnet-lite0":
        tower = AutoModel.from_pretrained(efficientnet_tower_path())
        return tower, efficientnet_image_processor(IMAGE_SIZE)
    if name == "tiny":
        return tiny_vision_tower(seed), TinyAlignImageProcessor(size=TINY_VISION["image_size"], num_channels=3)
    tower = AutoModel.from_pretrained(name)
    if hasattr(tower, "vision_model") and not hasattr(tower.config, "image_size"):  # a CLIP-like pair: its tower
        tower = tower.vision_model
    vc = tower.config
    size, mean, std = getattr(vc, "image_size", None), None, None
    try:  # the encoder's own preprocessing (size, mean, std) when the folder / repo ships one
        from transformers import AutoImageProcessor

        ip = AutoImageProcessor.from_pretrained(name)
        mean, std = getattr(ip, "image_mean", None), getattr(ip, "image_std", None)
        sz = getattr(ip, "size", None) or {}
        size = size or sz.get("height") or sz.get("shortest_edge")
    except (OSError, ValueError, KeyError):
        pass
    channels = getattr(vc, "num_channels", 3)
    if isinstance(size, (list, tuple)):
        size = size[0]
    size = int(size or 224)
    return tower, TinyAlignImageProcessor(size=size, num_channels=channels, image_mean=mean, image_std=std)


def _language_part(name: str, captions: list[str], seed: int, tiny_lm_steps: int):
    """`(causal LM, tokenizer with <image> / <rag>)` for `--language_model`: a preset, a Hub id or a folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .presets import tiny_language_model

    if name == "smollm2":
        from hf_ext.core.pretrained import load_smollm2

        return load_smollm2()[0], smollm2_tokenizer()
    if name == "tiny":
        return tiny_language_model(captions, steps=tiny_lm_steps, seed=seed)
    lm = AutoModelForCausalLM.from_pretrained(name)
    return lm, add_placeholder_tokens(AutoTokenizer.from_pretrained(name))


def compose_tinyalign(vision_model: str, language_model: str, captions: list[str], *, seed: int = 0,
                      tiny_lm_steps: int = 200, prompt: str = PROMPT, **config_kwargs):  # fmt: skip
    """`(model, processor)`: TinyAlign over any vision encoder and causal LM, both frozen (stage 1), for the user's
    data.

    Args:
        vision_model (`str`): `"efficientnet-lite0"`, `"tiny"` (see `hf_ext.tinyalign.presets`), a Hub id or a local
            folder (`AutoModel`; its image processor's size, mean and std are used when it ships one).
        language_model (`str`): `"smollm2"`, `"tiny"`, a Hub id or a local folder (`AutoModelForCausalLM` and its
            `AutoTokenizer`, which gets `<image>` / `<rag>` added).
        captions (`list[str]`): the training captions (the `tiny` LM's vocabulary and text-only pretraining).
        config_kwargs: further [`TinyAlignConfig`] fields (`use_retrieval`, `memory_top_k`, ...).

    Parts loaded from a Hub id or a folder are referenced by it in the config (the artifact holds what trains); the
    `tiny` parts are saved inside the artifact.
    """
    from .modeling_tinyalign import TinyAlignForConditionalGeneration

    tower, image_processor = _vision_part(vision_model, seed)
    lm, tokenizer = _language_part(language_model, captions, seed, tiny_lm_steps)
    tower.eval().requires_grad_(False)
    lm.eval().requires_grad_(False)
    prompt_length = len(tokenizer(" " + prompt, add_special_tokens=False)["input_ids"])
    torch.manual_seed(seed)
    model = TinyAlignForConditionalGeneration.from_pretrained_parts(
        tower,
        lm,
        image_size=image_processor.size,
        num_channels=image_processor.num_channels,
        query_prompt_length=prompt_length,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        rag_token_id=tokenizer.convert_tokens_to_ids("<rag>"),
        **config_kwargs,
    )
    processor = TinyAlignProcessor(
        image_processor, tokenizer, model.config.num_image_tokens, model.config.num_memory_tokens, prompt=prompt
    )
    processor.config = model.config
    processor.check_config(model.config)
    return model, processor


@torch.no_grad()
def add_vision_features(model, processor, dataset, batch_size: int = 64):
    """`dataset` with a `vision_features` column `(Nv, d_v)` per row: the frozen tower's output, computed once, so
    training and evaluation skip the tower (the collator and `evaluate_captions` use the column when present)."""
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(dataset), batch_size):
        pixels = processor.pixel_values(dataset[start : start + batch_size]["pixel_values"]).to(model.device)
        out.extend(model.image_features(pixels).float().cpu().numpy())
    model.train(was_training)
    return dataset.add_column("vision_features", [f.tolist() for f in out])


__all__ = [
    "IMAGE_SIZE",
    "add_vision_features",
    "compose_tinyalign",
    "efficientnet_image_processor",
    "efficientnet_tower_path",
    "load_frozen_parts",
    "pretrained_tinyalign",
    "smollm2_tokenizer",
]
