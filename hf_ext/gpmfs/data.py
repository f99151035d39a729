"""Multi-label data for GPMFS: the data schema ([`MultiLabelData`]), MULAN Yeast (bundled in the `river` wheel,
offline) and the other real sets, scikit-learn's `make_multilabel_classification`, users' CSV files, and the bridge to
`datasets.Dataset`. The planted synthetic generator is in [`~hf_ext.gpmfs.planted`].

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass
class MultiLabelData:
    """A multi-label dataset as arrays.

    Args:
        X (`np.ndarray` of shape `(n, d)`): float features.
        Y (`np.ndarray` of shape `(n, q)`): {0, 1} labels.
        feature_names (`list[str]`), label_names (`list[str]`), name (`str`).
        shared_features (`np.ndarray`, *optional*): planted features informative for every label (synthetic only).
        private_features (`list[np.ndarray]`, *optional*): planted features informative for one label each.
    """

    X: np.ndarray
    Y: np.ndarray
    feature_names: list[str]
    label_names: list[str]
    name: str = "data"
    shared_features: np.ndarray | None = None
    private_features: list[np.ndarray] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.X.shape[0], self.X.shape[1], self.Y.shape[1]

    def frame(self) -> pd.DataFrame:
        """Features and labels as one DataFrame (labels last)."""
        return pd.concat(
            [
                pd.DataFrame(self.X, columns=self.feature_names),
                pd.DataFrame(self.Y.astype(np.int64), columns=self.label_names),
            ],
            axis=1,
        )


def load_yeast() -> MultiLabelData:
    """MULAN Yeast (2,417 x 103 features, 14 labels) read from the copy inside the `river` wheel; no network."""
    from river.datasets import Yeast

    df = pd.read_csv(Yeast().path)
    label_names = [c for c in df.columns if c.startswith("Class")]
    feature_names = [c for c in df.columns if c not in label_names]
    return MultiLabelData(
        X=df[feature_names].to_numpy(np.float64),
        Y=df[label_names].to_numpy(np.int64),
        feature_names=feature_names,
        label_names=label_names,
        name="yeast",
    )


def load_flare() -> MultiLabelData:
    """UCI Solar Flare (1,066 regions; MULAN's multi-target `flare` set) read from the copy inside the `river` wheel.

    Labels: whether the region produced at least one C-class / M-class flare in 24 h (182 / 36 positives) [INF: the
    multi-target counts binarised]; X-class (5 positives) is dropped because most CV folds would hold none. Features:
    the 7 integer attributes and one-hot codes of the 3 categorical ones (23 columns). Licence: UCI, CC BY 4.0.
    """
    from river.datasets import SolarFlare

    df = pd.read_csv(SolarFlare().path)
    targets = {"c-class-flares": "c_flare", "m-class-flares": "m_flare"}
    Y = np.column_stack([(df[c] > 0).to_numpy(np.int64) for c in targets])
    feats = df.drop(columns=list(targets) + ["x-class-flares"])
    categorical = [c for c in feats.columns if not pd.api.types.is_numeric_dtype(feats[c])]
    feats = pd.get_dummies(feats, columns=categorical, dtype=np.float64)
    return MultiLabelData(
        X=feats.to_numpy(np.float64),
        Y=Y,
        feature_names=[str(c) for c in feats.columns],
        label_names=list(targets.values()),
        name="flare",
    )


DIGIT_PROPERTIES = {"even": (0, 2, 4, 6, 8), "ge5": (5, 6, 7, 8, 9), "prime": (2, 3, 5, 7), "loop": (0, 6, 8, 9)}


def load_digits_properties() -> MultiLabelData:
    """scikit-learn's bundled digits (1,797 8x8 images, 64 pixel features) with multi-hot labels derived from the
    digit: even, >= 5, prime, has a closed loop (0, 6, 8, 9) [INF: derived labels on real features, as proposed in
    the offline-data notes]. Licence: UCI optdigits, CC BY 4.0 (shipped in scikit-learn, BSD-3)."""
    from sklearn.datasets import load_digits

    X, digit = load_digits(return_X_y=True)
    Y = np.column_stack([np.isin(digit, v) for v in DIGIT_PROPERTIES.values()]).astype(np.int64)
    return MultiLabelData(
        X=X.astype(np.float64),
        Y=Y,
        feature_names=[f"pixel{i}" for i in range(X.shape[1])],
        label_names=list(DIGIT_PROPERTIES),
        name="digits",
    )


# Real multi-label data that loads offline: name -> (loader, source and licence). Yeast: MULAN (Elisseeff & Weston
# 2001), shipped in river (BSD-3).
REAL_DATASETS = {
    "yeast": (load_yeast, "MULAN Yeast via the river wheel (BSD-3 package; data from Elisseeff & Weston 2001)"),
    "flare": (load_flare, "UCI Solar Flare via the river wheel (CC BY 4.0), counts binarised"),
    "digits": (load_digits_properties, "UCI optdigits via scikit-learn (CC BY 4.0), derived property labels"),
}


def make_sklearn_multilabel(
    n_samples: int = 500, n_features: int = 50, n_classes: int = 6, n_labels: int = 2, seed: int = 0
) -> MultiLabelData:
    """scikit-learn's `make_multilabel_classification` (labels without positives are dropped)."""
    from sklearn.datasets import make_multilabel_classification

    X, Y = make_multilabel_classification(
        n_samples=n_samples,
        n_features=n_features,
        n_classes=n_classes,
        n_labels=n_labels,
        allow_unlabeled=False,
        random_state=seed,
    )
    keep = Y.sum(axis=0) > 0
    return MultiLabelData(
        X=X.astype(np.float64),
        Y=Y[:, keep].astype(np.int64),
        feature_names=[f"f{i}" for i in range(n_features)],
        label_names=[f"label{j}" for j in np.flatnonzero(keep)],
        name="sklearn_multilabel",
    )


def split_frame(df: pd.DataFrame, label_columns: list[str] | None = None, name: str = "csv") -> MultiLabelData:
    """Splits a DataFrame into features and labels.

    Args:
        df (`pd.DataFrame`): numeric features and 0/1 label columns.
        label_columns (`list[str]`, *optional*): label column names; `None` takes the trailing run of columns whose
            values are all 0/1.
        name (`str`): dataset name.

    Raises:
        ValueError: naming `label_columns` when no label or no feature column is found, and naming `X` when a
            feature column is not numeric.
    """
    if label_columns is None:
        label_columns = []
        for col in reversed(df.columns):
            values = pd.unique(df[col].dropna())
            if df[col].notna().all() and len(values) > 0 and set(np.asarray(values).tolist()) <= {0, 1}:
                label_columns.insert(0, col)
            else:
                break
    missing = [c for c in label_columns if c not in df.columns]
    if missing:
        raise ValueError(f"label_columns: {missing} are not columns of the table")
    feature_columns = [c for c in df.columns if c not in label_columns]
    if not label_columns:
        raise ValueError("label_columns: no label columns found (expected trailing 0/1 columns or explicit names)")
    if not feature_columns:
        raise ValueError("label_columns: every column is a label; no feature columns are left")
    non_numeric = [c for c in feature_columns if not pd.api.types.is_numeric_dtype(df[c])]
    if non_numeric:
        raise ValueError(f"X: feature columns {non_numeric[:5]} are not numeric")
    return MultiLabelData(
        X=df[feature_columns].to_numpy(np.float64),
        Y=df[label_columns].to_numpy(),
        feature_names=[str(c) for c in feature_columns],
        label_names=[str(c) for c in label_columns],
        name=name,
    )


def to_hf_dataset(data: MultiLabelData, layout: str = "vector"):
    """A `datasets.Dataset` view of `data`.

    Args:
        layout (`str`): `"vector"` gives columns `features` (list of floats) and `labels` (list of ints);
            `"columns"` gives one column per feature and per label (MULAN's tabular layout).
    """
    import datasets

    if layout == "vector":
        return datasets.Dataset.from_dict({"features": data.X.tolist(), "labels": data.Y.astype(np.int64).tolist()})
    if layout == "columns":
        return datasets.Dataset.from_pandas(data.frame(), preserve_index=False)
    raise ValueError(f"layout must be 'vector' or 'columns', got {layout!r}")


# Size caps, checked before the data is parsed: GPMFS builds d x d matrices (redundancy, normal equations) and an
# n x n sparse graph, so a 10^6-column table would exhaust memory long before it finished.
MAX_CSV_BYTES = 2 * 2**30
MAX_COLUMNS = 5_000
MAX_ROWS = 200_000


# --------------------------------------------------------------------------------------------------------------
# The user's multi-label data (`hf-ext train gpmfs --data`, `hf-ext evaluate gpmfs --data`)
# --------------------------------------------------------------------------------------------------------------

LABEL_PREFIX = "label_"


def _make_schema():
    from hf_ext.core.user_data import Column, DataSchema

    return DataSchema(
        (),
        description=(
            "one row per sample: a feature matrix X (numeric columns, any names) and a label matrix Y (one 0/1 "
            "column per label). The label columns are named by `--labels a,b,c`, or counted from the end with "
            "`--labels N`, or are the columns starting with `label_`; failing all three, the trailing run of 0/1 "
            "columns (the rule of `hf-ext gpmfs fit`). Every other column is a feature"
        ),
        prefixes=(
            Column(LABEL_PREFIX, "int", "one column per label: 1 if the sample has the label, else 0 (the matrix Y)"),
            Column("", "number", "every other column: a numeric feature, no missing values (the matrix X)"),
        ),
    )


SCHEMA = _make_schema()


def labels_schema(label_names: list[str]):
    """The schema a table is checked with once its label columns are known (every other column a numeric
    feature)."""
    from hf_ext.core.user_data import Column, DataSchema

    return DataSchema(
        tuple(Column(name, "int", "a 0/1 label column") for name in label_names),
        description=SCHEMA.description,
        prefixes=(SCHEMA.prefixes[1],),
    )


def read_arff(path: str | os.PathLike) -> tuple[pd.DataFrame, str]:
    """Reads a (MULAN / MEKA / Weka) ARFF file, dense or sparse, into a DataFrame; returns `(frame, relation)`.

    Numeric attributes become floats; nominal ones whose values are all numbers (MULAN's `{0,1}` labels) become
    numbers, other nominal and string attributes stay text (and fail the feature check, naming the column). In the
    sparse form (`{index value, ...}`) an omitted value is 0 (numeric) or the first nominal value, as in Weka. `?`
    is a missing value.
    """
    import csv

    path = Path(path)
    names: list[str] = []
    kinds: list[list[str] | None] = []  # None: numeric/string; list: nominal values
    relation = ""
    rows: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        in_data = False
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("%"):
                continue
            if in_data:
                rows.append(line)
                continue
            low = line.lower()
            if low.startswith("@relation"):
                relation = line[9:].strip().strip("'\"")
            elif low.startswith("@attribute"):
                rest = line[10:].strip()
                if rest[:1] in "'\"":
                    end = rest.index(rest[0], 1)
                    name, kind = rest[1:end], rest[end + 1 :].strip()
                else:
                    name, _, kind = rest.partition(" ")
                    if not kind:
                        name, _, kind = rest.partition("\t")
                names.append(name)
                kind = kind.strip()
                if kind.startswith("{"):
                    values = next(csv.reader([kind.strip("{} ")], quotechar="'", skipinitialspace=True))
                    kinds.append([v.strip().strip("'\"") for v in values])
                else:
                    kinds.append(None)
                if len(names) > MAX_COLUMNS:
                    raise ValueError(f"--data: {path} has more than {MAX_COLUMNS} attributes; pre-select columns first")
            elif low.startswith("@data"):
                in_data = True
    if not names:
        raise ValueError(f"--data: {path} is not an ARFF file (no @attribute lines)")
    if len(rows) > MAX_ROWS:
        raise ValueError(f"--data: more than {MAX_ROWS} rows; subsample the data first")
    default = [k[0] if k else "0" for k in kinds]
    table: list[list[str]] = []
    for r, line in enumerate(rows):
        if line.startswith("{"):
            row = list(default)
            body = line.strip("{} ")
            for item in next(csv.reader([body], quotechar="'", skipinitialspace=True)) if body else []:
                idx, _, value = item.strip().partition(" ")
                try:
                    row[int(idx)] = value.strip().strip("'\"")
                except (ValueError, IndexError):
                    raise ValueError(f"--data: {path}, data row {r + 1}: bad sparse entry {item!r}") from None
        else:
            row = [v.strip().strip("'\"") for v in next(csv.reader([line], quotechar="'", skipinitialspace=True))]
            if len(row) != len(names):
                raise ValueError(f"--data: {path}, data row {r + 1} has {len(row)} values for {len(names)} attributes")
        table.append(row)
    frame = pd.DataFrame(table, columns=names).replace("?", np.nan)
    for name in names:
        converted = pd.to_numeric(frame[name], errors="coerce")
        if not (converted.isna() & frame[name].notna()).any():  # every value a number (or missing)
            frame[name] = converted
            if kinds[names.index(name)] is not None and converted.notna().all():
                frame[name] = converted.astype(np.int64) if (converted == converted.round()).all() else converted
    return frame, relation


def read_label_xml(path: str | os.PathLike) -> list[str]:
    """The label names of a MULAN XML label file (`<labels><label name="..."/>...</labels>`, hierarchies
    flattened)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as err:
        raise ValueError(f"--labels: {path} is not a MULAN XML label file: {err}") from None
    names = [el.get("name") for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "label" and el.get("name")]
    if not names:
        raise ValueError(f"--labels: {path} names no <label name=...>")
    return names


def _meka_labels(relation: str, columns: list[str]) -> list[str] | None:
    """MEKA's convention: `@relation 'name: -C N'` puts the labels first (N > 0) or last (N < 0)."""
    import re

    m = re.search(r"-C\s+(-?\d+)", relation)
    if not m:
        return None
    n = int(m.group(1))
    return columns[:n] if n > 0 else columns[n:] if n < 0 else None


def resolve_labels(frame: pd.DataFrame, labels: str | None, relation: str = "") -> list[str]:
    """The label columns of `frame`: `labels` as comma-separated names, a count `N` (the last N columns, MULAN's
    layout) or a MULAN XML file; else MEKA's `-C N` in an ARFF relation, the `label_*` columns, or the trailing run
    of 0/1 columns. Raises `ValueError` naming `--labels`."""
    columns = [str(c) for c in frame.columns]
    text = (labels or "").strip()
    if text.lower().endswith(".xml"):
        if not Path(text).is_file():
            raise ValueError(f"--labels: {text} is not a file")
        names = read_label_xml(text)
    elif text.isdigit():
        n = int(text)
        if not 1 <= n < len(columns):
            raise ValueError(f"--labels {n}: need between 1 and {len(columns) - 1} label columns")
        names = columns[-n:]
    elif text:
        names = [c.strip() for c in text.split(",") if c.strip()]
    else:
        names = _meka_labels(relation, columns) or [c for c in columns if c.startswith(LABEL_PREFIX)]
        if not names:
            return split_frame(frame).label_names  # the trailing 0/1 columns (raises when there are none)
    missing = [c for c in names if c not in columns]
    if missing:
        raise ValueError(f"--labels: label_columns: {missing} are not columns of the table (it has {columns[:20]})")
    if len(names) == len(columns):
        raise ValueError("--labels: every column is a label; no feature columns are left")
    return names


def _check_size(path: Path) -> None:
    """The size caps, checked before a file is parsed (GPMFS builds d x d matrices and an n x n graph)."""
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"--data: {path} is empty")
    if size > MAX_CSV_BYTES:
        raise ValueError(f"--data: {path} is {size / 2**30:.1f} GiB; at most {MAX_CSV_BYTES // 2**30} GiB is read")
    if path.suffix.lower() in (".csv", ".tsv"):
        with open(path, encoding="utf-8", errors="replace") as f:
            header = f.readline()
        n_cols = header.count("\t" if path.suffix.lower() == ".tsv" else ",") + 1
        if n_cols > MAX_COLUMNS:
            raise ValueError(
                f"--data: {n_cols} columns; GPMFS supports at most {MAX_COLUMNS} (it builds d x d matrices): "
                "pre-select columns first"
            )


def _read_npz(path: Path) -> pd.DataFrame:
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in ("X", "Y") if k not in z.files]
        if missing:
            raise ValueError(f"--data: {path} has no array {missing} (it has {z.files}); save it with np.savez(X=, Y=)")
        X, Y = np.asarray(z["X"]), np.asarray(z["Y"])
        feature_names = [str(n) for n in z["feature_names"]] if "feature_names" in z.files else None
        label_names = [str(n) for n in z["label_names"]] if "label_names" in z.files else None
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"--data: X and Y must be 2-D with the same rows, got X {X.shape} and Y {Y.shape}")
    if X.dtype.kind not in "iufb":
        raise ValueError(f"--data: X must be numeric, got dtype {X.dtype}")
    if X.shape[1] > MAX_COLUMNS:
        raise ValueError(f"--data: X has {X.shape[1]} columns; GPMFS supports at most {MAX_COLUMNS}")
    feature_names = feature_names or [f"f{i}" for i in range(X.shape[1])]
    label_names = label_names or [f"{LABEL_PREFIX}{j}" for j in range(Y.shape[1])]
    if len(feature_names) != X.shape[1] or len(label_names) != Y.shape[1]:
        raise ValueError("--data: feature_names / label_names must have one entry per column of X / Y")
    if Y.dtype.kind == "f" and np.all((Y == 0) | (Y == 1)):
        Y = Y.astype(np.int64)
    return pd.concat([pd.DataFrame(X, columns=feature_names), pd.DataFrame(Y, columns=label_names)], axis=1)


@dataclass
class UserMultiLabel:
    """A user's multi-label data, read and split: `train` / `test` as [`MultiLabelData`], the dataset entry of the
    training record, and the split (`{"test": share, "seed": seed}`) that `hf-ext evaluate gpmfs` repeats."""

    train: MultiLabelData
    test: MultiLabelData
    entry: dict
    split: dict


def load_multilabel(
    source: str | os.PathLike, labels: str | None = None, *, test: float = 0.2, seed: int = 0
) -> UserMultiLabel:
    """Reads the user's feature and label matrices and splits them (the data's own `test` split where present, else
    a split seeded by `seed`, through [`~hf_ext.core.user_data.split_data`]).

    Args:
        source: a CSV / TSV / JSON(L) / Parquet file, a folder with train/test files or a Hub dataset id (read
            with [`~hf_ext.core.user_data.load_user_data`]), a NumPy `.npz` with arrays `X` and `Y` (optionally
            `feature_names`, `label_names`), or a MULAN / MEKA `.arff` file.
        labels (`str`, *optional*): the label columns (see [`resolve_labels`]).
        test (`float`): the test share when the data has no test split. seed (`int`): seed of that split.

    Raises:
        [`~hf_ext.core.user_data.UserDataError`]: naming the file, flag or column at fault.
    """
    import datasets

    from hf_ext.core.user_data import UserDataError, dataset_entry, load_user_data, split_data

    text = os.fspath(source)
    path = Path(text).expanduser()
    relation = ""
    try:
        if path.is_file():
            _check_size(path)
        if path.is_file() and path.suffix.lower() in (".npz", ".arff"):
            if path.suffix.lower() == ".npz":
                frame = _read_npz(path)
            else:
                frame, relation = read_arff(path)
            data = datasets.DatasetDict({"train": datasets.Dataset.from_pandas(frame, preserve_index=False)})
        else:
            data = load_user_data(text)
        if sum(len(t) for t in data.values()) > MAX_ROWS:
            raise ValueError(
                f"--data: more than {MAX_ROWS} rows; subsample the data first (GPMFS builds an n x n graph)"
            )
        first = data["train"]
        names = resolve_labels(first.to_pandas(), labels, relation)
        labels_schema(names).check(data, source=text)
        splits = split_data(data, validation=0.0, test=test, seed=seed)
        parts = {}
        for split in ("train", "test"):
            frame = splits[split].to_pandas()
            part = split_frame(frame, names, name=path.stem if path.exists() else text)
            bad_labels = [c for j, c in enumerate(names) if not np.isin(part.Y[:, j], (0, 1)).all()]
            if bad_labels:
                raise ValueError(f"label columns {bad_labels[:5]} must hold only 0 and 1 ({split} split)")
            if np.isnan(part.X).any():
                bad = [part.feature_names[i] for i in np.flatnonzero(np.isnan(part.X).any(axis=0))[:5]]
                raise ValueError(f"feature columns {bad} have missing values (NaN); impute or drop them first")
            part.Y = part.Y.astype(np.int64)
            parts[split] = part
    except UserDataError:
        raise
    except ValueError as err:
        raise UserDataError(str(err)) from None
    if len(parts["train"].X) < 2:
        raise UserDataError(f"data {text!r}: the training split has {len(parts['train'].X)} rows; at least 2 needed")
    entry = dataset_entry(text, splits, description="feature matrix and label matrix")
    return UserMultiLabel(parts["train"], parts["test"], entry, {"test": test, "seed": seed, "labels": names})


def write_example_data(path: str | os.PathLike, n_samples: int = 150, seed: int = 0) -> str:
    """Writes a small multi-label data set in a documented format, chosen by the suffix of `path`: `.csv` (feature
    columns `f0..f11`, label columns `label_0..label_3`), `.npz` (`X`, `Y`, `feature_names`, `label_names`) or
    `.arff` (MULAN's layout: numeric attributes, then `{0,1}` label attributes; train with `--labels 4`). The data
    is scikit-learn's `make_multilabel_classification` (12 features, 4 labels). Returns the path."""
    data = make_sklearn_multilabel(n_samples=n_samples, n_features=12, n_classes=4, n_labels=2, seed=seed)
    labels = [f"{LABEL_PREFIX}{j}" for j in range(data.Y.shape[1])]
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        frame = data.frame()
        frame.columns = [*data.feature_names, *labels]
        frame.to_csv(path, index=False)
    elif suffix == ".npz":
        np.savez(path, X=data.X, Y=data.Y, feature_names=np.array(data.feature_names), label_names=np.array(labels))
    elif suffix == ".arff":
        lines = ["@relation example", ""]
        lines += [f"@attribute {name} numeric" for name in data.feature_names]
        lines += [f"@attribute {name} {{0,1}}" for name in labels]
        lines += ["", "@data"]
        for x, y in zip(data.X, data.Y):
            lines.append(",".join([*(f"{v:g}" for v in x), *(str(int(v)) for v in y)]))
        path.write_text("\n".join(lines) + "\n")
    else:
        raise ValueError(f"path must end in .csv, .npz or .arff, got {path.name!r}")
    return str(path)
