"""Data for ORCA ([CIKM'25](https://arxiv.org/abs/2508.16573)): a synthetic click + dwell-time generator with a known
causal shortcut, the bad-input contract, and the conversion to model features (the Tenrec QK-article loader is in
`tenrec.py`).

Every frame in this module has the same label columns:

- `click` (`int64`, 0/1);
- `dwell_seconds` (`float32`): read time clipped to [1, 400] s for clicked rows, 0.0 for the others;
- `dwell_bin` (`int64`): ORCA's dwell-time bin (K = 8) for clicked rows, -100 (the ignore index of
  `torch.nn.functional.cross_entropy`) for the others, because the DT loss and metrics use clicked rows only.

What is simulated: everything [`generate_synthetic`] returns. Nothing in it comes from a real log.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
from datasets.table import InMemoryTable

from .configuration_orca import ORCA_BIN_EDGES

# Exposure fields are seen before the click; the post-click (content) fields are the ones the counterfactual
# intervention replaces with "blocked" ids, so that the NDE branch learns dwell time from exposure cues alone.
FIELD_NAMES: tuple[str, ...] = (
    "user_id",
    "item_id",
    "clickbait_bin",
    "title_tag",
    "quality_bin",
    "length_bin",
    "category",
)
EXPOSURE_FIELDS: tuple[str, ...] = ("clickbait_bin", "title_tag")
POST_CLICK_FIELDS: tuple[str, ...] = ("quality_bin", "length_bin", "category")

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


# --------------------------------------------------------------------------------------------------------------
# Synthetic generator
# --------------------------------------------------------------------------------------------------------------


@dataclass
class SyntheticOrcaConfig:
    r"""Parameters of the synthetic click + dwell-time generator (the spec's "Offline reproduction plan").

    The causal graph follows the paper: exposure X → click C → dwell T, plus X → T. Clickbait `b` is the negative
    transfer (it raises clicks and lowers dwell), quality `q` the positive one (it raises both):

    - click: `P(C=1) = σ(base + s·κ·(b − E[b]) + 0.6·q + 0.3·π_u + a_{u,cat})`;
    - dwell (clicked only): `log(1+T) = μ + 0.9·q + 0.5·log ℓ + 0.4·π_u − s·κ·(b − E[b]) + ε`, `ε ~ N(0, 0.5²)`;
    - with probability `σ(bounce_logit + s·κ·(b − E[b]))` a click is "opened and closed at once" (T = 1 s, bin 0).

    Two deliberate changes to the spec's formulas, both documented here:

    - **Scale κ (`clickbait_scale`, 2.5).** Beta(2, 5) has mean 0.29 and std 0.16, so the spec's `s·b` would move a
      logit by only ±0.16·s: even s = 3 would be weaker than quality (0.6 std). With κ = 2.5 one unit of `s` moves
      the click logit and log-dwell by 0.4 per std of `b`; at s = 3 the shortcut (1.2 per std) outweighs quality in
      both tasks, a strong shortcut.
    - **Centring `b − E[b]`.** It leaves the causal effect of `b` unchanged but keeps the overall CTR (≈ 10 % at
      s = 0, ≈ 14 % at s = 3) and the average dwell of a typical item stable across the shortcut sweep, so the sweep
      changes the shortcut and not the base rates.

    At s = 0 clickbait has no effect on anything, so a debiasing method should gain nothing there.

    Args:
        num_users (`int`, defaults to 3000): users; each has a patience `π_u ~ N(0, 1)`.
        num_items (`int`, defaults to 2000): items.
        num_impressions (`int`, defaults to 200000): impressions, each a uniformly drawn (user, item) pair.
        shortcut_strength (`float`, defaults to 1.0): `s` (the spec's `s_b = s_neg`), ≥ 0.
        num_categories (`int`, defaults to 20): item categories (post-click field).
        num_title_tags (`int`, defaults to 50): title-tag ids (exposure field). They are drawn independently of
            everything else: a nuisance exposure field standing in for hashed title tokens.
        num_value_bins (`int`, defaults to 10): quantile bins (over items) used to expose `b`, `q` and `ℓ` as
            categorical ids.
        base_click_logit (`float`, defaults to -2.5): `base`.
        seed (`int`, defaults to 0): seed of the NumPy generator; the output is a function of the config alone.
        clickbait_alpha (`float`, defaults to 2.0), clickbait_beta (`float`, defaults to 5.0): `b ~ Beta(α, β)`.
        clickbait_scale (`float`, defaults to 2.5): κ, see above.
        click_quality_coef (`float`, defaults to 0.6), click_patience_coef (`float`, defaults to 0.3): click
            coefficients of `q` and `π_u`.
        affinity_std (`float`, defaults to 0.5): std of the user × category affinity `a_{u,cat} ~ N(0, σ²)` (the
            spec gives no value).
        dwell_mu (`float`, defaults to 3.6): μ, chosen so that at s = 0 the clicked dwell spreads over bins 0–5
            with about 60 % of it in the moderate bins 2–5 (median ≈ 58 s).
        dwell_quality_coef (`float`, defaults to 0.9), dwell_length_coef (`float`, defaults to 0.5),
            dwell_patience_coef (`float`, defaults to 0.4): dwell coefficients of `q`, `log ℓ` and `π_u`.
        dwell_noise_std (`float`, defaults to 0.5): std of ε.
        length_log_mean (`float`, defaults to 0.0), length_log_sigma (`float`, defaults to 0.5): `ℓ ~
            LogNormal(mean, sigma)` (the spec gives no values; 0.5 keeps the 400 s clip bin below 10 %).
        bounce_logit (`float`, defaults to -2.5): logit of the "opened and closed at once" probability for an item
            of average clickbait (≈ 7.6 % of clicks).
    """

    num_users: int = 3000
    num_items: int = 2000
    num_impressions: int = 200_000
    shortcut_strength: float = 1.0
    num_categories: int = 20
    num_title_tags: int = 50
    num_value_bins: int = 10
    base_click_logit: float = -2.5
    seed: int = 0
    clickbait_alpha: float = 2.0
    clickbait_beta: float = 5.0
    clickbait_scale: float = 2.5
    click_quality_coef: float = 0.6
    click_patience_coef: float = 0.3
    affinity_std: float = 0.5
    dwell_mu: float = 3.6
    dwell_quality_coef: float = 0.9
    dwell_length_coef: float = 0.5
    dwell_patience_coef: float = 0.4
    dwell_noise_std: float = 0.5
    length_log_mean: float = 0.0
    length_log_sigma: float = 0.5
    bounce_logit: float = -2.5

    def __post_init__(self):
        positive_ints = ("num_users", "num_items", "num_impressions", "num_categories", "num_title_tags")
        for name in positive_ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.num_value_bins, bool) or not isinstance(self.num_value_bins, (int, np.integer)):
            raise ValueError(f"num_value_bins must be an integer >= 2, got {self.num_value_bins!r}")
        if self.num_value_bins < 2:
            raise ValueError(f"num_value_bins must be an integer >= 2, got {self.num_value_bins!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        int_names = set(positive_ints) | {"num_value_bins", "seed"}
        for f in fields(self):
            if f.name in int_names:
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
                raise ValueError(f"{f.name} must be a finite number, got {value!r}")
        for name in ("shortcut_strength", "affinity_std", "dwell_noise_std", "length_log_sigma", "clickbait_scale"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("clickbait_alpha", "clickbait_beta"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def field_vocab_sizes(config: SyntheticOrcaConfig) -> list[int]:
    """Vocabulary size of each synthetic field, in [`FIELD_NAMES`] order.

    Args:
        config ([`SyntheticOrcaConfig`]): the generator's config.
    """
    sizes = {
        "user_id": config.num_users,
        "item_id": config.num_items,
        "clickbait_bin": config.num_value_bins,
        "title_tag": config.num_title_tags,
        "quality_bin": config.num_value_bins,
        "length_bin": config.num_value_bins,
        "category": config.num_categories,
    }
    return [int(sizes[name]) for name in FIELD_NAMES]


def dataset_from_columns(columns: dict[str, np.ndarray]) -> datasets.Dataset:
    # Straight to Arrow: `Dataset.from_dict(..., features=...)` encodes every value in Python (~2 s for 200k rows).
    # The Arrow types follow the NumPy dtypes (int64, float32), which is the schema wanted.
    table = pa.Table.from_pydict({name: pa.array(values) for name, values in columns.items()})
    return datasets.Dataset(InMemoryTable(table))


def _quantile_bins(values: np.ndarray, num_bins: int) -> np.ndarray:
    # Quantiles over the item population give every bin about the same number of items, so every id is learnable;
    # fixed-width bins would leave the upper clickbait bins (Beta(2, 5) tail) almost empty.
    inner = np.quantile(values, np.linspace(0.0, 1.0, num_bins + 1)[1:-1])
    return np.searchsorted(inner, values, side="right").astype(np.int64)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic


def generate_synthetic(config: SyntheticOrcaConfig) -> datasets.Dataset:
    """Draws a synthetic impression log with a known CTR → DT shortcut (see [`SyntheticOrcaConfig`]).

    Everything is simulated. Columns: the 7 [`FIELD_NAMES`] (`int64` ids in `[0, vocab)`), `click` (`int64`),
    `dwell_seconds` (`float32`, 0.0 where not clicked), `dwell_bin` (`int64`, -100 where not clicked) and
    `true_click_prob` (`float32`, the generator's `P(C=1)`, for ground-truth heatmaps).

    Args:
        config ([`SyntheticOrcaConfig`]): sizes, coefficients and seed.

    Returns:
        `datasets.Dataset` with `config.num_impressions` rows.
    """
    c = config
    rng = np.random.default_rng(c.seed)
    # Population (the draw order is fixed: changing it changes every dataset for a given seed).
    patience = rng.standard_normal(c.num_users)
    affinity = rng.normal(0.0, c.affinity_std, size=(c.num_users, c.num_categories))
    clickbait = rng.beta(c.clickbait_alpha, c.clickbait_beta, size=c.num_items)
    title_tag = rng.integers(0, c.num_title_tags, size=c.num_items)
    quality = rng.standard_normal(c.num_items)
    log_length = rng.normal(c.length_log_mean, c.length_log_sigma, size=c.num_items)
    category = rng.integers(0, c.num_categories, size=c.num_items)
    # Impressions.
    users = rng.integers(0, c.num_users, size=c.num_impressions)
    items = rng.integers(0, c.num_items, size=c.num_impressions)
    click_u = rng.random(c.num_impressions)
    noise = rng.normal(0.0, c.dwell_noise_std, size=c.num_impressions)
    bounce_u = rng.random(c.num_impressions)

    clickbait_mean = c.clickbait_alpha / (c.clickbait_alpha + c.clickbait_beta)
    shortcut = c.shortcut_strength * c.clickbait_scale * (clickbait - clickbait_mean)  # per item
    click_logit = (
        c.base_click_logit
        + shortcut[items]
        + c.click_quality_coef * quality[items]
        + c.click_patience_coef * patience[users]
        + affinity[users, category[items]]
    )
    click_prob = _sigmoid(click_logit)
    click = click_u < click_prob

    log1p_t = (
        c.dwell_mu
        + c.dwell_quality_coef * quality[items]
        + c.dwell_length_coef * log_length[items]
        + c.dwell_patience_coef * patience[users]
        - shortcut[items]
        + noise
    )
    seconds = np.clip(np.expm1(log1p_t), MIN_SECONDS, MAX_SECONDS)
    # "Opened and closed at once": more likely the stronger the clickbait (and independent of it at s = 0).
    bounced = bounce_u < _sigmoid(c.bounce_logit + shortcut[items])
    seconds = np.where(bounced, MIN_SECONDS, seconds)

    dwell_seconds = np.where(click, seconds, 0.0).astype(np.float32)
    dwell_bin = np.where(click, bin_dwell_time(seconds), IGNORE_INDEX).astype(np.int64)
    columns = {
        "user_id": users.astype(np.int64),
        "item_id": items.astype(np.int64),
        "clickbait_bin": _quantile_bins(clickbait, c.num_value_bins)[items],
        "title_tag": title_tag.astype(np.int64)[items],
        "quality_bin": _quantile_bins(quality, c.num_value_bins)[items],
        "length_bin": _quantile_bins(log_length, c.num_value_bins)[items],
        "category": category.astype(np.int64)[items],
        "click": click.astype(np.int64),
        "dwell_seconds": dwell_seconds,
        "dwell_bin": dwell_bin,
        "true_click_prob": click_prob.astype(np.float32),
    }
    return dataset_from_columns(columns)


# --------------------------------------------------------------------------------------------------------------
# Bad-input contract
# --------------------------------------------------------------------------------------------------------------


def _columns(data: datasets.Dataset | pd.DataFrame) -> list[str]:
    if isinstance(data, pd.DataFrame):
        return [str(c) for c in data.columns]
    if isinstance(data, datasets.Dataset):
        return list(data.column_names)
    raise TypeError(f"expected a datasets.Dataset or a pandas.DataFrame, got {type(data).__name__}")


def _read_columns(data: datasets.Dataset | pd.DataFrame, names: list[str]) -> dict[str, np.ndarray]:
    if isinstance(data, pd.DataFrame):
        return {name: data[name].to_numpy() for name in names}
    # Slicing a numpy-formatted dataset reads whole Arrow columns (and honours an indices mapping after
    # `select`/`shuffle`); indexing a single column returns a lazy `Column` that converts row by row.
    return dict(data.with_format("numpy", columns=names)[:]) if len(data) else {n: np.array([]) for n in names}


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
