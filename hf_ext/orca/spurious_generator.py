"""A synthetic click + dwell-time generator where the CTR → DT shortcut is spurious in ORCA's sense
([CIKM'25](https://arxiv.org/abs/2508.16573)), and its exact Bayes posterior (the **oracle**).

What makes the shortcut spurious here (each point is a knob of [`SpuriousOrcaConfig`]):

- **A hidden confounder seen through a noisy proxy.** Each impression's item is clickbait (`b = 1`) or not. `b` is
  never a model input: the model sees only `bait_proxy`, which equals `b` with the given sensitivity and false
  positive rate. Clickbait raises the click logit (at every strength) and, with strength `s`, lowers dwell time
  and raises the bounce probability: a negative CTR → DT transfer.
- **Dwell noise correlated with click propensity.** A per-impression impulse `z ~ N(0, 1)` (unobserved) raises the
  click logit and, with strength `s`, lowers log-dwell. Conditioning on the click selects high-`z` impressions, the
  more so the lower the observable click propensity.
- **A train/test shift in the shortcut's strength.** The strength `s` is a field of the config: draw the training
  data at `s` and a test set at another strength (`shifted_test_config`, `s = 0` by default), so a model that
  leaned on the shortcut pays for it on the shifted test, while a model that learned only the content → dwell
  path does not.
- **The masked fields carry the content information.** Items are drawn afresh for every impression (there is no
  item id to memorise), so the post-click fields `quality_bin`, `length_bin` and `category` are the only source
  of the content → dwell path; masking them removes it.

Everything is discrete except `z` and the dwell noise, so the posterior `P(bin | x, C = 1)` and `P(C = 1 | x)`
(given the observed fields `x`) are sums over `b` and a Gauss–Hermite integral over `z` with Gaussian-CDF bin
probabilities: exact up to quadrature error (< 1e-9 with the default 64 nodes). Everything is simulated.

**Which experiment it serves:** this is **the test bed of `hf-ext reproduce orca`** (the paper's claim is judged on
it, against its exact oracle) and of the Space's linked model. `hf-ext train orca` trains on the other generator,
[`~hf_ext.orca.causal_generator`] (the spec's causal log, without a train/test shift or an oracle).
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

SPURIOUS_FIELD_NAMES: tuple[str, ...] = (
    "user_id",
    "bait_proxy",
    "title_tag",
    "quality_bin",
    "length_bin",
    "category",
)
SPURIOUS_EXPOSURE_FIELDS: tuple[str, ...] = ("user_id", "bait_proxy", "title_tag")
SPURIOUS_POST_CLICK_FIELDS: tuple[str, ...] = ("quality_bin", "length_bin", "category")

_INT_FIELDS = (
    "num_users",
    "num_impressions",
    "num_patience_groups",
    "num_quality_levels",
    "num_length_levels",
    "num_categories",
    "num_title_tags",
    "seed",
    "population_seed",
)


@dataclass(frozen=True)
class SpuriousOrcaConfig:
    r"""Parameters of the spurious-shortcut generator (see the module docstring).

    Per impression, with user `u` (patience group `g_u`, value `π_g`), a fresh item (clickbait `b`, quality level
    `q` with value `v_q`, length level `l` with value `λ_l`, category `c` with dwell effect `δ_c`, nuisance title
    tag) and the impulse `z ~ N(0, 1)`:

    - `P(b = 1) = bait_rate`; `P(bait_proxy = 1 | b) = proxy_sensitivity` if `b = 1` else `proxy_false_positive`;
    - click: `P(C = 1) = σ(base + c_b·b + c_q·v_q + c_π·π_g + γ_C·z)`;
    - dwell (clicked only): `log(1 + T) = μ + d_q·v_q + d_l·λ_l + d_π·π_g + δ_c − s·κ_b·(b − bait_rate) − s·κ_z·z
      + σ_T·ε`, `ε ~ N(0, 1)`, clipped to [1, 400] s;
    - with probability `σ(bounce_logit + s·κ_bb·b)` a click bounces (T = 1 s, bin 0).

    At `s = 0` nothing that drives clicks (other than quality and patience, the positive transfer) moves dwell time.

    Args:
        num_users (`int`, defaults to 1000): users, each in one of `num_patience_groups` groups.
        num_impressions (`int`, defaults to 48000): impressions (uniform user, fresh item).
        shortcut_strength (`float`, defaults to 1.0): `s >= 0`.
        num_patience_groups (`int`, defaults to 5): patience values `π_g` evenly spaced in [-1.5, 1.5].
        num_quality_levels (`int`, defaults to 5): quality values `v_q` evenly spaced in [-1.5, 1.5].
        num_length_levels (`int`, defaults to 3): log-length values `λ_l` evenly spaced in [-0.7, 0.7].
        num_categories (`int`, defaults to 8): categories; `δ_c ~ N(0, category_effect_std²)` per population.
        num_title_tags (`int`, defaults to 20): nuisance exposure ids (independent of everything).
        bait_rate (`float`, defaults to 0.3), proxy_sensitivity (`float`, defaults to 0.75), proxy_false_positive
            (`float`, defaults to 0.2): the hidden confounder and its noisy proxy.
        base_click_logit (`float`, defaults to -2.0), click_bait_coef (`float`, defaults to 1.2),
            click_quality_coef (`float`, defaults to 0.5), click_patience_coef (`float`, defaults to 0.3),
            click_impulse_coef (`float`, defaults to 1.0): the click model.
        dwell_mu (`float`, defaults to 3.7), dwell_quality_coef (`float`, defaults to 0.6), dwell_length_coef
            (`float`, defaults to 0.6), dwell_patience_coef (`float`, defaults to 0.4), category_effect_std
            (`float`, defaults to 0.3), dwell_noise_std (`float`, defaults to 0.6): the content → dwell path.
        bait_dwell_coef (`float`, defaults to 0.6), impulse_dwell_coef (`float`, defaults to 0.25),
            bounce_logit (`float`, defaults to -2.5), bait_bounce_coef (`float`, defaults to 0.7): the shortcut,
            each multiplied by `s`.
        seed (`int`, defaults to 0): seed of the impressions.
        population_seed (`int`, defaults to 0): seed of the population (user groups, category effects); train and
            test sets of one experiment share it.
    """

    num_users: int = 1000
    num_impressions: int = 48_000
    shortcut_strength: float = 1.0
    num_patience_groups: int = 5
    num_quality_levels: int = 5
    num_length_levels: int = 3
    num_categories: int = 8
    num_title_tags: int = 20
    bait_rate: float = 0.3
    proxy_sensitivity: float = 0.75
    proxy_false_positive: float = 0.2
    base_click_logit: float = -2.0
    click_bait_coef: float = 1.2
    click_quality_coef: float = 0.5
    click_patience_coef: float = 0.3
    click_impulse_coef: float = 1.0
    dwell_mu: float = 3.7
    dwell_quality_coef: float = 0.6
    dwell_length_coef: float = 0.6
    dwell_patience_coef: float = 0.4
    category_effect_std: float = 0.3
    dwell_noise_std: float = 0.6
    bait_dwell_coef: float = 0.6
    impulse_dwell_coef: float = 0.25
    bounce_logit: float = -2.5
    bait_bounce_coef: float = 0.7
    seed: int = 0
    population_seed: int = 0

    def __post_init__(self):
        check_generator_numbers(self, _INT_FIELDS, zero_ok=("seed", "population_seed"))
        for name in ("num_patience_groups", "num_quality_levels", "num_length_levels"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be >= 2, got {getattr(self, name)!r}")
        for name in ("bait_rate", "proxy_sensitivity", "proxy_false_positive"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)!r}")
        for name in (
            "shortcut_strength",
            "category_effect_std",
            "click_impulse_coef",
            "impulse_dwell_coef",
            "bait_dwell_coef",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.dwell_noise_std <= 0:
            raise ValueError(f"dwell_noise_std must be > 0, got {self.dwell_noise_std!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def spurious_vocab_sizes(config: SpuriousOrcaConfig) -> list[int]:
    """Vocabulary size of each field, in [`SPURIOUS_FIELD_NAMES`] order."""
    c = config
    return [c.num_users, 2, c.num_title_tags, c.num_quality_levels, c.num_length_levels, c.num_categories]


def shifted_test_config(
    config: SpuriousOrcaConfig, num_impressions: int, seed: int, test_strength: float = 0.0
) -> SpuriousOrcaConfig:
    """A test set of the same population with the shortcut at `test_strength` (the shift) and its own seed."""
    return replace(config, num_impressions=num_impressions, seed=seed, shortcut_strength=test_strength)


@dataclass
class _Population:
    user_group: np.ndarray  # [num_users] group id
    patience: np.ndarray  # [num_groups] value π_g
    quality: np.ndarray  # [num_quality_levels] value v_q
    log_length: np.ndarray  # [num_length_levels] value λ_l
    category_effect: np.ndarray  # [num_categories] δ_c


def population(config: SpuriousOrcaConfig) -> _Population:
    """The fixed population of `config.population_seed` (shared by every split of an experiment)."""
    c = config
    rng = np.random.default_rng([c.population_seed, 7_919])
    return _Population(
        user_group=rng.integers(0, c.num_patience_groups, size=c.num_users),
        patience=np.linspace(-1.5, 1.5, c.num_patience_groups),
        quality=np.linspace(-1.5, 1.5, c.num_quality_levels),
        log_length=np.linspace(-0.7, 0.7, c.num_length_levels),
        category_effect=rng.normal(0.0, c.category_effect_std, size=c.num_categories),
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _click_logit(c: SpuriousOrcaConfig, pop: _Population, users, bait, quality, impulse):
    return (
        c.base_click_logit
        + c.click_bait_coef * bait
        + c.click_quality_coef * pop.quality[quality]
        + c.click_patience_coef * pop.patience[pop.user_group[users]]
        + c.click_impulse_coef * impulse
    )


def _dwell_mean(c: SpuriousOrcaConfig, pop: _Population, users, bait, quality, length, category, impulse):
    s = c.shortcut_strength
    return (
        c.dwell_mu
        + c.dwell_quality_coef * pop.quality[quality]
        + c.dwell_length_coef * pop.log_length[length]
        + c.dwell_patience_coef * pop.patience[pop.user_group[users]]
        + pop.category_effect[category]
        - s * c.bait_dwell_coef * (bait - c.bait_rate)
        - s * c.impulse_dwell_coef * impulse
    )


def _bounce_prob(c: SpuriousOrcaConfig, bait):
    return _sigmoid(c.bounce_logit + c.shortcut_strength * c.bait_bounce_coef * bait)


def generate_spurious(config: SpuriousOrcaConfig) -> datasets.Dataset:
    """Draws an impression log from the spurious-shortcut generator.

    Columns: the 6 [`SPURIOUS_FIELD_NAMES`] (`int64`), `click`, `dwell_seconds`, `dwell_bin` (as every ORCA frame),
    plus the hidden `clickbait` (`int64`) and the true `true_click_prob` (`float32`, given the hidden `b` and `z`),
    which are diagnostics, never model inputs.
    """
    c = config
    pop = population(c)
    rng = np.random.default_rng([c.seed, c.population_seed, 104_729])
    n = c.num_impressions
    users = rng.integers(0, c.num_users, size=n)
    bait = (rng.random(n) < c.bait_rate).astype(np.int64)
    proxy = (rng.random(n) < np.where(bait == 1, c.proxy_sensitivity, c.proxy_false_positive)).astype(np.int64)
    title_tag = rng.integers(0, c.num_title_tags, size=n)
    quality = rng.integers(0, c.num_quality_levels, size=n)
    length = rng.integers(0, c.num_length_levels, size=n)
    category = rng.integers(0, c.num_categories, size=n)
    impulse = rng.standard_normal(n)
    click_u, noise, bounce_u = rng.random(n), rng.standard_normal(n), rng.random(n)

    click_prob = _sigmoid(_click_logit(c, pop, users, bait, quality, impulse))
    click = click_u < click_prob
    log1p_t = _dwell_mean(c, pop, users, bait, quality, length, category, impulse) + c.dwell_noise_std * noise
    seconds = np.clip(np.expm1(log1p_t), MIN_SECONDS, MAX_SECONDS)
    seconds = np.where(bounce_u < _bounce_prob(c, bait), MIN_SECONDS, seconds)
    columns = {
        "user_id": users.astype(np.int64),
        "bait_proxy": proxy,
        "title_tag": title_tag.astype(np.int64),
        "quality_bin": quality.astype(np.int64),
        "length_bin": length.astype(np.int64),
        "category": category.astype(np.int64),
        "click": click.astype(np.int64),
        "dwell_seconds": np.where(click, seconds, 0.0).astype(np.float32),
        "dwell_bin": np.where(click, bin_dwell_time(seconds), IGNORE_INDEX).astype(np.int64),
        "clickbait": bait,
        "true_click_prob": click_prob.astype(np.float32),
    }
    return dataset_from_columns(columns)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr(x)


def oracle_posterior(
    config: SpuriousOrcaConfig,
    frame: dict[str, np.ndarray] | datasets.Dataset,
    *,
    num_nodes: int = 64,
    chunk: int = 20_000,
) -> dict[str, np.ndarray]:
    """The exact Bayes posterior of the generator given the observed fields: `P(C = 1 | x)` and `P(bin | x, C = 1)`.

    Sums over the hidden clickbait `b` (prior from the proxy) and integrates the impulse `z` with `num_nodes`-point
    Gauss–Hermite quadrature; the bin probabilities are Gaussian CDF differences of log-dwell (the clip to [1, 400]
    s only moves mass inside the first and last bins), mixed with the bounce probability. This is the best any
    model of the observed fields can do on data from `config` (its `shortcut_strength` is the one of the data being
    scored: pass the test config for the test oracle, the training config for "the training posterior").

    Args:
        config ([`SpuriousOrcaConfig`]): the generator of the data being scored (same population seed).
        frame (`dict` or `datasets.Dataset`): columns `user_id`, `bait_proxy`, `quality_bin`, `length_bin`,
            `category` (any number of rows).
        num_nodes (`int`, defaults to 64): quadrature nodes.
        chunk (`int`, defaults to 20000): rows per vectorised block.

    Returns:
        `dict` with `click_probs` (`[N]`) and `dt_probs` (`[N, K]`, rows sum to 1).
    """
    c, pop = config, population(config)
    names = ("user_id", "bait_proxy", "quality_bin", "length_bin", "category")
    if isinstance(frame, datasets.Dataset):
        frame = frame.with_format("numpy", columns=list(names))[:]
    cols = {k: np.asarray(frame[k], dtype=np.int64) for k in names}
    nodes, weights = np.polynomial.hermite_e.hermegauss(num_nodes)
    weights = weights / weights.sum()  # E over N(0, 1)
    inner = np.log1p(np.asarray(ORCA_BIN_EDGES[1:-1], dtype=np.float64))  # bin k: inner[k-1] < log1p T <= inner[k]
    p_b1 = {
        1: c.bait_rate
        * c.proxy_sensitivity
        / (c.bait_rate * c.proxy_sensitivity + (1 - c.bait_rate) * c.proxy_false_positive),
        0: c.bait_rate
        * (1 - c.proxy_sensitivity)
        / (c.bait_rate * (1 - c.proxy_sensitivity) + (1 - c.bait_rate) * (1 - c.proxy_false_positive)),
    }
    n = len(cols["user_id"])
    click_out = np.empty(n)
    dt_out = np.empty((n, len(ORCA_BIN_EDGES) - 1))
    for start in range(0, n, chunk):
        sl = slice(start, start + chunk)
        u, p, q, l, cat = (cols[k][sl][:, None] for k in names)  # noqa: E741 (the generator's symbols)
        prior_b1 = np.where(p == 1, p_b1[1], p_b1[0])  # [n, 1]
        num = np.zeros((u.shape[0], dt_out.shape[1]))
        den = np.zeros((u.shape[0], 1))
        for b in (0, 1):
            prior = prior_b1 if b == 1 else 1.0 - prior_b1
            w = prior * weights[None, :] * _sigmoid(_click_logit(c, pop, u, b, q, nodes[None, :]))  # [n, J]
            mean = _dwell_mean(c, pop, u, b, q, l, cat, nodes[None, :])  # [n, J]
            cdf = _normal_cdf((inner[None, None, :] - mean[:, :, None]) / c.dwell_noise_std)  # [n, J, K-1]
            cdf = np.concatenate([np.zeros_like(cdf[..., :1]), cdf, np.ones_like(cdf[..., :1])], axis=-1)
            bins = np.diff(cdf, axis=-1)  # [n, J, K]
            bounce = _bounce_prob(c, b)
            bins = (1.0 - bounce) * bins
            bins[..., 0] += bounce
            num += np.einsum("nj,njk->nk", w, bins)
            den += w.sum(1, keepdims=True)
        click_out[sl] = den[:, 0]
        dt_out[sl] = num / den
    return {"click_probs": click_out, "dt_probs": dt_out}


__all__ = [
    "SPURIOUS_FIELD_NAMES",
    "SPURIOUS_EXPOSURE_FIELDS",
    "SPURIOUS_POST_CLICK_FIELDS",
    "SpuriousOrcaConfig",
    "generate_spurious",
    "oracle_posterior",
    "population",
    "shifted_test_config",
    "spurious_vocab_sizes",
]
