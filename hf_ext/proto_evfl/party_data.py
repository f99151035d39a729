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

**The user's own files** (`hf-ext train proto_evfl --party_data a.csv b.csv --labels labels.csv`, or `--data`
naming a manifest or a folder; see [`resolve_party_files`]): one feature file per party keyed by entity id
(`data.PARTY_SCHEMA`) and the active party's labels (`data.LABELS_SCHEMA`), any format `load_user_data` reads.
[`align_party_files`] aligns them by id, in the paper's terms:

- **aligned** entities are held by every party *and* labelled; a seeded `test_size` share of them (by id) is the
  test split, the rest the aligned training set;
- every other entity a party holds is **unaligned** at that party (its lower level learns from it): entities the
  other parties lack, and entities every party holds but nobody labelled. A labelled entity that some party lacks
  is unaligned where it is held and its label is not used; the count and the first ids are printed;
- a labelled id that **no** party holds is an error naming it (almost always a key mismatch: `"007"` vs `7`);
- ids must be unique within a file; each party needs at least 2 unaligned rows.

[`write_party_datasets`] then writes the aligned result in the saved-dataset layout above, which the parties read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hf_ext.core.user_data import SUFFIX_BUILDERS, Column, DataSchema, UserDataError, fingerprint, load_user_data

from .data import LabelData, PartyData, VerticalSplit, labels_schema, party_schema

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


# ---- the user's own files ----------------------------------------------------------------------------------------

MANIFEST_NAMES = ("manifest.json", "manifest.yaml", "manifest.yml")


@dataclass(frozen=True)
class PartyFiles:
    """What the user named: each party's feature file (party 0 is the active party, the label holder), the labels
    file, and the key and label column names.

    Args:
        parties (`tuple[str, ...]`): one source per party (a file, a folder or a Hub dataset id).
        labels (`str`): the labels source.
        id_column (`str`, defaults to `"id"`), label_column (`str`, defaults to `"label"`): column names.
        source (`str`): the manifest or folder they came from (`""`: named by flags).
    """

    parties: tuple[str, ...]
    labels: str
    id_column: str = "id"
    label_column: str = "label"
    source: str = ""


def resolve_party_files(
    data: str = "", party_data=(), labels: str = "", id_column: str = "id", label_column: str = "label"
) -> PartyFiles:
    """The files `--data` or `--party_data` / `--labels` name.

    `--data` is either a manifest (`.json` / `.yaml`: `{"parties": [...], "labels": ..., "id_column": ...,
    "label_column": ...}`, paths relative to the manifest), or a folder holding such a `manifest.json` /
    `manifest.yaml`, or `party-0.<ext>`, `party-1.<ext>` ... and `labels.<ext>` (any suffix `load_user_data`
    reads). A manifest's column names win over the flags.

    Raises:
        `UserDataError`: neither or both forms given, fewer than 2 parties, an unreadable manifest.
    """
    if data and (party_data or labels):
        raise UserDataError("give either --data (a manifest or folder) or --party_data and --labels, not both")
    if not data:
        if not party_data or not labels:
            raise UserDataError("own data needs --party_data (one feature file per party) and --labels, or --data")
        files = PartyFiles(tuple(map(str, party_data)), str(labels), id_column, label_column)
    else:
        path = Path(data).expanduser()
        if path.is_dir():
            manifest = next((path / n for n in MANIFEST_NAMES if (path / n).is_file()), None)
            files = _manifest(manifest, id_column, label_column) if manifest else _folder(path, id_column, label_column)
        elif path.is_file() and path.suffix.lower() in (".json", ".yaml", ".yml"):
            files = _manifest(path, id_column, label_column)
        else:
            raise UserDataError(
                f"--data {data!r}: expected a manifest (.json / .yaml naming 'parties' and 'labels') or a folder "
                "with a manifest or party-<k>.<ext> and labels.<ext> files"
            )
    if len(files.parties) < 2:
        raise UserDataError(f"vertical FL needs at least 2 party files, got {len(files.parties)}: {files.parties}")
    return files


def _manifest(path: Path, id_column: str, label_column: str) -> PartyFiles:
    text = path.read_text()
    try:
        if path.suffix.lower() == ".json":
            spec = json.loads(text)
        else:
            import yaml

            spec = yaml.safe_load(text)
    except Exception as err:  # json / yaml parse errors
        raise UserDataError(f"manifest {path} does not parse: {err}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("parties"), list) or not spec.get("labels"):
        raise UserDataError(f"manifest {path} needs 'parties' (a list of party files) and 'labels' (the labels file)")
    unknown = sorted(set(spec) - {"parties", "labels", "id_column", "label_column"})
    if unknown:
        raise UserDataError(f"manifest {path} has unknown keys {unknown}")

    def where(p) -> str:
        p = str(p)
        return p if Path(p).is_absolute() or not (path.parent / p).exists() else str(path.parent / p)

    return PartyFiles(tuple(where(p) for p in spec["parties"]), where(spec["labels"]),
                      str(spec.get("id_column", id_column)), str(spec.get("label_column", label_column)),
                      str(path))  # fmt: skip


def _folder(path: Path, id_column: str, label_column: str) -> PartyFiles:
    def find(stem: str) -> str | None:
        return next((str(path / f"{stem}{s}") for s in SUFFIX_BUILDERS if (path / f"{stem}{s}").is_file()), None)

    labels, parties = find("labels"), []
    while (party := find(f"party-{len(parties)}")) is not None:
        parties.append(party)
    if labels is None or not parties:
        raise UserDataError(
            f"--data {path}: a folder needs a manifest ({', '.join(MANIFEST_NAMES)}) or party-0.<ext>, "
            f"party-1.<ext> ... and labels.<ext> (one of {', '.join(SUFFIX_BUILDERS)})"
        )
    return PartyFiles(tuple(parties), labels, id_column, label_column, str(path))


def _table(source: str, schema: DataSchema, what: str):
    """Every split of a user source, concatenated, checked against `schema`, as a pandas frame."""
    from datasets import concatenate_datasets

    data = load_user_data(source, schema=schema)
    table = concatenate_datasets(list(data.values())) if len(data) > 1 else next(iter(data.values()))
    if len(table) == 0:
        raise UserDataError(f"{what} {source!r} has no rows")
    return table


def _canonical_ids(values, what: str, column: str) -> list[str]:
    """Ids as strings (an integer-valued float, from a CSV column with gaps, becomes its integer), unique."""
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and not np.isfinite(v)):
            raise UserDataError(f"{what}: column {column!r} has an empty id")
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        out.append(str(v))
    seen, dup = set(), []
    for v in out:
        if v in seen:
            dup.append(v)
        seen.add(v)
    if dup:
        raise UserDataError(f"{what}: column {column!r} repeats ids {sorted(set(dup))[:5]} (ids must be unique)")
    return out


def _first(ids, n: int = 5) -> str:
    ids = sorted(ids)
    return ", ".join(repr(i) for i in ids[:n]) + (f" and {len(ids) - n} more" if len(ids) > n else "")


@dataclass
class AlignedParties:
    """The user's files aligned by entity id (see the module docstring).

    Args:
        files ([`PartyFiles`]): what was read.
        feature_names (`list[list[str]]`): each party's feature columns, in file order.
        party_ids (`list[list[str]]`): each party's entity ids, in file order.
        party_features (`list[np.ndarray]`): each party's `(rows, width)` float32 block.
        labels (`dict[str, int]`): class index of each labelled id.
        class_names (`tuple[str, ...]`): class `c`'s name (its integer for integer labels).
        train_ids (`list[str]`), test_ids (`list[str]`): the aligned entities, split by the seed.
        entity_index (`dict[str, int]`): the integer `entity_id` each id gets in the saved datasets.
        notes (`list[str]`): what alignment dropped or re-classed (also printed).
    """

    files: PartyFiles
    feature_names: list
    party_ids: list
    party_features: list
    labels: dict
    class_names: tuple
    train_ids: list
    test_ids: list
    entity_index: dict
    notes: list = field(default_factory=list)

    @property
    def widths(self) -> list[int]:
        return [x.shape[1] for x in self.party_features]

    def features_of(self, k: int, ids) -> np.ndarray:
        """Party `k`'s rows of `ids`, in that order."""
        row = {i: r for r, i in enumerate(self.party_ids[k])}
        return self.party_features[k][[row[i] for i in ids]]

    def unaligned_ids(self, k: int) -> list[str]:
        aligned = set(self.train_ids) | set(self.test_ids)
        return [i for i in self.party_ids[k] if i not in aligned]

    def dataset_entry(self) -> dict:
        """What the training record keeps about the data: every file's fingerprint, in one entry."""
        import hashlib

        sources = [*self.files.parties, self.files.labels]
        parts = [fingerprint(s) for s in sources]
        name = Path(self.files.source).name if self.files.source else "party files"
        return {
            "name": name, "hub_id": None,
            "source": str(Path(self.files.source).resolve()) if self.files.source else None,
            "fingerprint": "sha256:" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:16],
            "parties": [os.fspath(Path(p).resolve()) if Path(p).exists() else p for p in self.files.parties],
            "labels": os.fspath(Path(self.files.labels).resolve()) if Path(self.files.labels).exists() else
            self.files.labels,
            "file_fingerprints": parts,
            "rows": {"train": len(self.train_ids), "test": len(self.test_ids),
                     **{f"unaligned_party_{k}": len(self.unaligned_ids(k)) for k in range(len(self.party_ids))}},
        }  # fmt: skip


def _class_indices(values, what: str, column: str, class_names, num_labels: int):
    """Integer classes of the label column, and the class names (the recorded ones when given)."""
    values = list(values)
    if any(v is None or (isinstance(v, float) and not np.isfinite(v)) for v in values):
        raise UserDataError(f"{what}: column {column!r} has empty labels")
    if all(isinstance(v, str) for v in values):
        names = tuple(class_names) if class_names else tuple(sorted(set(values)))
        index = {n: c for c, n in enumerate(names)}
        unknown = sorted(set(values) - set(index))
        if unknown:
            raise UserDataError(f"{what}: column {column!r} has classes {unknown[:5]} the model was not trained on")
        return [index[v] for v in values], names
    if all(isinstance(v, (int, np.integer, bool)) or (isinstance(v, float) and v.is_integer()) for v in values):
        ints = [int(v) for v in values]
        if min(ints) < 0:
            raise UserDataError(f"{what}: column {column!r} should be integer classes >= 0 (or class names)")
        c = len(class_names) if class_names else max(num_labels, max(ints) + 1)
        if max(ints) >= c:
            raise UserDataError(f"{what}: column {column!r} has class {max(ints)}, but there are {c} classes")
        if c < 2:
            raise UserDataError(f"{what}: column {column!r} holds one class; classification needs at least 2")
        return ints, tuple(class_names) if class_names else tuple(str(i) for i in range(c))
    kinds = sorted({type(v).__name__ for v in values})
    raise UserDataError(f"{what}: column {column!r} should be int (class index) or str (class name), found {kinds}")


def align_party_files(
    files: PartyFiles,
    *,
    test_size: float = 0.2,
    seed: int = 0,
    class_names=None,
    num_labels: int = 0,
    verbose: bool = True,
) -> AlignedParties:
    """Reads every party file and the labels, checks them, and aligns them by entity id (module docstring).

    Args:
        files ([`PartyFiles`]): the user's files.
        test_size (`float`, defaults to 0.2): share of the aligned entities held out for the test split.
        seed (`int`, defaults to 0): seed of the split (the test ids depend on it and on the ids only).
        class_names (`tuple[str, ...]`, *optional*): the trained model's classes (evaluation); default: from the
            labels.
        num_labels (`int`, defaults to 0): number of classes for integer labels (0: the largest label + 1).
        verbose (`bool`, defaults to `True`): print what the alignment left out.

    Raises:
        `UserDataError` naming the file and column (missing or ill-typed column, repeated or unmatched ids, too
        few aligned or unaligned rows).
    """
    if not 0 < test_size < 1:
        raise UserDataError(f"--test_size must be in (0, 1), got {test_size}")
    names, ids, blocks = [], [], []
    for k, source in enumerate(files.parties):
        what = f"party {k} file {source!r}"
        table = _table(source, party_schema(files.id_column), what)
        cols = [c for c in table.column_names if c != files.id_column]
        if not cols:
            raise UserDataError(f"{what} has no feature column (every column but {files.id_column!r} is a feature)")
        DataSchema(tuple(Column(c, "float") for c in cols)).check(table, source=what)
        x = np.stack([np.asarray(table[c], dtype=np.float64) for c in cols], axis=1).astype(np.float32)
        bad = [c for j, c in enumerate(cols) if not np.isfinite(x[:, j]).all()]
        if bad:
            raise UserDataError(f"{what}: column(s) {bad} have empty, NaN or infinite values")
        names.append(cols)
        ids.append(_canonical_ids(table[files.id_column], what, files.id_column))
        blocks.append(x)
    what = f"labels file {files.labels!r}"
    table = _table(files.labels, labels_schema(files.id_column, files.label_column), what)
    label_ids = _canonical_ids(table[files.id_column], what, files.id_column)
    classes, class_names = _class_indices(table[files.label_column], what, files.label_column, class_names,
                                          num_labels)  # fmt: skip
    labels = dict(zip(label_ids, classes))

    held = [set(i) for i in ids]
    nowhere = set(labels) - set().union(*held)
    if nowhere:
        raise UserDataError(
            f"{what}: {len(nowhere)} labelled id(s) are in no party file ({_first(nowhere)}); check that every "
            f"file's {files.id_column!r} column spells the ids alike"
        )
    everywhere = set.intersection(*held)
    aligned = sorted(everywhere & set(labels))
    notes = []
    partial = set(labels) - everywhere
    if partial:
        lacking = {k: len(partial - h) for k, h in enumerate(held) if partial - h}
        notes.append(
            f"{len(partial)} labelled entities are not held by every party ({_first(partial)}; missing from "
            + ", ".join(f"party {k}: {n}" for k, n in lacking.items())
            + "): they are unaligned where held, their labels unused"
        )
    unlabelled = everywhere - set(labels)
    if unlabelled:
        notes.append(f"{len(unlabelled)} entities held by every party have no label: unaligned at every party")
    n_test = max(1, round(len(aligned) * test_size))
    if len(aligned) - n_test < 1:
        raise UserDataError(
            f"only {len(aligned)} entities are held by every party and labelled; the test split takes {n_test}, "
            "leaving none to train on (Proto-EVFL needs aligned labelled entities)"
        )
    order = np.random.default_rng(seed).permutation(len(aligned))
    test_ids = sorted(aligned[i] for i in order[:n_test])
    train_ids = sorted(aligned[i] for i in order[n_test:])
    union = sorted(set().union(*held))
    out = AlignedParties(files, names, ids, blocks, labels, class_names, train_ids, test_ids,
                         {i: n for n, i in enumerate(union)}, notes)  # fmt: skip
    for k in range(len(ids)):
        if len(out.unaligned_ids(k)) < 2:
            raise UserDataError(
                f"party {k} file {files.parties[k]!r} holds {len(out.unaligned_ids(k))} unaligned entities (ones "
                "the other parties lack or nobody labelled); Proto-EVFL's lower level needs at least 2"
            )
    if verbose:
        print(
            f"aligned {len(aligned)} labelled entities held by all {len(ids)} parties ({len(train_ids)} train, "
            f"{len(test_ids)} test); unaligned per party: {[len(out.unaligned_ids(k)) for k in range(len(ids))]}"
        )
        for note in notes:
            print("note:", note)
    return out


def write_party_datasets(aligned: AlignedParties, out_dir) -> dict[str, Path]:
    """Writes the aligned files in the saved-dataset layout (`party-<k>/`, `labels/`; module docstring) that each
    party reads; returns the folders."""
    from datasets import Dataset, Features, Sequence, Value

    out, paths = Path(out_dir), {}
    for k, width in enumerate(aligned.widths):
        groups = {"aligned": aligned.train_ids, "unaligned": aligned.unaligned_ids(k), "test": aligned.test_ids}
        features = Features({"entity_id": Value("int64"), "split": Value("string"),
                             "features": Sequence(Value("float32"), length=width)})  # fmt: skip
        paths[f"party-{k}"] = out / f"party-{k}"
        Dataset.from_dict({
            "entity_id": [aligned.entity_index[i] for g in groups.values() for i in g],
            "split": [name for name, g in groups.items() for _ in g],
            "features": np.concatenate([aligned.features_of(k, g) for g in groups.values()]),
        }, features=features).save_to_disk(str(paths[f"party-{k}"]))  # fmt: skip
    both = aligned.train_ids + aligned.test_ids
    paths["labels"] = out / "labels"
    Dataset.from_dict({
        "entity_id": [aligned.entity_index[i] for i in both],
        "split": ["aligned"] * len(aligned.train_ids) + ["test"] * len(aligned.test_ids),
        "label": [aligned.labels[i] for i in both],
    }).save_to_disk(str(paths["labels"]))  # fmt: skip
    return paths


def write_example_data(folder, *, entities: int = 120, seed: int = 0) -> Path:
    """Writes a tiny federation of the documented format into `folder`: `party-0.csv` (the active party),
    `party-1.csv`, `labels.csv`; two classes separable only from both parties' features together; string ids; 40 %
    of the entities held by both parties, the rest by one only. Returns `folder` (pass it as `--data`)."""
    import csv

    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    y = rng.integers(0, 2, entities)
    x = rng.normal(size=(entities, 4)) + np.where(y[:, None] == 1, 1.0, -1.0) * np.array([1.0, 0.0, 1.0, 0.0])
    holder = rng.choice(3, size=entities, p=[0.4, 0.3, 0.3])  # 0: both parties, 1: party 0 only, 2: party 1 only
    ids = [f"e{i:04d}" for i in range(entities)]
    for k, cols in ((0, (0, 1)), (1, (2, 3))):
        with open(folder / f"party-{k}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", *(f"x{k}_{j}" for j in range(len(cols)))])
            for i in range(entities):
                if holder[i] in (0, k + 1):
                    w.writerow([ids[i], *(round(float(x[i, c]), 4) for c in cols)])
    with open(folder / "labels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "label"])
        for i in range(entities):
            if holder[i] in (0, 1):  # the active party labels the entities it holds
                w.writerow([ids[i], "yes" if y[i] else "no"])
    return folder


__all__ = [
    "AlignedParties",
    "PartyFiles",
    "align_party_files",
    "export_party_datasets",
    "label_dataset",
    "load_label_dataset",
    "load_party_dataset",
    "party_dataset",
    "resolve_party_files",
    "write_example_data",
    "write_party_datasets",
]
