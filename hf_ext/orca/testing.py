"""The ORCA contract fixture: tiny configs and data for the shared contract test (no downloads)."""

from __future__ import annotations

from pathlib import Path

import torch

from hf_ext.core.testing import ContractFixture

from .configuration_orca import OrcaConfig
from .modeling_orca import OrcaModel

TINY_FIELDS = ["user_id", "item_id", "category"]
TINY_VOCAB = [11, 13, 5]


def tiny_config(**overrides) -> OrcaConfig:
    kwargs = dict(
        field_names=TINY_FIELDS,
        field_vocab_sizes=TINY_VOCAB,
        post_click_fields=["category"],
        embed_dim=4,
        num_experts=2,
        num_task_experts=2,
        expert_dims=[8, 4],
        ple_level_dims=[[8], [4]],
        tower_dims=[4],
    )
    kwargs.update(overrides)
    return OrcaConfig(**kwargs)


def tiny_batch(n: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randint(0, v, (n,), generator=g) for v in TINY_VOCAB], dim=1)
    clicks = (torch.rand(n, generator=g) < 0.5).float()
    clicks[:2] = 1.0  # every tiny batch has clicked samples, so the DT terms are exercised
    dwell = torch.where(clicks > 0, torch.randint(0, 8, (n,), generator=g), torch.full((n,), -100))
    return {"input_ids": ids, "click_labels": clicks, "dwell_labels": dwell}


def _outputs(model: OrcaModel, inputs: dict) -> dict[str, torch.Tensor]:
    model.eval()
    with torch.no_grad():
        out = model(**inputs)
    return {k: out[k] for k in ("loss", "click_probs", "dt_logits", "dt_logits_raw", "nde_logits", "dt_seconds")}


def _trainer(model: OrcaModel, output_dir: Path):
    from datasets import Dataset

    from .train import OrcaTrainingArguments
    from .trainer import OrcaTrainer

    batch = tiny_batch(64, seed=1)
    ds = Dataset.from_dict({k: v.tolist() for k, v in batch.items()})
    args = OrcaTrainingArguments(
        output_dir=str(output_dir), max_steps=1, per_device_train_batch_size=32, mask_fea_ratio=1.0, seed=0
    )
    return OrcaTrainer(model=model, args=args, train_dataset=ds)


def contract_fixture() -> ContractFixture:
    from transformers import AutoModel

    return ContractFixture(
        make_config=tiny_config,
        make_artifact=OrcaModel,
        example_inputs=tiny_batch,
        outputs=_outputs,
        load=lambda path: AutoModel.from_pretrained(path),
        make_trainer=_trainer,
    )
