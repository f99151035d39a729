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


def read_table(path: str | os.PathLike, labels: str | None) -> MultiLabelData:
    """Reads a user's CSV (numeric feature columns, 0/1 label columns named by `labels` or the trailing 0/1
    columns) with the size caps checked first; errors name `--csv`. Returns a [`MultiLabelData`]."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--csv: {path} is not a file")
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"--csv: {path} is empty")
    if size > MAX_CSV_BYTES:
        raise ValueError(f"--csv: {path} is {size / 2**30:.1f} GiB; at most {MAX_CSV_BYTES // 2**30} GiB is read")
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline()
    n_cols = header.count(",") + 1
    if n_cols > MAX_COLUMNS:
        raise ValueError(
            f"--csv: {n_cols} columns; GPMFS supports at most {MAX_COLUMNS} (it builds d x d "
            "matrices): pre-select columns first"
        )
    try:
        df = pd.read_csv(path, nrows=MAX_ROWS + 1)
    except Exception as err:  # noqa: BLE001 - every parse failure becomes one readable error
        raise ValueError(f"--csv: could not parse {path}: {err}") from err
    if len(df) > MAX_ROWS:
        raise ValueError(f"--csv: more than {MAX_ROWS} rows; subsample the table first")
    if len(df) < 2:
        raise ValueError(f"--csv: {path} has {len(df)} data rows; at least 2 are needed")
    names = [c.strip() for c in labels.split(",") if c.strip()] if labels else None
    data = split_frame(df, names, name=path.stem)
    if np.isnan(data.X).any():
        bad = [data.feature_names[i] for i in np.flatnonzero(np.isnan(data.X).any(axis=0))[:5]]
        raise ValueError(f"--csv: feature columns {bad} have missing values (NaN); impute or drop them first")
    return data
