"""TBA contract fixtures: the victim regressor ([`contract_fixture`], run by the shared contract test) and the noise
generator ([`dhng_contract_fixture`], run through the same checks by `tests/tba/test_modeling.py`); tiny
configs, no downloads.
"""

from __future__ import annotations

from pathlib import Path

import torch

from hf_ext.core.testing import ContractFixture

from .configuration_tba import TbaDhngConfig, TbaVictimConfig
from .modeling_tba import TbaDhngModel, TbaPoseRegressor

TINY_IMAGE = 16


def tiny_victim_config(**overrides) -> TbaVictimConfig:
    kwargs = dict(backbone="vit", image_size=TINY_IMAGE, num_params=39,
                  backbone_kwargs=dict(patch_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32))  # fmt: skip
    kwargs.update(overrides)
    return TbaVictimConfig(**kwargs)


def tiny_dhng_config(**overrides) -> TbaDhngConfig:
    kwargs = dict(image_size=TINY_IMAGE, vae_block_out_channels=[8, 16], controlnet_block_out_channels=[8, 16],
                  norm_num_groups=4, cross_attention_dim=8, conditioning_embedding_out_channels=[8, 8])  # fmt: skip
    kwargs.update(overrides)
    return TbaDhngConfig(**kwargs)


def tiny_images(n: int = 4, seed: int = 0, size: int = TINY_IMAGE) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"pixel_values": torch.rand(n, 3, size, size, generator=g),
            "labels": 0.3 * torch.randn(n, 39, generator=g)}  # fmt: skip


def _victim_outputs(model, inputs) -> dict[str, torch.Tensor]:
    model.eval()
    with torch.no_grad():
        out = model(**inputs)
    return {"loss": out.loss, "params": out.params}


def _dhng_outputs(model, inputs) -> dict[str, torch.Tensor]:
    model.eval()
    x = inputs["pixel_values"]
    with torch.no_grad():
        state = model.prepare(x, torch.Generator().manual_seed(0))
        gains = torch.ones(x.shape[0], model.num_residuals)
        return {"mu": state["mu"], "vae_noise": model.vae_noise(state, torch.zeros_like(state["z"])),
                "controlnet_noise": model.controlnet_noise(state, torch.zeros_like(state["z_t"]), gains)}  # fmt: skip


def _trainer(model, output_dir: Path, with_labels: bool):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    from .data import collate

    batch = tiny_images(16, seed=1)
    if not with_labels:
        batch.pop("labels")
    ds = Dataset.from_dict({k: v.numpy() for k, v in batch.items()}).with_format("torch")
    args = TrainingArguments(
        output_dir=str(output_dir), max_steps=1, per_device_train_batch_size=16, learning_rate=1e-2, use_cpu=True,
        report_to="none", save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0,
        remove_unused_columns=False,
    )  # fmt: skip
    return Trainer(model=model, args=args, train_dataset=ds, data_collator=collate)


def contract_fixture() -> ContractFixture:
    from transformers import AutoModel

    return ContractFixture(
        make_config=tiny_victim_config,
        make_artifact=TbaPoseRegressor,
        example_inputs=tiny_images,
        outputs=_victim_outputs,
        load=lambda path: AutoModel.from_pretrained(path),
        make_trainer=lambda model, out: _trainer(model, out, with_labels=True),
    )


def dhng_contract_fixture() -> ContractFixture:
    from transformers import AutoModel

    return ContractFixture(
        make_config=tiny_dhng_config,
        make_artifact=TbaDhngModel,
        example_inputs=lambda: {"pixel_values": tiny_images()["pixel_values"]},
        outputs=_dhng_outputs,
        load=lambda path: AutoModel.from_pretrained(path),
        make_trainer=lambda model, out: _trainer(model, out, with_labels=False),
    )


__all__ = ["contract_fixture", "dhng_contract_fixture", "tiny_dhng_config", "tiny_images", "tiny_victim_config"]
