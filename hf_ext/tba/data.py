"""TBA's data: the user's images ([`SCHEMA`], [`load_image_data`], [`split_images`]: what the attack is run on and
the DHNG trains on), and rendered pose-and-shape data as a `datasets.Dataset` (images of a body with known
parameters: the reproduction's test bed)."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import torch

from hf_ext.core.user_data import Column, DataSchema, UserDataError

from .body import BodyModel, body_device
from .render import render


def render_batch(body: BodyModel, n: int, seed: int, image_size: int = 64, chunk: int = 256):
    """`(images (n, 3, S, S) in [0, 1], params (n, P))`: parameters sampled from the body's prior and rendered with
    random backgrounds and colour jitter; the same seed gives the same data, on whatever device the body is (the
    renders are made on the CPU, where the seeded generator lives, then moved: a GPU run sees the CPU run's images)."""
    device = body_device(body)
    if device.type != "cpu":
        images, params = render_batch(copy.deepcopy(body).cpu(), n, seed, image_size, chunk)
        return images.to(device), params.to(device)
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


SCHEMA = DataSchema(
    (
        Column(
            "image",
            "image",
            "the image to attack (for a pose victim: a person): an image in an image folder, or a file path "
            "(relative to the table's folder) in a CSV / JSON / Parquet table",
        ),
    ),
    description="one image per row; no labels: the attack pushes the victim's prediction away from its own clean "
    "prediction",
)


def load_image_data(source):
    """The user's images as a `datasets.DatasetDict` with one column `image` (PIL), checked against [`SCHEMA`] (a
    missing or ill-typed column, or a path that does not exist, is a `UserDataError` naming it). `source`: a folder of
    images (flat, class sub-folders, or with a `metadata.csv`), a CSV / JSON / Parquet table with an `image` path
    column, or a Hub dataset id."""
    from datasets import Dataset, DatasetDict
    from datasets import Image as ImageFeature

    from hf_ext.core.user_data import load_user_data

    data = load_user_data(source, schema=SCHEMA)
    path = Path(os.fspath(source)).expanduser()
    root = path.parent if path.is_file() else path
    out = {}
    for split, table in data.items():
        table = table.select_columns(["image"])
        if type(table.features["image"]).__name__ != "Image":
            paths = [str(p if Path(p).is_absolute() else root / p) for p in table["image"]]
            missing = [p for p in paths if not Path(p).is_file()]
            if missing:
                raise UserDataError(
                    f"column 'image' of {os.fspath(source)!r} (split {split!r}) names {len(missing)} file(s) that do "
                    f"not exist, e.g. {missing[0]!r} (relative paths are read from {root})"
                )
            table = Dataset.from_dict({"image": paths}).cast_column("image", ImageFeature())
        out[split] = table
    return DatasetDict(out)


def split_images(data, *, seed: int = 0, test: float = 0.2):
    """`train` (the DHNG trains on it) and `test` (attacked) splits: the user's own test split when there is one,
    else `test` of the rows, seeded (`hf_ext.core.user_data.split_data`; evaluate rebuilds it from the record)."""
    from hf_ext.core.user_data import split_data

    return split_data(data, validation=0.0, test=test, seed=seed)


def to_pixel_values(images, image_size: int) -> torch.Tensor:
    """PIL images → float `(N, 3, image_size, image_size)` in [0, 1] (RGB, bilinear resize)."""
    import numpy as np
    from PIL import Image

    arrays = [
        np.asarray(im.convert("RGB").resize((image_size, image_size), Image.BILINEAR), dtype=np.float32) / 255.0
        for im in images
    ]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


def write_example_images(folder: str | Path, n: int = 12, size: int = 64) -> Path:
    """Writes `n` small PNGs of a stick figure in different poses on noisy backgrounds (a stand-in for photos of
    people), for the docs and tests."""
    import math

    import numpy as np
    from PIL import Image, ImageDraw

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        background = (rng.random((size, size, 3)) * 80 + 100).astype(np.uint8)
        image = Image.fromarray(background)
        draw = ImageDraw.Draw(image)
        c, s = size / 2, size / 64
        a = 0.4 + 0.9 * i / max(n - 1, 1)  # the arms' angle: the "pose"
        hip, neck = (c, c + 10 * s), (c, c - 12 * s)
        draw.ellipse([c - 6 * s, c - 24 * s, c + 6 * s, c - 12 * s], fill=(230, 190, 160))
        draw.line([neck, hip], fill=(40, 40, 160), width=max(1, int(4 * s)))
        for side in (-1, 1):
            hand = (c + side * 18 * s * math.sin(a), neck[1] + 18 * s * math.cos(a))
            foot = (c + side * 10 * s, c + 28 * s)
            draw.line([neck, hand], fill=(230, 190, 160), width=max(1, int(3 * s)))
            draw.line([hip, foot], fill=(60, 60, 60), width=max(1, int(3 * s)))
        image.save(folder / f"person_{i:03d}.png")
    return folder


__all__ = ["SCHEMA", "collate", "load_image_data", "make_dataset", "render_batch", "split_images",
           "to_pixel_values", "write_example_images"]  # fmt: skip
