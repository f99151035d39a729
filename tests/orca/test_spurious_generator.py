"""The spurious-shortcut generator: its exact posterior against Monte-Carlo, the train/test shift, and that the
masked post-click fields carry the content information."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.orca.spurious_generator import (
    SPURIOUS_FIELD_NAMES,
    SPURIOUS_POST_CLICK_FIELDS,
    SpuriousOrcaConfig,
    generate_spurious,
    oracle_posterior,
    population,
    shifted_test_config,
    spurious_vocab_sizes,
)

# Few observable cells, so that every cell has hundreds of clicks.
SMALL = dict(
    num_users=2, num_patience_groups=2, num_quality_levels=2, num_length_levels=2, num_categories=2, num_title_tags=2
)


def _frame(config):
    return dict(generate_spurious(config).with_format("numpy")[:])


def _cell_check(config_data, config_oracle, n_sigma=4.5):
    """Largest standardized gap between per-cell empirical click rates / clicked bin shares and the oracle."""
    d = _frame(config_data)
    post = oracle_posterior(config_oracle, d)
    keys = np.stack([d[k] for k in ("user_id", "bait_proxy", "quality_bin", "length_bin", "category")], 1)
    cells, inverse = np.unique(keys, axis=0, return_inverse=True)
    worst = 0.0
    for j in range(len(cells)):
        rows = inverse.ravel() == j
        p = post["click_probs"][rows][0]
        assert np.allclose(post["click_probs"][rows], p)  # the posterior depends on the observed cell only
        n = rows.sum()
        worst = max(worst, abs(d["click"][rows].mean() - p) / np.sqrt(p * (1 - p) / n))
        clicked = rows & (d["click"] == 1)
        m = clicked.sum()
        if m < 200:
            continue
        q = post["dt_probs"][clicked][0]
        emp = np.bincount(d["dwell_bin"][clicked], minlength=8) / m
        se = np.sqrt(np.clip(q * (1 - q), 1e-4, None) / m)
        worst = max(worst, float(np.max(np.abs(emp - q) / se)))
    return worst


@pytest.mark.parametrize("strength", [0.0, 3.0])
def test_oracle_matches_monte_carlo(strength):
    config = SpuriousOrcaConfig(**SMALL, num_impressions=100_000, shortcut_strength=strength, seed=1)
    assert _cell_check(config, config) < 4.5


def test_monte_carlo_check_detects_a_wrong_posterior():
    data = SpuriousOrcaConfig(**SMALL, num_impressions=100_000, shortcut_strength=3.0, seed=1)
    wrong = shifted_test_config(data, data.num_impressions, data.seed, test_strength=2.0)
    assert _cell_check(data, wrong) > 6.0


def test_oracle_quadrature_is_converged_and_normalised():
    config = SpuriousOrcaConfig(num_impressions=2000, shortcut_strength=2.0)
    d = _frame(config)
    a, b = oracle_posterior(config, d, num_nodes=64), oracle_posterior(config, d, num_nodes=160)
    np.testing.assert_allclose(a["dt_probs"], b["dt_probs"], atol=1e-9)
    np.testing.assert_allclose(a["click_probs"], b["click_probs"], atol=1e-9)
    np.testing.assert_allclose(a["dt_probs"].sum(1), 1.0, atol=1e-12)


def test_shortcut_is_present_in_training_and_absent_after_the_shift():
    train = SpuriousOrcaConfig(num_impressions=60_000, shortcut_strength=3.0, seed=2)
    test = shifted_test_config(train, 60_000, seed=3)  # s = 0
    assert test.shortcut_strength == 0.0 and test.population_seed == train.population_seed

    def proxy_gap(config):
        d = _frame(config)
        clicked = d["click"] == 1
        t = np.log1p(d["dwell_seconds"][clicked])
        proxy = d["bait_proxy"][clicked]
        gap = t[proxy == 1].mean() - t[proxy == 0].mean()
        se = np.sqrt(t[proxy == 1].var() / (proxy == 1).sum() + t[proxy == 0].var() / (proxy == 0).sum())
        ctr_gap = d["click"][d["bait_proxy"] == 1].mean() - d["click"][d["bait_proxy"] == 0].mean()
        return gap, se, ctr_gap

    gap_train, se_train, ctr_train = proxy_gap(train)
    gap_test, se_test, ctr_test = proxy_gap(test)
    assert gap_train < -10 * se_train  # clickbait-flagged clicks read much shorter in training
    assert abs(gap_test) < 4 * se_test  # ... and not at all after the shift
    assert ctr_train > 0.05 and ctr_test > 0.05  # while the proxy keeps raising clicks in both
    # A perfect learner of the training distribution pays on the shifted test: posterior CE gap > 0.2 nats.
    d = _frame(test)
    clicked = d["click"] == 1
    y = d["dwell_bin"][clicked]

    def ce(config):
        p = oracle_posterior(config, d)["dt_probs"][clicked]
        return -np.mean(np.log(p[np.arange(y.size), y]))

    assert ce(train) - ce(test) > 0.2


def test_masked_fields_carry_the_content_information():
    assert "item_id" not in SPURIOUS_FIELD_NAMES  # items are per-impression: nothing identifies them but content
    config = SpuriousOrcaConfig(num_impressions=5_000, shortcut_strength=0.0, seed=4)
    d = _frame(config)
    clicked = d["click"] == 1
    y = d["dwell_bin"][clicked]
    full = oracle_posterior(config, d)["dt_probs"][clicked]
    # The posterior with the post-click fields marginalised out (what is left after masking), by averaging the
    # oracle over every value of those fields (uniform and independent in the generator).
    sizes = dict(zip(SPURIOUS_FIELD_NAMES, spurious_vocab_sizes(config)))
    exposure = {k: d[k][clicked] for k in ("user_id", "bait_proxy")}
    masked = np.zeros_like(full)
    weights = np.zeros(clicked.sum())
    grid = np.stack(np.meshgrid(*[np.arange(sizes[f]) for f in SPURIOUS_POST_CLICK_FIELDS], indexing="ij"), -1)
    for values in grid.reshape(-1, len(SPURIOUS_POST_CLICK_FIELDS)):
        frame = dict(exposure, **{f: np.full(clicked.sum(), v) for f, v in zip(SPURIOUS_POST_CLICK_FIELDS, values)})
        post = oracle_posterior(config, frame)
        masked += post["click_probs"][:, None] * post["dt_probs"]
        weights += post["click_probs"]
    masked /= weights[:, None]
    rows = np.arange(y.size)
    ce_full = -np.mean(np.log(full[rows, y]))
    ce_masked = -np.mean(np.log(masked[rows, y]))
    assert ce_masked - ce_full > 0.15  # masking removes real information about dwell time


def test_generator_is_deterministic_and_shares_its_population():
    a = SpuriousOrcaConfig(num_impressions=500, seed=3)
    b = shifted_test_config(a, 500, seed=9, test_strength=1.0)
    assert _frame(a)["dwell_seconds"].tolist() == _frame(a)["dwell_seconds"].tolist()
    assert not np.array_equal(_frame(a)["user_id"], _frame(b)["user_id"])
    np.testing.assert_array_equal(population(a).user_group, population(b).user_group)
    d = _frame(a)
    clicked = d["click"] == 1
    assert np.all(d["dwell_bin"][~clicked] == -100) and np.all(d["dwell_bin"][clicked] >= 0)
    for name, size in zip(SPURIOUS_FIELD_NAMES, spurious_vocab_sizes(a)):
        assert d[name].min() >= 0 and d[name].max() < size


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(num_users=0), "num_users"),
        (dict(bait_rate=1.0), "bait_rate"),
        (dict(shortcut_strength=-1.0), "shortcut"),
        (dict(dwell_noise_std=0.0), "dwell_noise_std"),
        (dict(num_quality_levels=1), "num_quality_levels"),
        (dict(click_bait_coef=float("nan")), "click_bait_coef"),
        (dict(seed=-1), "seed"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SpuriousOrcaConfig(**kwargs)
