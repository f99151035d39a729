"""The contract fixture: what `tests/test_method_contract.py` needs to check MyMethod (tiny configs, one step)."""

from __future__ import annotations

from hf_ext.core.testing import ContractFixture


def tiny_config():
    from .configuration_mymethod import MyMethodConfig

    return MyMethodConfig(num_features=4, hidden_size=8)


def _inputs():
    import torch

    return torch.linspace(-1, 1, 12).reshape(3, 4)


def _trainer(model, out_dir):
    import torch
    from transformers import Trainer, TrainingArguments

    rows = [{"features": torch.randn(4), "labels": torch.randn(())} for _ in range(8)]
    args = TrainingArguments(
        output_dir=str(out_dir), max_steps=1, per_device_train_batch_size=4, report_to="none", use_cpu=True
    )
    return Trainer(model=model, args=args, train_dataset=rows)


def contract_fixture() -> ContractFixture:
    from transformers import AutoModel

    from .modeling_mymethod import MyMethodModel

    return ContractFixture(
        make_config=tiny_config,
        make_artifact=MyMethodModel,
        example_inputs=_inputs,
        outputs=lambda model, x: {"predictions": model.eval()(x).predictions},
        load=lambda path: AutoModel.from_pretrained(path),
        make_trainer=_trainer,
    )
