"""A synthetic click + dwell-time generator **with ORCA's premise** ([CIKM'25](https://arxiv.org/abs/2508.16573)):
leaning on what predicts the click misleads dwell time, so a multi-task model predicts moderate durations worse than a
single-task one. Its exact Bayes posterior (the **oracle**) comes with it.

The paper's argument, and how each step is built in (each a knob of [`RelianceOrcaConfig`]):

- **The shared representation is a click representation.** The CTR loss sees every impression, the DT loss only the
  clicked ones, so in a multi-task model the item and user embeddings are shaped mostly by what drives the click. Here
  every item's click propensity comes from two item latents that only the item id carries: clickbait `b` (with
  strength `s`, it also shortens reads and raises bounces: the negative CTR → DT transfer) and a user × category
  affinity. Neither says anything about how long a non-bait article is read.
- **Moderate durations are set by something the click does not reveal.** An item's depth `d` (how much there is to
  read) sets the read time over the moderate bins (about 12 s to 2 min) and does not move the click at all. Only the
  item id carries it exactly; the post-click field `length_bin` is a noisy view of it (right with
  `length_accuracy`).
- **So a model that predicts dwell from click cues collapses.** What the click representation gives the DT head is
  bait (bounce / short) vs. not bait: the extremes. The moderate bins need the depth, which a multi-task model has to
  learn against the CTR gradient in the same embeddings, and a single-task model learns from the clicked rows
  alone.

The shifted test (`shifted_test_config`, `s = 0` by default) keeps the population and removes the bait → dwell path.
All latents are functions of the ids and the population seed, so the oracle `P(bin | x, C = 1)` and `P(C = 1 | x)`
are closed forms (Gaussian CDF differences of log-dwell mixed with the bounce probability): exact. Everything is
simulated.

**Which experiment it serves:** the premise family of `hf-ext reproduce orca --family reliance` (and `--full`),
judged on the i.i.d. test against its exact oracle; [`~hf_ext.orca.spurious_generator`] stays as the control
without the premise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import datasets
import numpy as np

from .configuration_orca import ORCA_BIN_EDGES
from .data import (
    IGNORE_INDEX,
    MAX_SECONDS,
    MIN_SECONDS,
    bin_dwell_time,
    check_generator_numbers,
    dataset_from_columns,
)
from .spurious_generator import _sigmoid

RELIANCE_FIELD_NAMES: tuple[str, ...] = ("user_id", "item_id", "title_tag", "category", "length_bin")
RELIANCE_EXPOSURE_FIELDS: tuple[str, ...] = ("user_id", "item_id", "title_tag")
RELIANCE_POST_CLICK_FIELDS: tuple[str, ...] = ("category", "length_bin")

_INT_FIELDS = (
    "num_users",
    "num_items",
    "num_impressions",
    "num_patience_groups",
    "num_depth_levels",
    "num_categories",
    "num_title_tags",
    "seed",
    "population_seed",
)


@dataclass(frozen=True)
class RelianceOrcaConfig:
    r"""Parameters of the CTR-reliance generator (see the module docstring).

    Population (`population_seed`): user `u` in patience group `g_u` (value `π_g`); item `i` with clickbait
    `b_i ~ Bernoulli(bait_rate)`, depth level `d_i` (value `δ_d`, evenly spaced in `[-depth_span, depth_span]`),
    category `c_i`, nuisance title tag, and `length_bin_i` equal to `d_i` with probability `length_accuracy`, else
    uniform; user × category affinity `a_{u,c} ~ N(0, affinity_std²)`. Per impression (uniform user and item):

    - click: `P(C = 1) = σ(base + c_b·b_i + c_π·π_g + a_{u,c_i})`;
    - dwell (clicked only): `log(1 + T) = μ + δ_{d_i} + d_π·π_g − s·κ_b·(b_i − bait_rate) + σ_T·ε`, clipped to
      [1, 400] s;
    - with probability `σ(bounce_logit + s·κ_bb·b_i)` a click bounces (T = 1 s, bin 0).

    At `s = 0` nothing that moves the click (bait, affinity) moves dwell time, except the patience group, which is
    the small positive transfer.

    Args:
        num_users (`int`, defaults to 1000), num_items (`int`, defaults to 300), num_impressions (`int`, defaults to
            48000): sizes.
        shortcut_strength (`float`, defaults to 1.0): `s >= 0`.
        num_patience_groups (`int`, defaults to 5): patience values evenly spaced in [-1, 1].
        num_depth_levels (`int`, defaults to 4), depth_span (`float`, defaults to 1.2), length_accuracy (`float`,
            defaults to 0.5): the depth and its noisy post-click view.
        num_categories (`int`, defaults to 8), num_title_tags (`int`, defaults to 20): item fields.
        bait_rate (`float`, defaults to 0.3), base_click_logit (`float`, defaults to -2.4), click_bait_coef
            (`float`, defaults to 1.5), click_patience_coef (`float`, defaults to 0.3), affinity_std (`float`,
            defaults to 0.8): the click model.
        dwell_mu (`float`, defaults to 3.7), dwell_patience_coef (`float`, defaults to 0.3), dwell_noise_std
            (`float`, defaults to 0.45): the content → dwell path.
        bait_dwell_coef (`float`, defaults to 0.5), bounce_logit (`float`, defaults to -2.5), bait_bounce_coef
            (`float`, defaults to 0.8): the shortcut, each multiplied by `s`.
        seed (`int`, defaults to 0), population_seed (`int`, defaults to 0): impressions and population.
    """

    num_users: int = 1000
    num_items: int = 300
    num_impressions: int = 48_000
    shortcut_strength: float = 1.0
    num_patience_groups: int = 5
    num_depth_levels: int = 4
    depth_span: float = 1.2
    length_accuracy: float = 0.5
    num_categories: int = 8
    num_title_tags: int = 20
    bait_rate: float = 0.3
    base_click_logit: float = -2.4
    click_bait_coef: float = 1.5
    click_patience_coef: float = 0.3
    affinity_std: float = 0.8
    dwell_mu: float = 3.7
    dwell_patience_coef: float = 0.3
    dwell_noise_std: float = 0.45
    bait_dwell_coef: float = 0.5
    bounce_logit: float = -2.5
    bait_bounce_coef: float = 0.8
    seed: int = 0
    population_seed: int = 0

    def __post_init__(self):
        check_generator_numbers(self, _INT_FIELDS, zero_ok=("seed", "population_seed"))
        for name in ("num_patience_groups", "num_depth_levels"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be >= 2, got {getattr(self, name)!r}")
        if not 0.0 < self.bait_rate < 1.0:
            raise ValueError(f"bait_rate must be in (0, 1), got {self.bait_rate!r}")
        if not 0.0 <= self.length_accuracy <= 1.0:
            raise ValueError(f"length_accuracy must be in [0, 1], got {self.length_accuracy!r}")
        for name in ("shortcut_strength", "depth_span", "affinity_std", "bait_dwell_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.dwell_noise_std <= 0:
            raise ValueError(f"dwell_noise_std must be > 0, got {self.dwell_noise_std!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reliance_vocab_sizes(config: RelianceOrcaConfig) -> list[int]:
    """Vocabulary size of each field, in [`RELIANCE_FIELD_NAMES`] order."""
    c = config
    return [c.num_users, c.num_items, c.num_title_tags, c.num_categories, c.num_depth_levels]


def reliance_test_config(
    config: RelianceOrcaConfig, num_impressions: int, seed: int, test_strength: float | None = None
) -> RelianceOrcaConfig:
    """A test set of the same population with its own seed (and the shortcut at `test_strength` when given)."""
    strength = config.shortcut_strength if test_strength is None else test_strength
    return replace(config, num_impressions=num_impressions, seed=seed, shortcut_strength=strength)


@dataclass
class ReliancePopulation:
    user_group: np.ndarray  # [num_users] patience group
    patience: np.ndarray  # [num_groups] value π_g
    affinity: np.ndarray  # [num_users, num_categories] a_{u,c}
    bait: np.ndarray  # [num_items] 0/1
    depth: np.ndarray  # [num_items] level
    depth_value: np.ndarray  # [num_depth_levels] δ_d
    category: np.ndarray  # [num_items]
    title_tag: np.ndarray  # [num_items]
    length_bin: np.ndarray  # [num_items] noisy view of depth


def reliance_population(config: RelianceOrcaConfig) -> ReliancePopulation:
    """The fixed population of `config.population_seed` (shared by every split of an experiment)."""
    c = config
    rng = np.random.default_rng([c.population_seed, 15_485_863])
    depth = rng.integers(0, c.num_depth_levels, size=c.num_items)
    keep = rng.random(c.num_items) < c.length_accuracy
    return ReliancePopulation(
        user_group=rng.integers(0, c.num_patience_groups, size=c.num_users),
        patience=np.linspace(-1.0, 1.0, c.num_patience_groups),
        affinity=rng.normal(0.0, c.affinity_std, size=(c.num_users, c.num_categories)),
        bait=(rng.random(c.num_items) < c.bait_rate).astype(np.int64),
        depth=depth,
        depth_value=np.linspace(-c.depth_span, c.depth_span, c.num_depth_levels),
        category=rng.integers(0, c.num_categories, size=c.num_items),
        title_tag=rng.integers(0, c.num_title_tags, size=c.num_items),
        length_bin=np.where(keep, depth, rng.integers(0, c.num_depth_levels, size=c.num_items)),
    )


def _latents(c: RelianceOrcaConfig, pop: ReliancePopulation, users: np.ndarray, items: np.ndarray):
    """Click logit, mean log-dwell and bounce probability of each (user, item) pair."""
    s, bait, patience = c.shortcut_strength, pop.bait[items], pop.patience[pop.user_group[users]]
    click_logit = (
        c.base_click_logit
        + c.click_bait_coef * bait
        + c.click_patience_coef * patience
        + pop.affinity[users, pop.category[items]]
    )
    mean = (
        c.dwell_mu
        + pop.depth_value[pop.depth[items]]
        + c.dwell_patience_coef * patience
        - s * c.bait_dwell_coef * (bait - c.bait_rate)
    )
    bounce = _sigmoid(c.bounce_logit + s * c.bait_bounce_coef * bait)
    return click_logit, mean, bounce


def generate_reliance(config: RelianceOrcaConfig) -> datasets.Dataset:
    """Draws an impression log from the CTR-reliance generator.

    Columns: the 5 [`RELIANCE_FIELD_NAMES`] (`int64`), `click`, `dwell_seconds`, `dwell_bin` (as every ORCA frame),
    plus the diagnostics `clickbait`, `depth` (`int64`) and `true_click_prob` (`float32`), never model inputs.
    """
    c = config
    pop = reliance_population(c)
    rng = np.random.default_rng([c.seed, c.population_seed, 32_452_843])
    n = c.num_impressions
    users = rng.integers(0, c.num_users, size=n)
    items = rng.integers(0, c.num_items, size=n)
    click_u, noise, bounce_u = rng.random(n), rng.standard_normal(n), rng.random(n)
    click_logit, mean, bounce = _latents(c, pop, users, items)
    click_prob = _sigmoid(click_logit)
    click = click_u < click_prob
    seconds = np.clip(np.expm1(mean + c.dwell_noise_std * noise), MIN_SECONDS, MAX_SECONDS)
    seconds = np.where(bounce_u < bounce, MIN_SECONDS, seconds)
    columns = {
        "user_id": users.astype(np.int64),
        "item_id": items.astype(np.int64),
        "title_tag": pop.title_tag[items].astype(np.int64),
        "category": pop.category[items].astype(np.int64),
        "length_bin": pop.length_bin[items].astype(np.int64),
        "click": click.astype(np.int64),
        "dwell_seconds": np.where(click, seconds, 0.0).astype(np.float32),
        "dwell_bin": np.where(click, bin_dwell_time(seconds), IGNORE_INDEX).astype(np.int64),
        "clickbait": pop.bait[items].astype(np.int64),
        "depth": pop.depth[items].astype(np.int64),
        "true_click_prob": click_prob.astype(np.float32),
    }
    return dataset_from_columns(columns)


def reliance_oracle(config: RelianceOrcaConfig, frame: dict[str, np.ndarray] | datasets.Dataset) -> dict:
    """The exact posterior of the generator given the observed fields: `P(C = 1 | x)` and `P(bin | x, C = 1)`.

    Every latent is a function of `user_id`, `item_id` and the population, so the click probability is the click
    model itself and the bin probabilities are Gaussian CDF differences of log-dwell (the clip to [1, 400] s only
    moves mass inside the first and last bins), mixed with the bounce probability.

    Args:
        config ([`RelianceOrcaConfig`]): the generator of the data being scored (same population seed).
        frame (`dict` or `datasets.Dataset`): columns `user_id` and `item_id`.

    Returns:
        `dict` with `click_probs` (`[N]`) and `dt_probs` (`[N, K]`, rows sum to 1).
    """
    from scipy.special import ndtr

    if isinstance(frame, datasets.Dataset):
        frame = frame.with_format("numpy")
    users = np.asarray(frame["user_id"], dtype=np.int64)
    items = np.asarray(frame["item_id"], dtype=np.int64)
    click_logit, mean, bounce = _latents(config, reliance_population(config), users, items)
    inner = np.log1p(np.asarray(ORCA_BIN_EDGES[1:-1], dtype=np.float64))  # bin k: inner[k-1] < log1p T <= inner[k]
    cdf = ndtr((inner[None, :] - mean[:, None]) / config.dwell_noise_std)
    cdf = np.concatenate([np.zeros((len(users), 1)), cdf, np.ones((len(users), 1))], axis=1)
    dt = (1.0 - bounce)[:, None] * np.diff(cdf, axis=1)
    dt[:, 0] += bounce
    return {"click_probs": _sigmoid(click_logit), "dt_probs": dt}


__all__ = [
    "RELIANCE_EXPOSURE_FIELDS",
    "RELIANCE_FIELD_NAMES",
    "RELIANCE_POST_CLICK_FIELDS",
    "RelianceOrcaConfig",
    "ReliancePopulation",
    "generate_reliance",
    "reliance_oracle",
    "reliance_population",
    "reliance_test_config",
    "reliance_vocab_sizes",
]
