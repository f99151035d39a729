"""Per-party data on disk: each party's process reads only its own feature block, as a `datasets.Dataset` keyed by
entity id; the active party reads only the labels.

**Party dataset** (one per party, `Dataset.save_to_disk` folder), one row per entity the party holds:

| column      | type                 | meaning                                                                        |
|-------------|----------------------|--------------------------------------------------------------------------------|
| `entity_id` | `int64`              | the entity's id; aligned and test ids are the PSI result every party shares    |
| `split`     | `string`             | `"aligned"` (training, labelled at the active party), `"unaligned"` (this party only), `"test"` |
| `features`  | `list<float32>`      | this party's feature block (the same width on every row)                       |

Unaligned ids are local: they need not be unique across parties and never leave the party.

**Label dataset** (the active party's): `entity_id` (`int64`), `split` (`"aligned"` or `"test"`), `label` (`int64`).

Point a party at its folder with the SuperNode's node config `data-path` (deployment:
`flower-supernode --node-config "partition-id=1 num-partitions=2 data-path='/data/party-1'"`), and the active party
at its labels with the run config `labels-path`. [`export_party_datasets`] writes this layout from a simulated
split (the example in the README and the Flower app's folder).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .data import LabelData, PartyData, VerticalSplit

SPLITS = ("aligned", "unaligned", "test")


def party_dataset(split: VerticalSplit, k: int):
    """Party `k`'s rows of a simulated split as a `datasets.Dataset` (the documented format)."""
    from datasets import Dataset, Features, Sequence, Value

    part = split.party(k)
    ids = [part.aligned_ids, split.unaligned_ids[k], part.test_ids]
    blocks = [part.aligned_features, part.unaligned_features, part.test_features]
    features = Features({"entity_id": Value("int64"), "split": Value("string"),
                         "features": Sequence(Value("float32"), length=part.width)})  # fmt: skip
    return Dataset.from_dict({
        "entity_id": np.concatenate(ids).astype(np.int64),
        "split": sum(([name] * len(i) for name, i in zip(SPLITS, ids)), []),
        "features": np.concatenate(blocks).astype(np.float32),
    }, features=features)  # fmt: skip


def label_dataset(split: VerticalSplit):
    """The active party's labels of a simulated split as a `datasets.Dataset`."""
    from datasets import Dataset

    labels = split.labels()
    return Dataset.from_dict({
        "entity_id": np.concatenate([labels.aligned_ids, labels.test_ids]).astype(np.int64),
        "split": ["aligned"] * len(labels.aligned_ids) + ["test"] * len(labels.test_ids),
        "label": np.concatenate([labels.aligned_labels, labels.test_labels]).astype(np.int64),
    })  # fmt: skip


def export_party_datasets(split: VerticalSplit, out_dir) -> dict[str, Path]:
    """Writes `party-<k>/` for every party and `labels/` under `out_dir`; returns the folders."""
    out = Path(out_dir)
    paths = {}
    for k in range(split.config.num_parties):
        paths[f"party-{k}"] = out / f"party-{k}"
        party_dataset(split, k).save_to_disk(str(paths[f"party-{k}"]))
    paths["labels"] = out / "labels"
    label_dataset(split).save_to_disk(str(paths["labels"]))
    return paths


def _load(path, columns: dict[str, str], what: str):
    from datasets import load_from_disk

    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{what}: no dataset folder at {folder} (write one with Dataset.save_to_disk)")
    ds = load_from_disk(str(folder))
    if hasattr(ds, "keys") and not hasattr(ds, "column_names"):  # a DatasetDict
        raise ValueError(f"{what}: {folder} holds a DatasetDict; save one Dataset with a 'split' column instead")
    missing = [c for c in columns if c not in ds.column_names]
    if missing:
        raise ValueError(f"{what}: {folder} lacks the columns {missing} (it has {ds.column_names}); expected "
                         f"{columns}")  # fmt: skip
    return ds


def _check_ids(ids: np.ndarray, what: str) -> None:
    if ids.size and (ids < 0).any():
        raise ValueError(f"{what}: entity_id must be >= 0")
    if np.unique(ids).size != ids.size:
        raise ValueError(f"{what}: entity ids are not unique")


def load_party_dataset(path, party_index: int) -> PartyData:
    """A party's own data from a saved party dataset (see the module docstring), checked: known splits, one
    feature width, finite values, unique aligned and test ids; rows sorted by entity id."""
    what = f"party {party_index} data"
    ds = _load(path, {"entity_id": "int64", "split": "string", "features": "list<float32>"}, what).with_format("numpy")
    split = np.asarray(ds["split"]).astype(str)
    unknown = sorted(set(split.tolist()) - set(SPLITS))
    if unknown:
        raise ValueError(f"{what}: split must be one of {SPLITS}, got {unknown}")
    ids = np.asarray(ds["entity_id"]).astype(np.int64)
    try:
        x = np.asarray(ds["features"], dtype=np.float32)
    except ValueError as err:
        raise ValueError(f"{what}: every row's features must have the same width ({err})") from None
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"{what}: features must be one non-empty float vector per row, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{what}: features contain NaN or inf")

    def rows(name):
        sel = np.flatnonzero(split == name)
        sel = sel[np.argsort(ids[sel], kind="stable")]
        if name != "unaligned":
            _check_ids(ids[sel], f"{what} ({name})")
        return ids[sel], np.ascontiguousarray(x[sel])

    (a_ids, a_x), (_, u_x), (t_ids, t_x) = rows("aligned"), rows("unaligned"), rows("test")
    if len(a_ids) == 0 or len(u_x) < 2:
        raise ValueError(f"{what}: needs aligned rows and at least 2 unaligned rows, got {len(a_ids)} and {len(u_x)}")
    return PartyData(party_index=party_index, aligned_ids=a_ids, aligned_features=a_x, unaligned_features=u_x,
                     test_ids=t_ids, test_features=t_x)  # fmt: skip


def load_label_dataset(path, num_classes: int, unseen_class: int | None = None) -> LabelData:
    """The active party's labels from a saved label dataset, checked: labels in `[0, num_classes)`, unique ids."""
    what = "label data"
    ds = _load(path, {"entity_id": "int64", "split": "string", "label": "int64"}, what).with_format("numpy")
    split = np.asarray(ds["split"]).astype(str)
    ids, labels = np.asarray(ds["entity_id"]).astype(np.int64), np.asarray(ds["label"])
    if labels.dtype.kind not in "iu" or (labels.size and (labels.min() < 0 or labels.max() >= num_classes)):
        raise ValueError(f"{what}: label must be integer classes in [0, {num_classes})")
    unknown = sorted(set(split.tolist()) - {"aligned", "test"})
    if unknown:
        raise ValueError(f"{what}: split must be 'aligned' or 'test', got {unknown}")
    out = {}
    for name in ("aligned", "test"):
        sel = np.flatnonzero(split == name)
        sel = sel[np.argsort(ids[sel], kind="stable")]
        _check_ids(ids[sel], f"{what} ({name})")
        out[name] = (ids[sel], labels[sel].astype(np.int64))
    if len(out["aligned"][0]) == 0:
        raise ValueError(f"{what}: no aligned labelled rows")
    return LabelData(aligned_ids=out["aligned"][0], aligned_labels=out["aligned"][1], test_ids=out["test"][0],
                     test_labels=out["test"][1], num_classes=num_classes,
                     class_names=tuple(str(c) for c in range(num_classes)), unseen_class=unseen_class)  # fmt: skip


__all__ = ["export_party_datasets", "label_dataset", "load_label_dataset", "load_party_dataset", "party_dataset"]
