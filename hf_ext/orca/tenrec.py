"""Tenrec QK-article, the public click log the ORCA paper uses: [`load_tenrec_qk_article`] reads the released CSV
(or its sample) into the model's frame, with the official preprocessing's fields and age bins."""

from __future__ import annotations

from os import PathLike

import numpy as np
import pandas as pd

from .data import (
    IGNORE_INDEX,
    MAX_SECONDS,
    MIN_SECONDS,
    OrcaData,
    bin_dwell_time,
    dataset_from_columns,
    validate_orca_frame,
)

# Header of Tenrec's `QK-article.csv` / `Tenrec_QK-article_sample.csv`, as listed in the ORCA preprocessing script
# (`preprocess/tenrec.py`). Used only when a file comes without a header row.
TENREC_QK_ARTICLE_COLUMNS: tuple[str, ...] = (
    "user_id",
    "item_id",
    "click",
    "gender",
    "age",
    "exposure_count",
    "click_count",
    "like_count",
    "comment_count",
    "read_percentage",
    "item_score1",
    "item_score2",
    "category_second",
    "category_first",
    "item_score3",
    "read",
    "read_time",
    "share",
    "like",
    "follow",
    "favorite",
)
# Fields the official code trains on (its "leave-one-out" choice: counts and recommendation scores are left out as
# too strong), in its column order.
TENREC_FIELD_NAMES: tuple[str, ...] = ("user_id", "item_id", "gender", "age", "category_second", "category_first")
# The official code cuts age into 15 equal-width bins (after flooring it at 8, which we do not: see the loader).
TENREC_AGE_BINS = 15


def _contiguous_ids(values: pd.Series) -> np.ndarray:
    # Sorted string codes, as sklearn's LabelEncoder on `astype(str)` in the official code: missing values become
    # their own id ("nan"), and the mapping does not depend on row order.
    # (Through NumPy: pandas 3's `astype(str)` keeps missing values missing instead of writing "nan".)
    _, inverse = np.unique(values.to_numpy(dtype=object).astype(str), return_inverse=True)
    return inverse.astype(np.int64)


def _numeric(values: pd.Series, name: str, what: str) -> pd.Series:
    # Missing values are allowed (the official code fills them); text that is not a number is a bad input.
    converted = pd.to_numeric(values, errors="coerce")
    bad = converted.isna() & values.notna()
    if bad.any():
        raise ValueError(f"{what} {name!r} must be numeric, found {values[bad].iloc[0]!r}")
    return converted


def load_tenrec_qk_article(path_or_dataframe: str | PathLike | pd.DataFrame, max_rows: int | None = None) -> OrcaData:
    """Loads Tenrec's QK-article log (`QK-article.csv` or `Tenrec_QK-article_sample.csv`) the way ORCA uses it.

    Expected header (from the ORCA preprocessing script; a file without a header row is read with it when it has
    exactly these 21 columns):

    `user_id, item_id, click, gender, age, exposure_count, click_count, like_count, comment_count, read_percentage,
    item_score1, item_score2, category_second, category_first, item_score3, read, read_time, share, like, follow,
    favorite`

    Only `user_id, item_id, gender, age, category_second, category_first`, `click` (or `label_ctr`, the name the
    official code reads) and `read_time` (seconds) are used. `age` is filled with its mean and kept: each distinct
    age keeps its own id when there are at most 15, else the official 15 equal-width bins (the official code first
    floors age at 8, merging all younger codes; not done here). As in the official code, every field is re-indexed
    to contiguous ids `0 .. V-1` (missing values get an id of their own); a missing `click` is 0; `read_time` is
    truncated to whole seconds and clipped to [1, 400] (missing → 1) before binning. Tenrec has no
    post-click content fields, so the intervention is off (`post_click_fields == []`).

    Args:
        path_or_dataframe (`str`, `os.PathLike` or `pandas.DataFrame`): the CSV file or an already loaded frame.
        max_rows (`int`, *optional*): read only the first `max_rows` rows.

    Returns:
        [`OrcaData`]: `(dataset, field_names, vocab_sizes, post_click_fields)`; the dataset has the fields
        (`int64`), `click`, `dwell_seconds` (`float32`, 0.0 where not clicked) and `dwell_bin` (-100 where not
        clicked).
    """
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1):
        raise ValueError(f"max_rows must be a positive integer or None, got {max_rows!r}")
    if isinstance(path_or_dataframe, pd.DataFrame):
        raw = path_or_dataframe if max_rows is None else path_or_dataframe.iloc[:max_rows]
    else:
        raw = pd.read_csv(path_or_dataframe, nrows=max_rows)
        if "user_id" not in raw.columns and raw.shape[1] == len(TENREC_QK_ARTICLE_COLUMNS):
            raw = pd.read_csv(path_or_dataframe, nrows=max_rows, header=None, names=list(TENREC_QK_ARTICLE_COLUMNS))
    click_col = "click" if "click" in raw.columns else "label_ctr"
    required = [*TENREC_FIELD_NAMES, click_col, "read_time"]
    missing = [name for name in required if name not in raw.columns]
    if missing:
        raise ValueError(f"Tenrec QK-article frame is missing column(s) {missing}; it has {list(raw.columns)}")
    if len(raw) == 0:
        raise ValueError("Tenrec QK-article frame has no rows")

    click = _numeric(raw[click_col], click_col, "label").fillna(0).to_numpy()
    if not np.all((click == 0) | (click == 1)):
        raise ValueError(f"label {click_col!r} must hold only 0 and 1, found {click[(click != 0) & (click != 1)][0]!r}")
    click = click.astype(np.int64)
    # Whole seconds, as the official code (`astype(float).astype(int)`); missing -> 0 -> clipped to 1.
    read_time = _numeric(raw["read_time"], "read_time", "column").fillna(0.0).to_numpy(np.float64)
    seconds = np.clip(np.trunc(read_time), MIN_SECONDS, MAX_SECONDS)

    age = _numeric(raw["age"], "age", "field")
    if age.notna().any():
        age = age.fillna(age.mean())
    # Deliberate deviation: the official code floors age at 8 before binning, which merges every age below 8 into
    # one id (Tenrec's age column is a small code, so that can erase most of the field). Every age is kept: with at
    # most 15 distinct values each keeps an id of its own; beyond that, the official 15 equal-width bins.
    age = age.fillna(0).astype(np.int64)
    if age.nunique() > TENREC_AGE_BINS:
        age = pd.Series(pd.cut(age, bins=TENREC_AGE_BINS, labels=False), index=age.index)

    # Age (bins) are re-indexed in numeric order (the official code sorts them as strings: "10" < "2"); the ids are
    # embedded as categories either way, so only readability changes.
    age_ids = np.unique(age.to_numpy(np.int64), return_inverse=True)[1].astype(np.int64)
    columns = {name: age_ids if name == "age" else _contiguous_ids(raw[name]) for name in TENREC_FIELD_NAMES}
    columns["click"] = click
    columns["dwell_seconds"] = np.where(click == 1, seconds, 0.0).astype(np.float32)
    columns["dwell_bin"] = np.where(click == 1, bin_dwell_time(seconds), IGNORE_INDEX).astype(np.int64)

    field_names = list(TENREC_FIELD_NAMES)
    vocab_sizes = [int(columns[name].max()) + 1 for name in field_names]
    dataset = dataset_from_columns(columns)
    validate_orca_frame(dataset, field_names, vocab_sizes=vocab_sizes)
    return OrcaData(dataset, field_names, vocab_sizes, [])
