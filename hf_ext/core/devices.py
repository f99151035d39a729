"""The device a method trains on, chosen once per run (`--device`), read where `TrainingArguments` are built.

`auto` (the default) leaves the choice to `TrainingArguments` / Accelerate as everywhere in HF: CUDA when present,
else CPU. `cpu` forces the CPU (`use_cpu=True`); `cuda` requires a GPU and fails at once when there is none.
The choice travels in `$HF_EXT_DEVICE`, so Flower simulation clients and parallel worker processes, which get no
Python arguments from the reproduce script, train on the same device.
"""

from __future__ import annotations

import argparse
import os

DEVICE_ENV = "HF_EXT_DEVICE"
DEVICES = ("auto", "cpu", "cuda")


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """Adds `--device {auto,cpu,cuda}` (default `auto`) to a reproduce / train parser."""
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default=os.environ.get(DEVICE_ENV, "auto"),
        help="training device: auto (CUDA when present, as TrainingArguments decides), cpu or cuda",
    )


def set_device(device: str | None) -> str:
    """Records the run's device in `$HF_EXT_DEVICE` (inherited by workers); returns it."""
    device = device or "auto"
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available (use --device auto or cpu)")
    os.environ[DEVICE_ENV] = device
    return device


def use_cpu() -> bool:
    """`TrainingArguments(use_cpu=...)` for the current run: `True` only when `--device cpu` was asked for."""
    device = os.environ.get(DEVICE_ENV, "auto")
    if device not in DEVICES:
        raise ValueError(f"${DEVICE_ENV} must be one of {DEVICES}, got {device!r}")
    return device == "cpu"


def torch_device() -> str:
    """The torch device string for code outside `Trainer` (evaluation loops): `cuda` when asked or available."""
    import torch

    device = os.environ.get(DEVICE_ENV, "auto")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device
