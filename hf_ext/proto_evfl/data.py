"""Vertically partitioned data in the paper's setting, from scikit-learn's bundled tables (offline).

* Entities are the table's rows; each party holds one contiguous block of feature columns (sklearn `digits`: the
  8×8 image split into vertical stripes, left/right halves for two parties; `breast_cancer`: blocks of the 30
  measurements).
* A few **aligned** entities (class-balanced, `aligned_per_class` per class) are held by every party; only the
  active party knows their labels.
* Each party also holds many **unaligned** entities that no other party has (disjoint pools), with long-tail class
  frequencies `n_max · IR^(−rank/(C−1))`; the class ranking is rotated by party, so dominant classes differ
  between parties (intra- and inter-party imbalance).
* **Zero-shot variant**: `unseen_class` has no aligned (labelled) sample at all; it is placed at rank 1 of the last
  (passive) party's long tail, so only the unaligned pools contain it.
* The test set is aligned and class-balanced (`test_per_class` per class).

[`VerticalSplit.party`] returns what one party holds (features only) and [`VerticalSplit.labels`] what the active
party's label holder holds; the unaligned pools' true labels are kept for diagnostics only.
"""

from __future__ import annotations

import functools
import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hf_ext.core.user_data import Column, DataSchema

DATASETS = ("digits", "breast_cancer", "fashion_mnist")
NUM_CLASSES = {"digits": 10, "breast_cancer": 2, "fashion_mnist": 10}
# Debian's `dataset-fashion-mnist` package (apt-get install -y dataset-fashion-mnist) installs the four idx files here.
FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                       "t10k-labels-idx1-ubyte.gz")  # fmt: skip
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")  # fmt: skip


@dataclass(frozen=True)
class VerticalDataConfig:
    """How to build a vertical split.

    Args:
        dataset (`str`, defaults to `"digits"`): `"digits"` (1,797 × 64, 10 classes), `"breast_cancer"`
            (569 × 30, 2 classes) or `"fashion_mnist"` (70,000 × 784, 10 classes; Debian `dataset-fashion-mnist`).
        num_parties (`int`, defaults to 2): number of parties (feature blocks).
        aligned_per_class (`int`, defaults to 10): aligned labelled samples per class (100 for digits).
        test_per_class (`int`, defaults to 30): aligned test samples per class.
        imbalance_ratio (`float`, defaults to 50): head/tail ratio of each party's unaligned pool.
        max_unaligned_per_class (`int`, defaults to 120): cap on a party's head-class count.
        unseen_class (`int`, *optional*): the class never labelled (zero-shot variant); `None` for none.
        seed (`int`, defaults to 0): seed of the split.
    """

    dataset: str = "digits"
    num_parties: int = 2
    aligned_per_class: int = 10
    test_per_class: int = 30
    imbalance_ratio: float = 50.0
    max_unaligned_per_class: int = 120
    unseen_class: int | None = None
    seed: int = 0

    def __post_init__(self):
        from hf_ext.core.validation import check_positive_int

        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        for name, low in (("num_parties", 1), ("aligned_per_class", 1), ("test_per_class", 1),
                          ("max_unaligned_per_class", 1), ("seed", 0)):  # fmt: skip
            check_positive_int(f"VerticalDataConfig.{name}", getattr(self, name), low)
        if self.unseen_class is not None:
            check_positive_int("VerticalDataConfig.unseen_class", self.unseen_class, 0)
        ratio = self.imbalance_ratio
        if ratio is None or isinstance(ratio, bool | str) or not isinstance(ratio, int | float) or ratio != ratio:
            raise ValueError(f"VerticalDataConfig.imbalance_ratio must be a finite number >= 1, got {ratio!r}")
        if ratio == float("inf"):
            raise ValueError(f"VerticalDataConfig.imbalance_ratio must be a finite number >= 1, got {ratio!r}")
        if self.num_parties < 2:
            raise ValueError(f"vertical FL needs at least 2 parties, got num_parties={self.num_parties}")
        if self.aligned_per_class < 1 or self.test_per_class < 1:
            raise ValueError("aligned_per_class and test_per_class must be >= 1")
        if not self.imbalance_ratio >= 1:
            raise ValueError(f"imbalance_ratio must be >= 1, got {self.imbalance_ratio}")


@dataclass(frozen=True)
class PartyData:
    """What one party holds: its feature block of the aligned, unaligned and test entities, and entity ids."""

    party_index: int
    aligned_ids: np.ndarray
    aligned_features: np.ndarray
    unaligned_features: np.ndarray
    test_ids: np.ndarray
    test_features: np.ndarray

    @property
    def width(self) -> int:
        return int(self.aligned_features.shape[1])


@dataclass(frozen=True)
class LabelData:
    """What the active party's label holder holds: the aligned and test entity ids and their labels."""

    aligned_ids: np.ndarray
    aligned_labels: np.ndarray
    test_ids: np.ndarray
    test_labels: np.ndarray
    num_classes: int
    class_names: tuple[str, ...]
    unseen_class: int | None


@dataclass(frozen=True)
class VerticalSplit:
    """A complete simulated vertical federation (see the module docstring). Arrays are read-only."""

    config: VerticalDataConfig
    features: np.ndarray
    labels_all: np.ndarray
    column_blocks: tuple[np.ndarray, ...]
    class_names: tuple[str, ...]
    aligned_ids: np.ndarray
    test_ids: np.ndarray
    unaligned_ids: tuple[np.ndarray, ...]
    class_ranks: np.ndarray = field(repr=False)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def party(self, k: int) -> PartyData:
        if not 0 <= k < self.config.num_parties:
            raise ValueError(f"party index {k} is out of range for {self.config.num_parties} parties")
        return _party_data(self.config, k)

    def labels(self) -> LabelData:
        return LabelData(
            aligned_ids=self.aligned_ids,
            aligned_labels=self.labels_all[self.aligned_ids],
            test_ids=self.test_ids,
            test_labels=self.labels_all[self.test_ids],
            num_classes=self.num_classes,
            class_names=self.class_names,
            unseen_class=self.config.unseen_class,
        )

    def unaligned_labels(self, k: int) -> np.ndarray:
        """True classes of party `k`'s unaligned pool: for diagnostics and tests only, never for training."""
        return self.labels_all[self.unaligned_ids[k]]

    def class_counts(self) -> dict[str, np.ndarray]:
        """Per-class counts of the aligned set, the test set and each party's unaligned pool."""
        c = self.num_classes
        out = {
            "aligned": np.bincount(self.labels_all[self.aligned_ids], minlength=c),
            "test": np.bincount(self.labels_all[self.test_ids], minlength=c),
        }
        for k in range(self.config.num_parties):
            out[f"unaligned_party_{k}"] = np.bincount(self.unaligned_labels(k), minlength=c)
        return out


def fashion_mnist_dir() -> Path:
    """The folder of the Fashion-MNIST idx files: `$HF_EXT_FASHION_MNIST_DATA` when set, else the Debian package's
    `/usr/share/datasets/fashion-mnist`.

    Raises:
        `DataNotFoundError` naming the Debian package when the files are not there.
    """
    from hf_ext.core.paths import DataNotFoundError, data_env_var

    var = data_env_var("fashion_mnist")
    folder = Path(os.environ.get(var) or FASHION_MNIST_DIR)
    missing = [f for f in FASHION_MNIST_FILES if not (folder / f).is_file()]
    if missing:
        raise DataNotFoundError(
            f"Fashion-MNIST not found in {folder} (missing {', '.join(missing)}). Install the Debian package "
            f"{FASHION_MNIST_PACKAGE!r} (`apt-get install -y {FASHION_MNIST_PACKAGE}`), or set ${var} to a folder "
            "holding the four idx .gz files."
        )
    return folder


def _read_idx(path: Path) -> np.ndarray:
    """An idx file (the MNIST format): big-endian magic `0x0000 dtype ndim`, `ndim` uint32 sizes, then the data."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte idx file")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape}, but it holds {data.size} values")
    return data.reshape(shape)


@functools.lru_cache(maxsize=1)
def _fashion_mnist() -> tuple[np.ndarray, np.ndarray]:
    folder = fashion_mnist_dir()
    images = [_read_idx(folder / f) for f in FASHION_MNIST_FILES[0::2]]
    labels = [_read_idx(folder / f) for f in FASHION_MNIST_FILES[1::2]]
    x = (np.concatenate(images).reshape(-1, 28 * 28) / np.float32(255.0)).astype(np.float32)
    x.flags.writeable = False
    return x, np.concatenate(labels).astype(np.int64)


@functools.lru_cache(maxsize=32)
def _party_data(config: VerticalDataConfig, k: int) -> PartyData:
    # Rows first, then the party's columns: never a copy of the whole table's block (70k rows for Fashion-MNIST).
    # Cached per process: a SuperNode's party is rebuilt for every message.
    split = build_vertical_split(config)
    cols = split.column_blocks[k]

    def block(ids):
        return split.features[np.ix_(ids, cols)]

    return PartyData(
        party_index=k,
        aligned_ids=split.aligned_ids,
        aligned_features=block(split.aligned_ids),
        unaligned_features=block(split.unaligned_ids[k]),
        test_ids=split.test_ids,
        test_features=block(split.test_ids),
    )


def _load_table(dataset: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], str]:
    from sklearn import datasets

    if dataset == "fashion_mnist":  # train and t10k pooled: 70,000 × 784, 7,000 per class
        x, y = _fashion_mnist()
        return x, y, FASHION_MNIST_CLASSES, "image"
    if dataset == "digits":
        bunch = datasets.load_digits()
        return bunch.data / 16.0, bunch.target, tuple(str(c) for c in range(10)), "image"
    bunch = datasets.load_breast_cancer()
    return bunch.data, bunch.target, tuple(str(n) for n in bunch.target_names), "table"


def column_blocks(dataset: str, num_parties: int) -> tuple[np.ndarray, ...]:
    """The feature columns of each party: vertical image stripes for digits, contiguous blocks for tables."""
    if dataset in ("digits", "fashion_mnist"):
        side = 8 if dataset == "digits" else 28
        stripes = np.array_split(np.arange(side), num_parties)
        if min(len(s) for s in stripes) == 0:
            raise ValueError(f"{dataset} has {side} pixel columns; cannot split them among {num_parties} parties")
        return tuple(np.array([r * side + c for r in range(side) for c in s]) for s in stripes)
    n_features = 30
    if num_parties > n_features:
        raise ValueError(f"breast_cancer has {n_features} features; cannot split them among {num_parties} parties")
    return tuple(np.array_split(np.arange(n_features), num_parties))


def feature_widths(dataset: str, num_parties: int) -> list[int]:
    """Each party's feature-block width: what the federation agrees on before training (no data needed)."""
    return [len(b) for b in column_blocks(dataset, num_parties)]


def long_tail_fractions(ranks: np.ndarray, imbalance_ratio: float) -> np.ndarray:
    """`IR^(−rank/(C−1))`: 1 for the head class, `1/IR` for the tail class."""
    c = ranks.shape[-1]
    return imbalance_ratio ** (-ranks / max(c - 1, 1))


def _class_ranks(base_order: np.ndarray, num_parties: int) -> np.ndarray:
    """`ranks[k, c]`: rank of class `c` in party `k`'s long tail (party `k`'s order is the base order rotated by
    `k · C/K`, so the parties' dominant classes differ)."""
    c = base_order.shape[0]
    shift = max(c // num_parties, 1)
    ranks = np.empty((num_parties, c), dtype=np.int64)
    for k in range(num_parties):
        order = np.roll(base_order, -k * shift)  # order[r] = class at rank r
        ranks[k, order] = np.arange(c)
    return ranks


@functools.lru_cache(maxsize=16)
def build_vertical_split(config: VerticalDataConfig) -> VerticalSplit:
    """Builds (and caches; the result is immutable) the vertical split described by `config`."""
    x, y, class_names, _ = _load_table(config.dataset)
    num_classes = len(class_names)
    if config.unseen_class is not None and not 0 <= config.unseen_class < num_classes:
        raise ValueError(f"unseen_class must be in [0, {num_classes}) or None, got {config.unseen_class}")
    blocks = column_blocks(config.dataset, config.num_parties)
    rng = np.random.default_rng(config.seed)
    test, aligned, pools = [], [], []
    for c in range(num_classes):
        rows = rng.permutation(np.flatnonzero(y == c))
        n_aligned = 0 if c == config.unseen_class else config.aligned_per_class
        if len(rows) < config.test_per_class + n_aligned + config.num_parties:
            raise ValueError(f"class {c} has only {len(rows)} rows: too few for the requested test/aligned sizes")
        test.append(rows[: config.test_per_class])
        aligned.append(rows[config.test_per_class : config.test_per_class + n_aligned])
        pools.append(rows[config.test_per_class + n_aligned :])
    base_order = rng.permutation(num_classes)
    if config.unseen_class is not None:
        # Put the unseen class at rank 1 of the last party: frequent there, rare at the others.
        shift = max(num_classes // config.num_parties, 1)
        target = (1 + (config.num_parties - 1) * shift) % num_classes
        here = int(np.flatnonzero(base_order == config.unseen_class)[0])
        base_order[[here, target]] = base_order[[target, here]]
    ranks = _class_ranks(base_order, config.num_parties)
    fractions = long_tail_fractions(ranks, config.imbalance_ratio)  # (K, C)
    available = np.array([len(p) for p in pools])
    head = min(config.max_unaligned_per_class, int(np.floor((available / fractions.sum(0)).min())))
    counts = np.maximum(1, np.round(head * fractions)).astype(np.int64)
    unaligned = [[] for _ in range(config.num_parties)]
    for c in range(num_classes):
        start = 0
        for k in range(config.num_parties):
            take = min(int(counts[k, c]), len(pools[c]) - start - (config.num_parties - k - 1))
            unaligned[k].append(pools[c][start : start + take])
            start += take
    if config.dataset == "breast_cancer":
        x = x.copy()
        for k, cols in enumerate(blocks):
            # Each party standardises its own block with its own training rows (aligned + its unaligned pool).
            own = np.concatenate([np.concatenate(aligned), np.concatenate(unaligned[k])])
            mean, std = x[np.ix_(own, cols)].mean(0), x[np.ix_(own, cols)].std(0) + 1e-8
            x[:, cols] = (x[:, cols] - mean) / std
    x = x.astype(np.float32, copy=False)  # Fashion-MNIST is float32 already: shared, not copied per split
    arrays = dict(
        features=x,
        labels_all=y.astype(np.int64),
        aligned_ids=np.sort(np.concatenate(aligned)),
        test_ids=np.sort(np.concatenate(test)),
        unaligned_ids=tuple(np.sort(np.concatenate(u)) for u in unaligned),
        column_blocks=blocks,
        class_ranks=ranks,
    )
    for value in arrays.values():
        for arr in value if isinstance(value, tuple) else (value,):
            arr.flags.writeable = False
    return VerticalSplit(config=config, class_names=class_names, **arrays)


# ---- the user's own data (read by `party_data.read_party_files`; the paper's terms: one feature file per party,
# keyed by entity id, and the active party's labels) --------------------------------------------------------------


def party_schema(id_column: str = "id") -> DataSchema:
    """The columns of one party's feature file (`--id_column` renames the key)."""
    return DataSchema(
        (
            Column(
                id_column,
                "any",
                "the entity's id (integer or string), unique in the file: the key that aligns "
                "the parties (the PSI result)",
            ),
        ),  # fmt: skip
        description="one party's feature file: one row per entity this party holds; every other column is a "
        "numeric feature of this party's block (int or float; scale them yourself, e.g. standardise)",
    )


def labels_schema(id_column: str = "id", label_column: str = "label") -> DataSchema:
    """The columns of the active party's labels file (`--id_column`, `--label_column` rename them)."""
    return DataSchema(
        (
            Column(id_column, "any", "the entity's id, as in the party files"),
            Column(label_column, "any", "the entity's class: an integer in [0, C) or a class name (string)"),
        ),
        description="the active party's labels: one row per labelled entity",
    )


PARTY_SCHEMA = party_schema()
LABELS_SCHEMA = labels_schema()


__all__ = [
    "DATASETS",
    "LABELS_SCHEMA",
    "PARTY_SCHEMA",
    "NUM_CLASSES",
    "LabelData",
    "PartyData",
    "VerticalDataConfig",
    "VerticalSplit",
    "build_vertical_split",
    "column_blocks",
    "fashion_mnist_dir",
    "feature_widths",
    "labels_schema",
    "long_tail_fractions",
    "party_schema",
]
