"""Resumable checkpoints of one party (the client's parts A + C, or the server's part B): the part's weights, its
optimisers' states and schedule positions, and a small JSON state, written atomically as safetensors + JSON (no
pickle), so a killed save never leaves a half-written checkpoint behind."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from .arguments import PartOptimizer

OPTIMIZER_FILE, STATE_FILE = "optimizer.safetensors", "trainer_state.json"


def save_party_checkpoint(path: str | Path, module: nn.Module, weights_file: str, optimizers: dict[str, PartOptimizer],
                          state: dict, extra_tensors: dict[str, torch.Tensor] | None = None) -> Path:  # fmt: skip
    """Writes `module`'s weights (`weights_file`; tied tensors stored once), every optimiser under its prefix plus
    `extra_tensors` (`optimizer.safetensors`) and `state` (`trainer_state.json`) into `path`, atomically."""
    from hf_ext.core.hub import atomic_write_dir

    def write(tmp: Path) -> None:
        save_model(module, str(tmp / weights_file))
        tensors = dict(extra_tensors or {})
        for prefix, opt in optimizers.items():
            tensors.update(opt.state_tensors(prefix))
        save_file(tensors, str(tmp / OPTIMIZER_FILE))
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=1))

    return atomic_write_dir(path, write)


def load_party_checkpoint(path: str | Path, module: nn.Module, weights_file: str,
                          optimizers: dict[str, PartOptimizer]) -> tuple[dict, dict[str, torch.Tensor]]:  # fmt: skip
    """Inverse of [`save_party_checkpoint`]: loads the weights (strictly: a LoRA checkpoint needs the adapters
    injected first) and the optimisers in place; returns `(state, all optimiser-file tensors)`."""
    path = Path(path)
    missing = [n for n in (weights_file, OPTIMIZER_FILE, STATE_FILE) if not (path / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{path} is not an FL-LLaMA checkpoint of this party (missing {missing})")
    load_model(module, str(path / weights_file))
    tensors = load_file(str(path / OPTIMIZER_FILE))
    for prefix, opt in optimizers.items():
        opt.load_state_tensors(tensors, prefix)
    return json.loads((path / STATE_FILE).read_text()), tensors


__all__ = ["load_party_checkpoint", "save_party_checkpoint"]
