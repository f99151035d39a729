"""The TinyAlign contract fixture: a tiny config with a built memory bank (no downloads, random frozen parts)."""

from __future__ import annotations

from pathlib import Path

import torch

from hf_ext.core.testing import ContractFixture

from .configuration_tinyalign import TinyAlignConfig
from .modeling_tinyalign import TinyAlignForConditionalGeneration

TINY_CAPTIONS = [
    f"a {t} {w} {d} , {s}"
    for t in ("thin", "thick")
    for w in ("narrow", "wide")
    for d in ("zero", "one", "seven")
    for s in ("upright", "slanted left")
]


def tiny_config(**overrides) -> TinyAlignConfig:
    kwargs = dict(
        vision_config={
            "model_type": "convnext",
            "num_channels": 1,
            "patch_size": 2,
            "num_stages": 1,
            "hidden_sizes": [8],
            "depths": [1],
            "image_size": 8,
        },
        text_config={
            "model_type": "llama",
            "vocab_size": 40,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "max_position_embeddings": 256,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        memory_top_k=2,
        value_num_latents=4,
        value_latent_dim=8,
        value_d_model=16,
        value_num_self_attends=1,
        value_num_heads=2,
        value_text_length=48,
    )
    kwargs.update(overrides)
    return TinyAlignConfig(**kwargs)


def tiny_data(n: int = 24, seed: int = 0):
    """`n` random 8×8 images with captions from a fixed grammar, as a `datasets.Dataset`."""
    from datasets import Dataset

    g = torch.Generator().manual_seed(seed)
    return Dataset.from_dict(
        {
            "pixel_values": torch.rand(n, 1, 8, 8, generator=g).tolist(),
            "caption": [TINY_CAPTIONS[(seed + i) % len(TINY_CAPTIONS)] for i in range(n)],
        }
    )


def tiny_processor(config: TinyAlignConfig):
    from .processing_tinyalign import TinyAlignProcessor, build_tokenizer

    return TinyAlignProcessor(build_tokenizer(TINY_CAPTIONS), config)


def tiny_model(config: TinyAlignConfig | None = None, seed: int = 0) -> TinyAlignForConditionalGeneration:
    """A tiny model with a memory bank built from 24 image–caption pairs."""
    from .processing_tinyalign import build_memory_bank

    config = config or tiny_config()
    torch.manual_seed(seed)
    model = TinyAlignForConditionalGeneration(config)
    if config.use_retrieval:
        build_memory_bank(model, tiny_processor(config), tiny_data(24, seed=100), batch_size=8, progress=False)
    return model


def tiny_batch(config: TinyAlignConfig | None = None, n: int = 4, seed: int = 1) -> dict[str, torch.Tensor]:
    config = config or tiny_config()
    rows = tiny_data(n, seed)
    return tiny_processor(config)(rows["pixel_values"], rows["caption"])


def _outputs(model, inputs):
    model.eval()
    with torch.no_grad():
        out = model(**inputs)
        prompt = {k: v for k, v in inputs.items() if k != "labels"}
        n = int(model.config.num_image_tokens + model.config.num_memory_tokens + 8)
        gen = model.generate(
            input_ids=prompt["input_ids"][:, :n],
            attention_mask=prompt["attention_mask"][:, :n],
            pixel_values=prompt["pixel_values"],
            max_new_tokens=4,
            do_sample=False,
        )
    return {
        "loss": out.loss,
        "logits": out.logits,
        "retrieved_ids": out.retrieved_ids,
        "retrieval_scores": out.retrieval_scores,
        "generated": gen,
    }


def _trainer(model, output_dir: Path):
    from .train import TinyAlignTrainingArguments
    from .trainer import make_trainer

    config = model.config
    args = TinyAlignTrainingArguments(
        output_dir=str(output_dir), max_steps=1, per_device_train_batch_size=8, warmup_ratio=0.0, seed=0
    )
    trainer, _ = make_trainer(model, tiny_processor(config), tiny_data(16, seed=3), args)
    return trainer


def contract_fixture() -> ContractFixture:
    from transformers import AutoModelForImageTextToText

    return ContractFixture(
        make_config=tiny_config,
        make_artifact=lambda config: tiny_model(config).freeze_for_stage1(),
        example_inputs=tiny_batch,
        outputs=_outputs,
        load=lambda path: AutoModelForImageTextToText.from_pretrained(path),
        make_trainer=_trainer,
    )
