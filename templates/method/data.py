"""Data for MyMethod: the user's table (schema below) read through `datasets`, and the synthetic test bed.

Schema: a column `features` (a list of floats, the same length on every row) and a column `label` (a float).
"""

from __future__ import annotations

import os

import numpy as np

REQUIRED_COLUMNS = {"features": "list of floats", "label": "float"}


def load_table(data: str | os.PathLike, split: str = "train"):
    """A local CSV / JSON / Parquet file (by extension) or a Hub dataset id, through `datasets.load_dataset`."""
    from datasets import load_dataset

    path = str(data)
    builders = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
    ext = os.path.splitext(path)[1].lower()
    if ext in builders:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"data file {path} does not exist")
        dataset = load_dataset(builders[ext], data_files={split: path}, split=split)
    else:
        dataset = load_dataset(path, split=split)
    missing = [c for c in REQUIRED_COLUMNS if c not in dataset.column_names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; the schema is {REQUIRED_COLUMNS}")
    return dataset


def synthetic_regression(num_rows: int, num_features: int, seed: int, noise: float = 0.1):
    """`y = x·w + noise` with a fixed `w`: the test bed of `hf-ext reproduce mymethod` (quick and full scale)."""
    from datasets import Dataset

    rng = np.random.default_rng(seed)
    w = np.linspace(-1.0, 1.0, num_features)
    x = rng.normal(size=(num_rows, num_features)).astype(np.float32)
    y = (x @ w + noise * rng.normal(size=num_rows)).astype(np.float32)
    return Dataset.from_dict({"features": x.tolist(), "label": y.tolist()})


def collate(rows: list[dict]) -> dict:
    import torch

    return {
        "features": torch.tensor([r["features"] for r in rows], dtype=torch.float32),
        "labels": torch.tensor([r["label"] for r in rows], dtype=torch.float32),
    }
