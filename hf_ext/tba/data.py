"""Rendered pose-and-shape data as a `datasets.Dataset`: images of a body with known parameters."""

from __future__ import annotations

import torch

from .body import BodyModel
from .render import render


def render_batch(body: BodyModel, n: int, seed: int, image_size: int = 64, chunk: int = 256):
    """`(images (n, 3, S, S) in [0, 1], params (n, P))`: parameters sampled from the body's prior and rendered with
    random backgrounds and colour jitter; the same seed gives the same data."""
    gen = torch.Generator().manual_seed(seed)
    params = body.sample_params(n, gen)
    images = torch.cat([render(body, params[i : i + chunk], gen, image_size) for i in range(0, n, chunk)])
    return images, params


def make_dataset(body: BodyModel, n: int, seed: int, image_size: int = 64):
    """A `datasets.Dataset` with columns `pixel_values` (float32 `3 x S x S`) and `labels` (the body parameters),
    formatted as torch tensors."""
    from datasets import Dataset

    if n < 1:
        raise ValueError(f"the dataset needs at least one image, got n={n}")
    images, params = render_batch(body, n, seed, image_size)
    ds = Dataset.from_dict({"pixel_values": images.numpy(), "labels": params.numpy()})
    return ds.with_format("torch")


def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
    """Stacks dataset rows into a batch (the Trainer's data collator)."""
    out = {"pixel_values": torch.stack([torch.as_tensor(r["pixel_values"], dtype=torch.float32) for r in rows])}
    if "labels" in rows[0]:
        out["labels"] = torch.stack([torch.as_tensor(r["labels"], dtype=torch.float32) for r in rows])
    return out


__all__ = ["collate", "make_dataset", "render_batch"]
