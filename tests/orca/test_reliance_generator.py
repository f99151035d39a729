"""The CTR-reliance generator (ORCA's premise built in): its exact oracle against Monte-Carlo per (user, item) cell,
that the click does not reveal the depth that sets moderate dwell, the bait shortcut scaling with `s`, and bad
configs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.orca.families import get_family
from hf_ext.orca.reliance_generator import (
    RELIANCE_FIELD_NAMES,
    RELIANCE_POST_CLICK_FIELDS,
    RelianceOrcaConfig,
    generate_reliance,
    reliance_oracle,
    reliance_population,
    reliance_test_config,
    reliance_vocab_sizes,
)

# Two users and four items: every (user, item) cell gets thousands of impressions.
SMALL = dict(num_users=2, num_items=4, num_patience_groups=2, num_categories=2)


def _frame(config):
    return dict(generate_reliance(config).with_format("numpy")[:])


def _worst_gap(data_cfg, oracle_cfg) -> float:
    """Largest standardised gap between per-cell empirical click rates / clicked bin shares and the oracle."""
    d = _frame(data_cfg)
    post = reliance_oracle(oracle_cfg, d)
    cell = d["user_id"] * 1000 + d["item_id"]
    worst = 0.0
    for c in np.unique(cell):
        rows = cell == c
        p = post["click_probs"][rows][0]
        assert np.allclose(post["click_probs"][rows], p)
        worst = max(worst, abs(d["click"][rows].mean() - p) / np.sqrt(p * (1 - p) / rows.sum()))
        clicked = rows & (d["click"] == 1)
        m = clicked.sum()
        if m < 200:
            continue
        q = post["dt_probs"][clicked][0]
        emp = np.bincount(d["dwell_bin"][clicked], minlength=8) / m
        worst = max(worst, float(np.max(np.abs(emp - q) / np.sqrt(np.clip(q * (1 - q), 1e-4, None) / m))))
    return worst


@pytest.mark.parametrize("strength", [0.0, 3.0])
def test_oracle_matches_monte_carlo(strength):
    config = RelianceOrcaConfig(**SMALL, num_impressions=80_000, shortcut_strength=strength, seed=1)
    assert _worst_gap(config, config) < 4.5


def test_monte_carlo_check_detects_a_wrong_oracle():
    """The check above has power: the s = 0 oracle scored on s = 3 data fails it."""
    data = RelianceOrcaConfig(**SMALL, num_impressions=80_000, shortcut_strength=3.0, seed=1)
    assert _worst_gap(data, reliance_test_config(data, 80_000, 1, test_strength=0.0)) > 10


def test_oracle_rows_are_distributions():
    config = RelianceOrcaConfig(num_impressions=3_000, shortcut_strength=2.0)
    post = reliance_oracle(config, _frame(config))
    np.testing.assert_allclose(post["dt_probs"].sum(1), 1.0, atol=1e-12)
    assert (post["dt_probs"] >= 0).all() and ((post["click_probs"] > 0) & (post["click_probs"] < 1)).all()


def test_click_does_not_reveal_depth_but_depth_sets_moderate_dwell():
    """The premise's mechanism: an item's depth moves dwell time over the moderate bins and leaves the click
    untouched, while bait moves the click (and, with s > 0, dwell)."""
    config = RelianceOrcaConfig(num_items=400, num_impressions=2_000, shortcut_strength=0.0)
    pop = reliance_population(config)
    users, items = np.zeros(400, dtype=np.int64), np.arange(400)
    post = reliance_oracle(config, {"user_id": users, "item_id": items})
    same = (pop.bait == 0) & (pop.category == pop.category[0])  # same click cues, any depth
    assert np.ptp(post["click_probs"][same]) < 1e-12 and len(set(pop.depth[same])) == config.num_depth_levels
    mean_bin = post["dt_probs"] @ np.arange(8)
    deep, shallow = same & (pop.depth == 3), same & (pop.depth == 0)
    assert mean_bin[deep].mean() - mean_bin[shallow].mean() > 2.0  # two bins and more apart
    moderate = post["dt_probs"][:, 2:6].sum(1)
    assert moderate[same].mean() > 0.5
    bait = (pop.bait == 1) & (pop.category == pop.category[0])
    assert post["click_probs"][bait].min() > post["click_probs"][same].max()


def test_shortcut_strength_moves_bait_dwell_only():
    base = RelianceOrcaConfig(num_items=200, shortcut_strength=0.0)
    pop = reliance_population(base)
    cols = {"user_id": np.zeros(200, dtype=np.int64), "item_id": np.arange(200)}
    p0 = reliance_oracle(base, cols)
    p3 = reliance_oracle(reliance_test_config(base, 1_000, 0, test_strength=3.0), cols)
    np.testing.assert_allclose(p0["click_probs"], p3["click_probs"])  # s never moves the click
    bait = pop.bait == 1
    assert (p3["dt_probs"][bait, 0] - p0["dt_probs"][bait, 0]).min() > 0.2  # bait bounces at s = 3
    assert (p3["dt_probs"][~bait, 0] - p0["dt_probs"][~bait, 0]).max() < 0.05


def test_frame_schema_and_determinism():
    config = RelianceOrcaConfig(num_impressions=2_000, seed=3)
    a, b = _frame(config), _frame(config)
    for name, size in zip(RELIANCE_FIELD_NAMES, reliance_vocab_sizes(config)):
        np.testing.assert_array_equal(a[name], b[name])
        assert a[name].min() >= 0 and a[name].max() < size
    clicked = a["click"] == 1
    assert (a["dwell_bin"][~clicked] == -100).all() and (a["dwell_bin"][clicked] >= 0).all()
    assert set(RELIANCE_POST_CLICK_FIELDS) <= set(RELIANCE_FIELD_NAMES)
    other = _frame(RelianceOrcaConfig(num_impressions=2_000, seed=4))
    assert not np.array_equal(a["item_id"], other["item_id"])


def test_family_interface():
    fam = get_family("reliance")
    cfg = fam.make_config(50, 20, 1_000, 2.0, 7)
    assert (cfg.num_users, cfg.num_items, cfg.shortcut_strength, cfg.seed) == (50, 20, 2.0, 7)
    assert fam.verdict_test == "iid" and get_family("spurious").verdict_test == "shifted"
    with pytest.raises(ValueError, match="--family"):
        get_family("clickbait")


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(num_items=0), "num_items"),
        (dict(bait_rate=1.0), "bait_rate"),
        (dict(length_accuracy=1.5), "length_accuracy"),
        (dict(dwell_noise_std=0.0), "dwell_noise_std"),
        (dict(shortcut_strength=-1.0), "shortcut_strength"),
        (dict(num_depth_levels=1), "num_depth_levels"),
        (dict(depth_span=float("nan")), "depth_span"),
    ],
)
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        RelianceOrcaConfig(**kwargs)
