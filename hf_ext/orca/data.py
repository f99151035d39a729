"""Data for ORCA ([CIKM'25](https://arxiv.org/abs/2508.16573)): the user's click log ([`CLICK_LOG_SCHEMA`], read
by [`load_click_log`] and encoded by [`encode_click_log`]), the label columns, the dwell-time binning and the
bad-input contract [`validate_orca_frame`], the conversion to model features and the split. Tenrec's QK-article log
(the public data set the paper uses) is read by [`~hf_ext.orca.tenrec.load_tenrec_qk_article`].

Every frame ORCA trains on has the same label columns:

- `click` (`int64`, 0/1);
- `dwell_seconds` (`float32`): read time clipped to [1, 400] s for clicked rows, 0.0 for the others;
- `dwell_bin` (`int64`): ORCA's dwell-time bin (K = 8) for clicked rows, -100 (the ignore index of
  `torch.nn.functional.cross_entropy`) for the others, because the DT loss and metrics use clicked rows only.

The two synthetic generators live in their own modules: [`~hf_ext.orca.causal_generator`] (the spec's causal
clickbait/quality log; the data of `hf-ext train orca`) and [`~hf_ext.orca.spurious_generator`] (the
spurious-shortcut log with an exact oracle; the test bed of `hf-ext reproduce orca`).
"""

from __future__ import annotations

from os import PathLike
from typing import Any, NamedTuple

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
from datasets.table import InMemoryTable

from hf_ext.core.user_data import Column, DataSchema, UserDataError, load_user_data, require_columns, split_data

from .configuration_orca import ORCA_BIN_EDGES

# Label value of unclicked rows: the default `ignore_index` of torch's cross-entropy.
IGNORE_INDEX = -100
# Read time is clipped to [1, 400] s in the official code; 0 and missing become 1 ("opened and closed at once").
MIN_SECONDS = 1.0
MAX_SECONDS = 400.0

LABEL_COLUMNS: tuple[str, ...] = ("click", "dwell_seconds", "dwell_bin")

# --------------------------------------------------------------------------------------------------------------
# Dwell-time binning
# --------------------------------------------------------------------------------------------------------------


def bin_dwell_time(seconds: Any, bin_edges: tuple[float, ...] | list[float] = ORCA_BIN_EDGES) -> np.ndarray:
    """Maps read times to ORCA's dwell-time bins.

    The time is first clipped to [1, 400] s, with 0, negative and missing (NaN) values becoming 1 s, as in the
    official code. Bins are right-closed intervals `(edges[k], edges[k+1]]` (the official code uses `pd.cut`), so
    with ORCA's edges 1 s falls in bin 0, 14 s in bin 1 and 400 s in bin 7.

    Unlike the official code, fractional seconds are kept (it truncates read time to whole seconds first); on whole
    seconds the two agree.

    Args:
        seconds (`float` or array-like of `float`): read times in seconds.
        bin_edges (`tuple[float, ...]`, defaults to `ORCA_BIN_EDGES`): strictly increasing edges, K + 1 of them.

    Returns:
        `np.ndarray` of `int64` with the shape of `seconds`: bin ids in `[0, K)`.
    """
    edges = np.asarray(bin_edges, dtype=np.float64)
    if edges.ndim != 1 or edges.size < 2 or not np.all(np.isfinite(edges)):
        raise ValueError(f"bin_edges must be a 1-D sequence of at least 2 finite numbers, got {bin_edges!r}")
    if np.any(np.diff(edges) <= 0):
        raise ValueError(f"bin_edges must be strictly increasing, got {bin_edges!r}")
    if not (edges[0] < MIN_SECONDS and edges[-1] >= MAX_SECONDS):
        raise ValueError(
            f"bin_edges must cover the clipped range [{MIN_SECONDS}, {MAX_SECONDS}] s (first edge below "
            f"{MIN_SECONDS}, last at least {MAX_SECONDS}), got {bin_edges!r}"
        )
    t = np.asarray(seconds, dtype=np.float64)
    t = np.clip(np.where(np.isnan(t), MIN_SECONDS, t), MIN_SECONDS, MAX_SECONDS)
    # side="left" makes each bin right-closed: t == edges[k+1] stays in bin k.
    return (np.searchsorted(edges, t, side="left") - 1).astype(np.int64)


def check_generator_numbers(config, int_fields: tuple[str, ...], zero_ok: tuple[str, ...] = ("seed",)) -> None:
    """Checks every field of a generator config dataclass: the `int_fields` are integers >= 1 (>= 0 for `zero_ok`),
    every other field a finite number; a `ValueError` names the field."""
    import dataclasses
    import math

    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in int_fields:
            low = 0 if f.name in zero_ok else 1
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{f.name} must be an integer >= {low}, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
            raise ValueError(f"{f.name} must be a finite number, got {value!r}")


def dataset_from_columns(columns: dict[str, np.ndarray]) -> datasets.Dataset:
    """A `datasets.Dataset` straight from NumPy columns (the Arrow types follow the dtypes: int64, float32)."""
    # Straight to Arrow: `Dataset.from_dict(..., features=...)` encodes every value in Python (~2 s for 200k rows).
    table = pa.Table.from_pydict({name: pa.array(values) for name, values in columns.items()})
    return datasets.Dataset(InMemoryTable(table))


# --------------------------------------------------------------------------------------------------------------
# Bad-input contract
# --------------------------------------------------------------------------------------------------------------


def _columns(data: datasets.Dataset | pd.DataFrame) -> list[str]:
    if isinstance(data, pd.DataFrame):
        return [str(c) for c in data.columns]
    if isinstance(data, datasets.Dataset):
        return list(data.column_names)
    raise TypeError(f"expected a datasets.Dataset or a pandas.DataFrame, got {type(data).__name__}")


def numpy_columns(dataset: datasets.Dataset, names: list[str] | tuple[str, ...]) -> dict[str, np.ndarray]:
    """Whole columns of `dataset` as NumPy arrays (a fixed-length list column such as `input_ids` as one `[N, F]`
    array), read a column at a time.

    Slicing a numpy-formatted dataset reads whole Arrow columns (and honours an indices mapping after
    `select`/`shuffle`/`filter`); `np.asarray(dataset["col"])` instead iterates the lazy `Column` that `datasets` >= 4
    returns, formatting every row on its own (minutes for a quick ORCA reproduction). Same values and dtypes.
    """
    names = list(names)
    return dict(dataset.with_format("numpy", columns=names)[:]) if len(dataset) else {n: np.array([]) for n in names}


def _read_columns(data: datasets.Dataset | pd.DataFrame, names: list[str]) -> dict[str, np.ndarray]:
    if isinstance(data, pd.DataFrame):
        return {name: data[name].to_numpy() for name in names}
    return numpy_columns(data, names)


def _check_int_column(name: str, values: np.ndarray, what: str) -> None:
    if values.dtype.kind not in "iu":
        raise ValueError(f"{what} {name!r} must hold integers, got dtype {values.dtype}")


def validate_orca_frame(
    data: datasets.Dataset | pd.DataFrame,
    field_names: list[str] | tuple[str, ...],
    *,
    vocab_sizes: list[int] | None = None,
    num_bins: int = len(ORCA_BIN_EDGES) - 1,
    require_labels: bool = True,
) -> None:
    """Checks a frame against the ORCA input contract and raises `ValueError` naming the offending column.

    The contract:

    - every field in `field_names` is a column of integers (no floats, strings, booleans or missing values), with
      ids `>= 0` and, when `vocab_sizes` is given, `< vocab_sizes[f]`;
    - with `require_labels`, `click` and `dwell_bin` are columns; `click` holds only 0 and 1 (integers, booleans or
      floats equal to 0.0/1.0); `dwell_bin` holds integers, in `[0, num_bins)` on clicked rows and either -100 or
      a valid bin on the others (the official code bins every row; the loss ignores the unclicked ones);
    - `dwell_seconds`, when present, is numeric, finite and `>= 0` on clicked rows;
    - the frame is not empty.

    Args:
        data (`datasets.Dataset` or `pandas.DataFrame`): the frame to check.
        field_names (`list[str]`): the categorical input fields.
        vocab_sizes (`list[int]`, *optional*): vocabulary size of each field, in `field_names` order.
        num_bins (`int`, defaults to 8): K, the number of dwell-time bins.
        require_labels (`bool`, defaults to `True`): whether `click` and `dwell_bin` must be present (set it to
            `False` for inference inputs).
    """
    field_names = list(field_names)
    if len(field_names) == 0:
        raise ValueError("field_names must not be empty")
    if len(set(field_names)) != len(field_names):
        raise ValueError(f"field_names has duplicates: {field_names}")
    if vocab_sizes is not None and len(vocab_sizes) != len(field_names):
        raise ValueError(f"vocab_sizes has {len(vocab_sizes)} entries for {len(field_names)} field_names")
    present = _columns(data)
    required = field_names + (["click", "dwell_bin"] if require_labels else [])
    missing = [name for name in required if name not in present]
    if missing:
        raise ValueError(f"missing required column(s) {missing}; the frame has {present}")
    if len(data) == 0:
        raise ValueError("the frame has no rows")

    optional = [name for name in ("click", "dwell_bin", "dwell_seconds") if name in present and name not in required]
    cols = _read_columns(data, required + optional)
    for f, name in enumerate(field_names):
        values = cols[name]
        _check_int_column(name, values, "field")
        if values.min() < 0:
            raise ValueError(f"field {name!r} has negative ids (min {values.min()}); ids must be in [0, vocab)")
        if vocab_sizes is not None and values.max() >= vocab_sizes[f]:
            raise ValueError(
                f"field {name!r} has id {values.max()} >= its vocabulary size {vocab_sizes[f]}; ids must be in "
                f"[0, {vocab_sizes[f]})"
            )

    if "click" not in cols:
        return
    click = cols["click"]
    if click.dtype.kind not in "iubf":
        raise ValueError(f"label 'click' must be numeric 0/1, got dtype {click.dtype}")
    if not np.all((click == 0) | (click == 1)):  # NaN fails both comparisons
        bad = click[~((click == 0) | (click == 1))][0]
        raise ValueError(f"label 'click' must hold only 0 and 1, found {bad!r}")
    clicked = click == 1
    if "dwell_bin" in cols:
        dwell_bin = cols["dwell_bin"]
        _check_int_column("dwell_bin", dwell_bin, "label")
        in_range = (dwell_bin >= 0) & (dwell_bin < num_bins)
        if not np.all(in_range[clicked]):
            bad = dwell_bin[clicked & ~in_range][0]
            raise ValueError(f"label 'dwell_bin' must be in [0, {num_bins}) on clicked rows, found {bad}")
        if not np.all(in_range[~clicked] | (dwell_bin[~clicked] == IGNORE_INDEX)):
            bad = dwell_bin[~clicked & ~in_range & (dwell_bin != IGNORE_INDEX)][0]
            raise ValueError(
                f"label 'dwell_bin' must be {IGNORE_INDEX} or in [0, {num_bins}) on unclicked rows, found {bad}"
            )
    if "dwell_seconds" in cols:
        seconds = cols["dwell_seconds"]
        if seconds.dtype.kind not in "iuf":
            raise ValueError(f"column 'dwell_seconds' must be numeric, got dtype {seconds.dtype}")
        s = seconds[clicked]
        if not np.all(np.isfinite(s)) or np.any(s < 0):
            raise ValueError("column 'dwell_seconds' must be finite and >= 0 on clicked rows")


# --------------------------------------------------------------------------------------------------------------
# Loaded data sets
# --------------------------------------------------------------------------------------------------------------


class OrcaData(NamedTuple):
    """A loaded dataset and its field description; unpacks as `dataset, field_names, vocab_sizes, post_click`.

    Args:
        dataset (`datasets.Dataset`): the fields plus `click`, `dwell_seconds` and `dwell_bin`.
        field_names (`list[str]`): the categorical input fields, in model column order.
        vocab_sizes (`list[int]`): vocabulary size of each field.
        post_click_fields (`list[str]`): fields masked by the counterfactual intervention (empty for Tenrec).
    """

    dataset: datasets.Dataset
    field_names: list[str]
    vocab_sizes: list[int]
    post_click_fields: list[str]


# --------------------------------------------------------------------------------------------------------------
# The user's click log (`hf-ext train orca --data`, `hf-ext evaluate orca --data`)
# --------------------------------------------------------------------------------------------------------------

CLICK_COLUMN = "click"
DWELL_COLUMN = "dwell_time"

CLICK_LOG_SCHEMA = DataSchema(
    (
        Column(CLICK_COLUMN, "int", "1 if the impression was clicked, else 0 (`true`/`false` are read as 1/0)"),
        Column(
            DWELL_COLUMN,
            "float",
            "seconds on the item after the click; read on clicked rows only (leave it empty or 0 on the others). "
            "Clipped to [1, 400] s (missing or 0 becomes 1 s) and cut into ORCA's 8 dwell-time bins with "
            "`hf_ext.orca.data.bin_dwell_time` (right-closed edges 0.1, 1.9, 26.1, 44.1, 72.1, 118.1, 216.1, 314, "
            "486 s); unclicked rows get the bin label -100, the ignore index of the DT loss and metrics",
        ),
        Column(
            "user_id",
            "any",
            "who saw the impression: a categorical field like the others (ids or strings); optional",
            required=False,
        ),
    ),
    description=(
        "one row per impression. Every other column is a categorical field (user, item or context: ids or strings) "
        "unless `--field_columns a,b,c` names the fields; `--post_click_fields` names those seen only after the "
        "click (item content), which the counterfactual intervention masks. Each field's values are mapped to ids "
        "`0 .. V-1` on the training split (sorted string values, kept in the model config as `field_values`); a "
        "value unseen in training goes to the field's out-of-vocabulary bucket"
    ),
)


class ClickLog(NamedTuple):
    """A user's click log, read and split; unpacks as `splits, field_names, post_click_fields`.

    Args:
        splits (`datasets.DatasetDict`): `train`, `validation`, `test` with the user's columns.
        field_names (`list[str]`): the categorical fields, in model column order.
        post_click_fields (`list[str]`): fields masked by the counterfactual intervention.
    """

    splits: datasets.DatasetDict
    field_names: list[str]
    post_click_fields: list[str]


def _names(text: str | list[str] | tuple[str, ...] | None) -> list[str] | None:
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    return [t.strip() for t in items if t.strip()]


def load_click_log(
    source: str | PathLike,
    *,
    field_columns: str | list[str] | None = None,
    post_click_fields: str | list[str] | None = None,
    validation: float = 0.1,
    test: float = 0.1,
    seed: int = 0,
) -> ClickLog:
    """Reads a click log in the format of [`CLICK_LOG_SCHEMA`] through [`~hf_ext.core.user_data.load_user_data`]
    and splits it ([`~hf_ext.core.user_data.split_data`]: the user's own train/validation/test files where present,
    else a split seeded by `seed`).

    Args:
        source (`str` or `os.PathLike`): a CSV / TSV / JSON(L) / Parquet file, a folder with `train.*` /
            `validation.*` / `test.*` files, or a Hub dataset id.
        field_columns (`str` or `list[str]`, *optional*): the categorical fields (comma-separated in a string);
            default every column but `click` and `dwell_time`.
        post_click_fields (`str` or `list[str]`, *optional*): fields seen only after the click.
        validation (`float`), test (`float`): shares split off `train` when the data has no such split.
        seed (`int`): seed of that split.

    Raises:
        [`~hf_ext.core.user_data.UserDataError`]: naming a missing or ill-typed column, or a flag naming a column
            the log does not have.
    """
    data = load_user_data(source, schema=CLICK_LOG_SCHEMA)
    columns = data["train"].column_names
    fields = _names(field_columns)
    if fields is None:
        fields = [c for c in columns if c not in (CLICK_COLUMN, DWELL_COLUMN)]
    elif not fields:
        raise UserDataError("--field_columns names no column")
    for name, split in data.items():
        require_columns(split, fields, source=f"{source} (split {name!r}, --field_columns)")
    bad = [f for f in fields if f in (CLICK_COLUMN, DWELL_COLUMN)]
    if bad:
        raise UserDataError(f"--field_columns: {bad} are label columns, not fields")
    if not fields:
        raise UserDataError(f"{source} has no field column besides {CLICK_COLUMN!r} and {DWELL_COLUMN!r}")
    post_click = _names(post_click_fields) or []
    unknown = [f for f in post_click if f not in fields]
    if unknown:
        raise UserDataError(f"--post_click_fields: {unknown} are not among the fields {fields}")
    return ClickLog(split_data(data, validation=validation, test=test, seed=seed), fields, post_click)


def field_vocabulary(table: datasets.Dataset, field_names: list[str]) -> dict[str, list[str]]:
    """Each field's values on `table` (the training split), as sorted strings: id `i` of field `f` is
    `vocabulary[f][i]`."""
    frame = table.select_columns(field_names).to_pandas()
    return {f: np.unique(frame[f].to_numpy(dtype=object).astype(str)).tolist() for f in field_names}


def field_ids(rows, field_names: list[str], field_values: dict[str, list[str]]) -> np.ndarray:
    """The model's `input_ids` (`int64`, `[N, F]`) for rows of a click log: a `pandas.DataFrame`, a
    `datasets.Dataset` or a list of dicts with the field columns (labels not needed), each value looked up in
    `field_values` (a trained model's `config.field_values`); a value unseen in training gets the
    out-of-vocabulary id `V + 1`."""
    if isinstance(rows, datasets.Dataset):
        rows = rows.select_columns(list(field_names)).to_pandas()
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    missing = [f for f in field_names if f not in frame.columns]
    if missing:
        raise UserDataError(f"the rows have no field column {missing} (the model reads {list(field_names)})")
    out = np.empty((len(frame), len(field_names)), dtype=np.int64)
    for j, f in enumerate(field_names):
        lookup = {v: i for i, v in enumerate(field_values[f])}
        oov = len(lookup) + 1  # `V` is the blocked id of the intervention; every id above it is the OOV bucket
        out[:, j] = [lookup.get(v, oov) for v in frame[f].to_numpy(dtype=object).astype(str)]
    return out


def encode_click_log(
    table: datasets.Dataset, field_names: list[str], field_values: dict[str, list[str]]
) -> datasets.Dataset:
    """A click log in the user's format as an ORCA frame: field ids (values unseen in `field_values` go to the
    out-of-vocabulary id `V + 1`), `click`, `dwell_seconds` (clipped to [1, 400] s on clicked rows, 0 elsewhere) and
    `dwell_bin` ([`bin_dwell_time`], -100 where not clicked). [`to_model_features`] turns it into model inputs.

    Raises:
        [`~hf_ext.core.user_data.UserDataError`]: `click` is not 0/1, or `dwell_time` is negative on a clicked row.
    """
    frame = table.select_columns([*field_names, CLICK_COLUMN, DWELL_COLUMN]).to_pandas()
    click = pd.to_numeric(frame[CLICK_COLUMN], errors="coerce").to_numpy(np.float64)
    if not np.all((click == 0) | (click == 1)):
        bad = frame[CLICK_COLUMN].to_numpy()[~((click == 0) | (click == 1))][0]
        raise UserDataError(f"column {CLICK_COLUMN!r} must hold only 0 and 1, found {bad!r}")
    clicked = click == 1
    seconds = pd.to_numeric(frame[DWELL_COLUMN], errors="coerce").to_numpy(np.float64)
    if np.any(seconds[clicked] < 0):
        raise UserDataError(
            f"column {DWELL_COLUMN!r} must be >= 0 seconds on clicked rows, found {seconds[clicked].min()}"
        )
    # Missing or 0 on a clicked row becomes 1 s ("opened and closed at once"), as in the official preprocessing.
    seconds = np.clip(np.where(np.isnan(seconds), MIN_SECONDS, seconds), MIN_SECONDS, MAX_SECONDS)
    ids = field_ids(frame, field_names, field_values)
    columns: dict[str, np.ndarray] = {f: ids[:, j] for j, f in enumerate(field_names)}
    columns["click"] = clicked.astype(np.int64)
    columns["dwell_seconds"] = np.where(clicked, seconds, 0.0).astype(np.float32)
    columns["dwell_bin"] = np.where(clicked, bin_dwell_time(seconds), IGNORE_INDEX).astype(np.int64)
    return dataset_from_columns(columns)


def write_example_click_log(path: str | PathLike, num_rows: int = 400, seed: int = 0) -> str:
    """Writes a small click log in the documented format (a CSV with `user_id`, `item_id`, `category`, `hour`,
    `click`, `dwell_time`), for the docs and for trying the commands: clicks and dwell depend on the item's
    category and the user, so there is something to learn. Returns the path."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, 20, num_rows)
    item = rng.integers(0, 50, num_rows)
    category = np.array(["news", "sport", "tech", "travel"])[item % 4]
    hour = rng.integers(0, 24, num_rows)
    p_click = 0.15 + 0.25 * (item % 4 == 1) + 0.1 * (user % 3 == 0)
    click = (rng.random(num_rows) < p_click).astype(int)
    dwell = np.where(click == 1, np.round(rng.lognormal(3.0 + 0.6 * (item % 4 == 2), 0.8, num_rows), 1), np.nan)
    frame = pd.DataFrame(
        {"user_id": [f"u{u}" for u in user], "item_id": item, "category": category, "hour": hour, "click": click,
         "dwell_time": dwell}
    )  # fmt: skip
    frame.to_csv(path, index=False)
    return str(path)


# --------------------------------------------------------------------------------------------------------------
# Model features and split
# --------------------------------------------------------------------------------------------------------------


def to_model_features(
    dataset: datasets.Dataset,
    field_names: list[str] | tuple[str, ...],
    vocab_sizes: list[int] | None = None,
    num_bins: int = len(ORCA_BIN_EDGES) - 1,
) -> datasets.Dataset:
    """Turns a frame of fields and labels into the model's inputs.

    Output columns: `input_ids` (`int64` list of length F, in `field_names` order), `click_labels` (`float32`) and
    `dwell_labels` (`int64`, -100 where not clicked) when the frame has labels, `user_ids` (`int64`, copied from
    `user_id` for per-user NDCG) when it has that column, and `dwell_seconds` / `true_click_prob` when present.
    The field columns themselves are dropped. `with_format("torch")` gives `input_ids` as a `[N, F]` tensor.

    Args:
        dataset (`datasets.Dataset`): a frame as returned by [`generate_synthetic`] or [`load_tenrec_qk_article`].
        field_names (`list[str]`): the input fields, in model column order.
        vocab_sizes (`list[int]`, *optional*): vocabulary sizes; an id `>=` its size raises `ValueError`.
        num_bins (`int`, defaults to 8): K, for checking `dwell_bin`.
    """
    field_names = list(field_names)
    has_labels = "click" in dataset.column_names
    validate_orca_frame(dataset, field_names, vocab_sizes=vocab_sizes, num_bins=num_bins, require_labels=has_labels)
    keep = [name for name in ("dwell_seconds", "true_click_prob") if name in dataset.column_names]
    has_user = "user_id" in dataset.column_names

    out_features: dict[str, Any] = {"input_ids": datasets.List(datasets.Value("int64"), length=len(field_names))}
    if has_labels:
        out_features["click_labels"] = datasets.Value("float32")
        out_features["dwell_labels"] = datasets.Value("int64")
    if has_user:
        out_features["user_ids"] = datasets.Value("int64")
    for name in keep:
        out_features[name] = datasets.Value("float32")

    def convert(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {"input_ids": np.stack([np.asarray(batch[name], dtype=np.int64) for name in field_names], axis=1)}
        if has_labels:
            out["click_labels"] = np.asarray(batch["click"], dtype=np.float32)
            out["dwell_labels"] = np.asarray(batch["dwell_bin"], dtype=np.int64)
        if has_user:
            out["user_ids"] = np.asarray(batch["user_id"], dtype=np.int64)
        for name in keep:
            out[name] = np.asarray(batch[name], dtype=np.float32)
        return out

    converted = dataset.with_format("numpy").map(
        convert,
        batched=True,
        batch_size=20_000,
        remove_columns=dataset.column_names,
        features=datasets.Features(out_features),
        desc="ORCA features",
    )
    return converted.with_format(None)


def train_val_test_split(
    dataset: datasets.Dataset, seed: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
) -> datasets.DatasetDict:
    """Random train/validation/test split (80/10/10 in the official code).

    The train and validation sizes are `floor(fraction · N)`; the test split takes the rest. Rows stay in permuted
    order, as `torch.utils.data.random_split` leaves them: the official DataLoader does not shuffle, so this order
    is the training order.

    Args:
        dataset (`datasets.Dataset`): rows to split.
        seed (`int`): seed of the permutation.
        fractions (`tuple[float, float, float]`, defaults to `(0.8, 0.1, 0.1)`): positive shares summing to 1.

    Returns:
        `datasets.DatasetDict` with `train`, `validation` and `test`.
    """
    fr = np.asarray(fractions, dtype=np.float64)
    if fr.shape != (3,) or not np.all(np.isfinite(fr)) or np.any(fr <= 0) or abs(fr.sum() - 1.0) > 1e-6:
        raise ValueError(f"fractions must be three positive numbers summing to 1, got {fractions!r}")
    n = len(dataset)
    n_train, n_val = int(fr[0] * n), int(fr[1] * n)
    if n_train == 0 or n_val == 0 or n - n_train - n_val == 0:
        raise ValueError(f"dataset with {n} rows is too small for fractions {fractions!r}: a split would be empty")
    perm = np.random.default_rng(seed).permutation(n)
    return datasets.DatasetDict(
        {
            "train": dataset.select(perm[:n_train]),
            "validation": dataset.select(perm[n_train : n_train + n_val]),
            "test": dataset.select(perm[n_train + n_val :]),
        }
    )
