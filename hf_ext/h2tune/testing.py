"""The H2Tune contract fixture for the shared contract test and the helpers the tests share (no downloads). Only
tests import this module; the tiny decoders themselves live in [`~hf_ext.h2tune.presets`] (re-exported here).

An adapter folder holds no base weights, so the fixture's `save` also writes the base model's `config.json` and its
`load` rebuilds the base from that config with the fixed seed the tiny bases are built with, then restores the
adapter through plain `PeftModel.from_pretrained` (which must give an H2Tune adapter, not vanilla LoRA).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from hf_ext.core.testing import ContractFixture, causal_lm_logits

from .config import H2TuneConfig
from .presets import BASE_SEED, VOCAB, tiny_base, tiny_base_config  # noqa: F401  (re-exported for tests)


def tiny_config(**overrides) -> H2TuneConfig:
    kwargs = dict(r=4, global_rank=8, lora_dropout=0.0, task_type="CAUSAL_LM", init_lora_weights=False)
    kwargs.update(overrides)
    return H2TuneConfig(**kwargs)


def make_adapter(config: H2TuneConfig, base=None, seed: int = 0):
    from peft import get_peft_model

    base = base if base is not None else tiny_base()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(base, copy.deepcopy(config))


def tiny_inputs(batch: int = 2, length: int = 9, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(2, VOCAB, (batch, length), generator=g)}


def _save(model, path: Path) -> None:
    model.save_pretrained(path)
    model.get_base_model().config.save_pretrained(path)  # the base model's config.json, to rebuild the base


def _load(path: Path):
    from peft import PeftModel
    from transformers import AutoConfig

    return PeftModel.from_pretrained(tiny_base(AutoConfig.from_pretrained(path)), path)


def _trainer(model, output_dir: Path):
    from datasets import Dataset
    from transformers import TrainingArguments

    from .trainer import H2TuneTrainer

    ids = tiny_inputs(batch=8, length=12, seed=3)["input_ids"]
    ds = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    args = TrainingArguments(
        output_dir=str(output_dir),
        use_cpu=True,
        report_to="none",
        max_steps=1,
        per_device_train_batch_size=8,
        learning_rate=1e-2,
        weight_decay=0.1,
        adam_beta2=0.95,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    model.train()
    return H2TuneTrainer(model=model, args=args, train_dataset=ds)


def _trainable_state(model) -> dict[str, torch.Tensor]:
    # A, B, T (cross-entropy) and S (only the norm penalty: the top-k selection has no gradient by design) are the
    # trainable tensors; the shared matrix M̃ (`lora_lT`, a buffer) must change too, because T is scattered back
    # after the optimiser step (the released code lost these updates).
    state = {n: p for n, p in model.named_parameters() if p.requires_grad}
    state.update({n: b for n, b in model.named_buffers() if ".lora_lT." in n})
    return state


def contract_fixture() -> ContractFixture:
    return ContractFixture(
        make_config=tiny_config,
        make_artifact=make_adapter,
        example_inputs=tiny_inputs,
        outputs=causal_lm_logits,
        save=_save,
        load=_load,
        config_from_dict=H2TuneConfig.from_dict,
        make_trainer=_trainer,
        trainable_state=_trainable_state,
    )


def relation_trainer(model, relation, global_tensor, output_dir, steps: int = 3, callbacks=()):
    """An [`~hf_ext.h2tune.trainer.H2TuneTrainer`] that trains P_c (`relation`, in the optimiser) through
    M̃ = P_cᵀ·G + D_c on a few random token batches, for the tests of the relation path and the write-back."""
    from datasets import Dataset
    from transformers import TrainingArguments

    from .trainer import H2TuneTrainer

    ids = tiny_inputs(batch=8, length=8)["input_ids"]
    ds = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    args = TrainingArguments(
        output_dir=str(output_dir),
        use_cpu=True,
        report_to="none",
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=0.05,
        save_strategy="no",
        disable_tqdm=True,
        logging_strategy="no",
    )
    trainer = H2TuneTrainer(
        model=model,
        args=args,
        train_dataset=ds,
        extra_shared=[relation.weight],
        relation=relation.weight,
        global_tensor=global_tensor,
    )
    for callback in callbacks:
        trainer.add_callback(callback)
    trainer.create_optimizer()
    trainer.optimizer.add_param_group({"params": [relation.weight], "weight_decay": 0.0})
    return trainer
