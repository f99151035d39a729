"""The causal dwell-time generator of the ORCA spec ([CIKM'25](https://arxiv.org/abs/2508.16573)): the paper's graph
X → C → T plus X → T, with clickbait as the negative CTR → DT transfer and quality as the positive one, swept by one
shortcut strength `s`.

**Which experiment it serves:** the data of `hf-ext train orca` (the default when no `--tenrec_csv` is given) and
of the training-script, Trainer and data-contract tests. It is *not* the test bed of the reproduction: the
reproduction's verdict is measured on [`~hf_ext.orca.spurious_generator`], whose shortcut is spurious (a train/test
shift, an exact oracle). On this generator a multi-task model gains from the CTR task (the paper's premise is
absent), which is why it serves training only.

What is simulated: everything [`generate_synthetic`] returns. Nothing in it comes from a real log.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import datasets
import numpy as np

from .data import IGNORE_INDEX, MAX_SECONDS, MIN_SECONDS, bin_dwell_time, dataset_from_columns

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
