"""Data for TinyAlign: the user's image–caption pairs ([`SCHEMA`], [`load_caption_data`], [`split_caption_data`]);
real handwritten digits (scikit-learn's bundled `load_digits`, 1,797 images of 8×8) with captions from the class
plus attributes measured on each image, memory/train/test splits (the reproduction's test bed); and converters for
any image–caption `datasets.Dataset` or a COCO-style folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from hf_ext.core.user_data import Column, DataSchema, UserDataError

SCHEMA = DataSchema(
    (
        Column(
            "image",
            "image",
            "the image: an `imagefolder` image, or a file path (relative to the table's folder) in a CSV / JSON / "
            "Parquet table",
        ),
        Column("caption", "str", "its caption (free text; the LM learns to write it after the image)"),
    ),
    description="one image–caption pair per row (the pretraining pairs of the paper's stage 1)",
)

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
THICKNESS = ("thin", "medium", "thick")
WIDTH = ("narrow", "regular", "wide")
SLANT = ("slanted left", "upright", "slanted right")
SPLIT_FRACTIONS = {"memory": 0.4, "train": 0.4, "test": 0.2}
VALIDATION_SHARE_OF_TEST = 1 / 3  # the validation split is carved from the 20 % test part (training is unchanged)


def measure_attributes(images: np.ndarray) -> dict[str, np.ndarray]:
    """Per image (`(N, 8, 8)` in [0, 1]): ink mass (stroke thickness), ink bounding-box width, and slant = the
    regression slope of x on y (y pointing up) over the ink distribution, so > 0 leans right."""
    n, s, _ = images.shape
    ys, xs = np.mgrid[0:s, 0:s].astype(np.float64)
    ys = (s - 1) - ys
    mass = images.sum(axis=(1, 2))
    w = images / np.maximum(mass[:, None, None], 1e-9)
    mx, my = (w * xs).sum(axis=(1, 2)), (w * ys).sum(axis=(1, 2))
    cov = (w * (xs - mx[:, None, None]) * (ys - my[:, None, None])).sum(axis=(1, 2))
    var_y = (w * (ys - my[:, None, None]) ** 2).sum(axis=(1, 2))
    cols = (images > 0.25).any(axis=1)
    width = np.array([np.ptp(np.flatnonzero(c)) + 1 if c.any() else 0 for c in cols], dtype=np.float64)
    return {"ink": mass, "width": width, "slant": cov / np.maximum(var_y, 1e-9)}


def tercile_edges(values: np.ndarray) -> np.ndarray:
    return np.quantile(values, [1 / 3, 2 / 3])


def caption_for(label: int, attrs: dict[str, float], edges: dict[str, np.ndarray]) -> str:
    """E.g. `"a thick narrow seven , slanted right"`: the class alone does not determine the caption."""
    t = THICKNESS[int(np.searchsorted(edges["ink"], attrs["ink"]))]
    w = WIDTH[int(np.searchsorted(edges["width"], attrs["width"]))]
    sl = SLANT[int(np.searchsorted(edges["slant"], attrs["slant"]))]
    return f"a {t} {w} {DIGIT_WORDS[label]} , {sl}"


def load_digit_captions(seed: int = 0):
    """The digits as a `datasets.DatasetDict` with splits `memory` (40 %), `train` (40 %), `validation` (1/3 of the
    remaining 20 %, 120 digits) and `test` (the other 240), stratified by class with a fixed `seed`. Columns:
    `pixel_values` (1×8×8 in [0, 1]), `caption`, `label`, `index`. Attribute terciles are fitted on the memory split
    only and applied to all splits. The validation split picks what a run selects (the published artifact); it was
    carved from the test part so that the memory and train splits, and so every training run, stay as they were."""
    from datasets import Dataset, DatasetDict
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(int)
    idx = np.arange(len(labels))
    mem, rest = train_test_split(idx, train_size=SPLIT_FRACTIONS["memory"], stratify=labels, random_state=seed)
    train, test = train_test_split(
        rest,
        test_size=SPLIT_FRACTIONS["test"] / (1 - SPLIT_FRACTIONS["memory"]),
        stratify=labels[rest],
        random_state=seed,
    )
    validation, test = train_test_split(
        test, train_size=VALIDATION_SHARE_OF_TEST, stratify=labels[test], random_state=seed
    )
    attrs = measure_attributes(images)
    edges = {k: tercile_edges(v[mem]) for k, v in attrs.items()}

    def split(ids):
        ids = np.sort(ids)
        return Dataset.from_dict(
            {
                "pixel_values": images[ids][:, None].tolist(),
                "caption": [caption_for(labels[i], {k: v[i] for k, v in attrs.items()}, edges) for i in ids],
                "label": labels[ids].tolist(),
                "index": ids.tolist(),
            }
        )

    return DatasetDict(
        {"memory": split(mem), "train": split(train), "validation": split(validation), "test": split(test)}
    )


def to_model_images(images, image_size: int = 8, num_channels: int = 1) -> np.ndarray:
    """PIL images or arrays → float32 `(N, C, S, S)` in [0, 1] (grey or RGB, resized)."""
    from PIL import Image

    out = []
    for img in images:
        if not isinstance(img, Image.Image):
            arr = np.asarray(img, dtype=np.float32)
            arr = arr / 255.0 if arr.max() > 1.0 else arr
            img = Image.fromarray((np.clip(arr.squeeze(), 0, 1) * 255).astype(np.uint8))
        img = img.convert("L" if num_channels == 1 else "RGB").resize((image_size, image_size), Image.BILINEAR)
        arr = np.asarray(img, dtype=np.float32) / 255.0
        out.append(arr[None] if num_channels == 1 else arr.transpose(2, 0, 1))
    return np.stack(out)


def from_image_caption_dataset(
    dataset,
    image_column: str = "image",
    caption_column: str = "caption",
    image_size: int = 8,
    num_channels: int = 1,
    invert: bool = False,
):
    """Any image–caption `datasets.Dataset` → TinyAlign columns (`pixel_values`, `caption`).

    Args:
        invert (`bool`): map dark-on-light photos to light-on-dark, the digits' convention.
    """
    for col in (image_column, caption_column):
        if col not in dataset.column_names:
            raise ValueError(f"dataset has no column {col!r} (columns: {dataset.column_names})")

    def convert(batch):
        px = to_model_images(batch[image_column], image_size, num_channels)
        return {
            "pixel_values": (1.0 - px if invert else px).tolist(),
            "caption": [str(c) for c in batch[caption_column]],
        }

    return dataset.map(convert, batched=True, remove_columns=dataset.column_names)


def load_caption_folder(folder: str | Path, **kwargs):
    """A local folder of COCO-style pairs: images plus `metadata.jsonl` (one `{"file_name", "caption"}` per line, the
    `imagefolder` convention) or `captions.json` (COCO: `images` with `id`/`file_name`, `annotations` with
    `image_id`/`caption`). Returns TinyAlign columns, see [`from_image_caption_dataset`]."""
    from datasets import Dataset
    from PIL import Image

    folder = Path(folder)
    pairs = []
    if (folder / "metadata.jsonl").is_file():
        for line in (folder / "metadata.jsonl").read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                pairs.append((row["file_name"], row["caption"]))
    elif (folder / "captions.json").is_file():
        coco = json.loads((folder / "captions.json").read_text())
        names = {im["id"]: im["file_name"] for im in coco["images"]}
        pairs = [(names[a["image_id"]], a["caption"]) for a in coco["annotations"]]
    else:
        raise FileNotFoundError(f"{folder} has neither metadata.jsonl nor captions.json")
    if not pairs:
        raise ValueError(f"{folder} lists no image–caption pairs")
    ds = Dataset.from_dict(
        {"image": [Image.open(folder / f).copy() for f, _ in pairs], "caption": [c for _, c in pairs]}
    )
    return from_image_caption_dataset(ds, **kwargs)


def memory_source(data, variant: str):
    """The rows a variant's memory bank is built from: the memory split alone (honest: no training row), or, as
    released (`released-k<k>`), the memory split together with the training split itself."""
    from datasets import concatenate_datasets

    if variant.startswith("released"):
        return concatenate_datasets([data["memory"], data["train"]])
    return data["memory"]


_VARIANT = re.compile(r"baseline|(released-)?k[1-9][0-9]*")


def check_variant(variant) -> str:
    """`variant` if it is `baseline`, `k<k>` or `released-k<k>` with k >= 1; else a `ValueError` naming `--variant`."""
    if not isinstance(variant, str) or not _VARIANT.fullmatch(variant):
        raise ValueError(f"--variant must be baseline, k<k> or released-k<k> (k >= 1), got {variant!r}")
    return variant


def load_caption_data(source):
    """The user's image–caption pairs as a `datasets.DatasetDict` with columns `image` (PIL) and `caption`.

    `source` is an image folder with a `metadata.csv` / `metadata.jsonl` (`file_name`, `caption`: the `datasets`
    `imagefolder` convention), a CSV / JSON / Parquet table with `image` (a path, relative to the table's folder)
    and `caption`, a folder of `train` / `validation` / `test` tables, or a Hub dataset id. Checked against
    [`SCHEMA`] first: a missing or ill-typed column is a `UserDataError` naming it, before any model loads.
    """
    import os

    from datasets import Dataset, DatasetDict
    from datasets import Image as ImageFeature

    from hf_ext.core.user_data import load_user_data

    data = load_user_data(source, schema=SCHEMA)
    path = Path(os.fspath(source)).expanduser()
    root = path.parent if path.is_file() else path
    out = {}
    for split, table in data.items():
        table = table.select_columns(["image", "caption"])
        if type(table.features["image"]).__name__ != "Image":  # a path column: resolve it beside the table
            paths = [str(p if Path(p).is_absolute() else root / p) for p in table["image"]]
            missing = [p for p in paths if not Path(p).is_file()]
            if missing:
                raise UserDataError(
                    f"column 'image' of {os.fspath(source)!r} (split {split!r}) names {len(missing)} file(s) that do "
                    f"not exist, e.g. {missing[0]!r} (relative paths are read from {root})"
                )
            table = Dataset.from_dict({"image": paths, "caption": table["caption"]}).cast_column(
                "image", ImageFeature()
            )
        empty = [i for i, c in enumerate(table["caption"]) if c is None or not str(c).strip()]
        if empty:
            raise UserDataError(
                f"column 'caption' (split {split!r}) has {len(empty)} empty caption(s), e.g. row {empty[0]}"
            )
        out[split] = table
    return DatasetDict(out)


def split_caption_data(data, *, seed: int = 0, test: float = 0.2, memory: float = 0.4):
    """`memory` / `train` / `test` splits of the user's pairs (the reproduction's 40 / 40 / 20 %).

    The test split is the user's own when the data has one, else `test` of the rows (seeded, see
    `hf_ext.core.user_data.split_data`); a `validation` split is kept as given. The memory split (the rows the memory
    bank is built from, never trained on: the honest variant) is `memory` of all rows, taken from what is left,
    seeded too, so evaluate rebuilds the same test rows from the recorded seed."""
    from datasets import DatasetDict

    from hf_ext.core.user_data import split_data

    parts = dict(split_data(data, validation=0.0, test=test, seed=seed).items())
    if "memory" not in parts:
        train = parts["train"]
        total = len(train) + len(parts["test"])
        n_memory = max(1, round(total * memory))
        if len(train) - n_memory < 1:
            raise UserDataError(
                f"the data has {total} pairs; a memory split of {n_memory} and a test split of {len(parts['test'])} "
                "leave none to train on (add pairs, or lower --memory_fraction / --test_fraction)"
            )
        order = np.random.default_rng(seed + 1).permutation(len(train))
        parts["memory"] = train.select(sorted(order[:n_memory].tolist()))
        parts["train"] = train.select(sorted(order[n_memory:].tolist()))
    return DatasetDict(parts)


EXAMPLE_CAPTIONS = (
    "a red square on a white background",
    "a blue circle on a white background",
    "a green square on a black background",
    "a yellow circle on a black background",
)


def write_example_data(folder: str | Path, n: int = 16, size: int = 32) -> Path:
    """Writes a tiny image–caption folder in the documented format (PNG images and a `metadata.csv` with
    `file_name,caption`): coloured squares and circles, the caption saying which. For the docs and tests."""
    import csv

    from PIL import Image, ImageDraw

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    colours = {"red": (220, 30, 30), "blue": (30, 60, 220), "green": (30, 180, 60), "yellow": (230, 210, 30)}
    rows = []
    for i in range(n):
        caption = EXAMPLE_CAPTIONS[i % len(EXAMPLE_CAPTIONS)]
        colour, shape, background = caption.split()[1], caption.split()[2], caption.split()[-2]
        image = Image.new("RGB", (size, size), (255, 255, 255) if background == "white" else (0, 0, 0))
        draw = ImageDraw.Draw(image)
        lo, hi = size // 4 + i % 3, 3 * size // 4 - i % 2
        (draw.rectangle if shape == "square" else draw.ellipse)([lo, lo, hi, hi], fill=colours[colour])
        name = f"{i:03d}.png"
        image.save(folder / name)
        rows.append({"file_name": name, "caption": caption})
    with open(folder / "metadata.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["file_name", "caption"])
        writer.writeheader()
        writer.writerows(rows)
    return folder
