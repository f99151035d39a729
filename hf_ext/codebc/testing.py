"""Test helpers (the library never imports this module): a tiny CodeBC model + adapter and the contract fixture for
the shared contract test (no downloads, no corpus); the tiny config itself is a run-time preset (`presets.py`).

The artifact is the CodeBC adapter on its base: `save` writes the base model (`config.json`, `model.safetensors`) and
the LoRA adapter (`adapter/adapter_config.json`, `adapter/adapter_model.safetensors`) into one folder; `load` reads the
base through `AutoModelForCausalLM` (registered for `hf_ext_codebc`) and the adapter with `PeftModel.from_pretrained`.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from hf_ext.core.testing import ContractFixture, causal_lm_logits

from .adapter import add_adapter
from .configuration_codebc import CodeBCConfig
from .presets import BASE_SEED, VOCAB, tiny_config
from .trainer import CodeBCStageArguments


def tiny_base(config: CodeBCConfig | None = None, seed: int = BASE_SEED):
    from .modeling_codebc import CodeBCForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return CodeBCForCausalLM(copy.deepcopy(config) if config is not None else tiny_config())


def make_adapter(config: CodeBCConfig, seed: int = 0):
    """The tiny base with the CodeBC LoRA (r 8, α 32, q/v) and trainable tag-token rows 90, 91 (as the reproduce
    trains its added tokens); B is randomised so the adapter changes the outputs."""
    model = add_adapter(tiny_base(config), CodeBCStageArguments(lora_dropout=0.0, trainable_token_ids=[90, 91]))
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for name, p in model.named_parameters():
            if "lora_B" in name or "trainable_tokens_delta" in name:
                p.normal_(0, 0.02)
    return model


def tiny_inputs(batch: int = 2, length: int = 9, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(3, VOCAB, (batch, length), generator=g)}


def save(model, path: Path) -> None:
    from .adapter import save_codebc

    save_codebc(model, path)


def load(path: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(path), Path(path) / "adapter")


def _trainer(model, output_dir: Path):
    from .trainer import make_trainer

    ids = tiny_inputs(batch=8, length=12, seed=3)["input_ids"].tolist()
    from datasets import Dataset

    ds = Dataset.from_dict({"input_ids": ids, "labels": ids})
    args = CodeBCStageArguments(learning_rate=1e-2, max_steps=1, batch_size=8, lora_dropout=0.0)
    model.train()
    return make_trainer(model, ds, 0, args, str(output_dir))


def contract_fixture() -> ContractFixture:
    return ContractFixture(
        make_config=tiny_config,
        make_artifact=make_adapter,
        example_inputs=tiny_inputs,
        outputs=causal_lm_logits,
        save=save,
        load=load,
        config_from_dict=CodeBCConfig.from_dict,
        make_trainer=_trainer,
    )


def write_npm_package(root: Path, name: str, licence: str, files: dict[str, str]) -> Path:
    """A fake installed npm package under `root` (a `node_modules` folder): `package.json` with `name`, version
    1.0.0 and `licence`, and `files` (`{relative path: text}`), for the corpus loaders' tests."""
    import json

    folder = Path(root) / name
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": name, "version": "1.0.0", "license": licence}))
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder
