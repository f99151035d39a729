"""ORCA data: dwell-time binning, the synthetic generator, the Tenrec loader, the input contract and features."""

import datasets
import numpy as np
import pandas as pd
import pytest
import torch

from hf_ext.orca.causal_generator import (
    FIELD_NAMES,
    POST_CLICK_FIELDS,
    SyntheticOrcaConfig,
    field_vocab_sizes,
    generate_synthetic,
)
from hf_ext.orca.configuration_orca import ORCA_BIN_EDGES
from hf_ext.orca.data import bin_dwell_time, to_model_features, train_val_test_split, validate_orca_frame
from hf_ext.orca.tenrec import TENREC_FIELD_NAMES, TENREC_QK_ARTICLE_COLUMNS, load_tenrec_qk_article


def _arrays(ds):
    return ds.with_format("numpy")[:]


@pytest.fixture(scope="module")
def synth():
    """Default-size logs (200k impressions) at no shortcut and a strong one."""
    return {s: _arrays(generate_synthetic(SyntheticOrcaConfig(shortcut_strength=s))) for s in (0.0, 3.0)}


# ------------------------------------------------------------------------------------------------ binning


def test_bin_dwell_time_fixed_points():
    seconds = [0.0, np.nan, -3.0, 1.0, 1.9, 2.0, 14.0, 26.1, 26.2, 44.1, 72.2, 118.1, 216.2, 314.0, 314.5, 400.0, 9e9]
    expected = [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 4, 4, 6, 6, 7, 7, 7]
    got = bin_dwell_time(seconds)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)


def test_bin_dwell_time_matches_official_pd_cut_on_whole_seconds():
    # The official code: clip to [1, 400], then pd.cut (right-closed) with ORCA's edges.
    t = np.random.default_rng(1).integers(-5, 600, size=5000).astype(float)
    reference = pd.cut(np.clip(t, 1, 400), bins=list(ORCA_BIN_EDGES), labels=False).astype(np.int64)
    np.testing.assert_array_equal(bin_dwell_time(t), reference)


@pytest.mark.parametrize("edges", [(0.1, 5.0, 5.0, 500.0), (0.1, 50.0, 20.0, 500.0), (0.1,)])
def test_bin_dwell_time_rejects_bad_edges(edges):
    with pytest.raises(ValueError, match="bin_edges"):
        bin_dwell_time([10.0], bin_edges=edges)


def test_bin_dwell_time_rejects_edges_not_covering_clip_range():
    with pytest.raises(ValueError, match="bin_edges"):
        bin_dwell_time([10.0], bin_edges=(0.1, 50.0, 300.0))


# ------------------------------------------------------------------------------------------------ generator


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_users", 0),
        ("num_items", -1),
        ("num_impressions", 2.5),
        ("num_value_bins", 1),
        ("shortcut_strength", -0.5),
        ("shortcut_strength", float("nan")),
        ("dwell_noise_std", -1.0),
        ("clickbait_alpha", 0.0),
        ("seed", -1),
        ("base_click_logit", "low"),
    ],
)
def test_config_validation_names_field(field, value):
    with pytest.raises(ValueError, match=field):
        SyntheticOrcaConfig(**{field: value})


def test_generator_schema_and_label_consistency():
    config = SyntheticOrcaConfig(num_users=50, num_items=40, num_impressions=5000, shortcut_strength=2.0, seed=3)
    ds = generate_synthetic(config)
    assert len(ds) == 5000
    assert ds.features == datasets.Features(
        {
            **{name: datasets.Value("int64") for name in FIELD_NAMES},
            "click": datasets.Value("int64"),
            "dwell_seconds": datasets.Value("float32"),
            "dwell_bin": datasets.Value("int64"),
            "true_click_prob": datasets.Value("float32"),
        }
    )
    a = _arrays(ds)
    sizes = field_vocab_sizes(config)
    assert sizes == [50, 40, 10, 50, 10, 10, 20]
    for name, size in zip(FIELD_NAMES, sizes):
        assert a[name].min() >= 0 and a[name].max() < size, name
    clicked = a["click"] == 1
    assert set(np.unique(a["click"])) == {0, 1}
    assert np.all(a["dwell_bin"][~clicked] == -100) and np.all(a["dwell_seconds"][~clicked] == 0.0)
    assert np.all((a["dwell_seconds"][clicked] >= 1.0) & (a["dwell_seconds"][clicked] <= 400.0))
    np.testing.assert_array_equal(a["dwell_bin"][clicked], bin_dwell_time(a["dwell_seconds"][clicked]))
    # Item attributes are per item: every impression of an item carries the same bins/tag/category.
    for name in ("clickbait_bin", "title_tag", "quality_bin", "length_bin", "category"):
        per_item = pd.DataFrame({"item": a["item_id"], "v": a[name]}).groupby("item")["v"].nunique()
        assert per_item.max() == 1, name
    # Quantile binning over 40 items: each of the 10 bins holds 4 items.
    item_bins = pd.DataFrame({"item": a["item_id"], "b": a["clickbait_bin"]}).drop_duplicates("item")["b"]
    assert item_bins.value_counts().max() <= 5
    validate_orca_frame(ds, FIELD_NAMES, vocab_sizes=sizes)
    assert set(POST_CLICK_FIELDS) <= set(FIELD_NAMES)


def test_generator_is_deterministic_by_seed():
    small = dict(num_users=100, num_items=80, num_impressions=3000)
    a = _arrays(generate_synthetic(SyntheticOrcaConfig(seed=7, **small)))
    b = _arrays(generate_synthetic(SyntheticOrcaConfig(seed=7, **small)))
    c = _arrays(generate_synthetic(SyntheticOrcaConfig(seed=8, **small)))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert not np.array_equal(a["item_id"], c["item_id"])
    assert not np.array_equal(a["click"], c["click"])


def test_generator_default_size():
    # Its speed is measured by benchmarks/orca_features.py (tests time nothing).
    ds = generate_synthetic(SyntheticOrcaConfig(shortcut_strength=2.0, seed=5))
    assert len(ds) == 200_000


def test_generator_ctr_and_true_prob(synth):
    for s, a in synth.items():
        ctr = a["click"].mean()
        assert 0.05 <= ctr <= 0.15, (s, ctr)
        # Clicks are Bernoulli(true_click_prob): the two means agree within 4 standard errors.
        p = a["true_click_prob"].astype(np.float64)
        assert abs(ctr - p.mean()) < 4 * np.sqrt(np.sum(p * (1 - p))) / p.size, s
        assert np.all((p > 0) & (p < 1))


def test_shortcut_raises_clicks_and_shortens_dwell_only_when_on(synth):
    def corrs(a):
        clicked = a["click"] == 1
        to_click = np.corrcoef(a["clickbait_bin"], a["click"])[0, 1]
        to_dwell = np.corrcoef(a["clickbait_bin"][clicked], np.log(a["dwell_seconds"][clicked]))[0, 1]
        return to_click, to_dwell

    click0, dwell0 = corrs(synth[0.0])
    click3, dwell3 = corrs(synth[3.0])
    assert abs(click0) < 0.03 and abs(dwell0) < 0.1
    assert click3 > 0.2 and dwell3 < -0.4
    # Quality is the positive transfer at every strength: it raises both clicks and dwell.
    for a in synth.values():
        clicked = a["click"] == 1
        assert np.corrcoef(a["quality_bin"], a["click"])[0, 1] > 0.05
        assert np.corrcoef(a["quality_bin"][clicked], np.log(a["dwell_seconds"][clicked]))[0, 1] > 0.3


def test_binned_dwell_distribution_shape(synth):
    h0 = np.bincount(synth[0.0]["dwell_bin"][synth[0.0]["click"] == 1], minlength=8) / (synth[0.0]["click"] == 1).sum()
    h3 = np.bincount(synth[3.0]["dwell_bin"][synth[3.0]["click"] == 1], minlength=8) / (synth[3.0]["click"] == 1).sum()
    # No shortcut: spread over bins 0-5 with most of the mass in the moderate bins 2-5, every bin used.
    assert h0[:6].sum() > 0.8 and h0[2:6].sum() > 0.5 and h0.min() > 0.02
    # Strong shortcut: clicks pile into "opened and closed at once" and short reads, like the paper's ground truth.
    assert h3[:2].sum() > 0.5 and h3[0] > 2 * h0[0]
    assert synth[3.0]["dwell_seconds"][synth[3.0]["click"] == 1].mean() < (
        synth[0.0]["dwell_seconds"][synth[0.0]["click"] == 1].mean() * 0.75
    )


# ------------------------------------------------------------------------------------------------ contract


def _good_frame():
    return pd.DataFrame(
        {
            "user_id": np.array([0, 1, 2, 1], dtype=np.int64),
            "item_id": np.array([3, 0, 1, 2], dtype=np.int64),
            "click": np.array([1, 0, 1, 0], dtype=np.int64),
            "dwell_seconds": np.array([30.0, 0.0, 1.0, 0.0], dtype=np.float32),
            "dwell_bin": np.array([2, -100, 0, -100], dtype=np.int64),
        }
    )


def _with(frame, column, values):
    frame = frame.copy()
    frame[column] = values
    return frame


@pytest.mark.parametrize(
    "frame, name",
    [
        (_good_frame().drop(columns=["item_id"]), "item_id"),
        (_good_frame().drop(columns=["click"]), "click"),
        (_good_frame().drop(columns=["dwell_bin"]), "dwell_bin"),
        (_with(_good_frame(), "user_id", [0.0, 1.0, 2.0, 1.0]), "user_id"),
        (_with(_good_frame(), "item_id", ["a", "b", "c", "d"]), "item_id"),
        (_with(_good_frame(), "item_id", [True, False, True, False]), "item_id"),
        (_with(_good_frame(), "user_id", [0, -1, 2, 1]), "user_id"),
        (_with(_good_frame(), "click", [1, 0, 2, 0]), "click"),
        (_with(_good_frame(), "click", [1.0, 0.0, np.nan, 0.0]), "click"),
        (_with(_good_frame(), "dwell_bin", [8, -100, 0, -100]), "dwell_bin"),
        (_with(_good_frame(), "dwell_bin", [-100, -100, 0, -100]), "dwell_bin"),
        (_with(_good_frame(), "dwell_bin", [2, -1, 0, -100]), "dwell_bin"),
        (_with(_good_frame(), "dwell_bin", [2.0, -100.0, 0.0, -100.0]), "dwell_bin"),
        (_with(_good_frame(), "dwell_seconds", [np.nan, 0.0, 1.0, 0.0]), "dwell_seconds"),
        (_good_frame().iloc[:0], "no rows"),
    ],
)
def test_validate_orca_frame_rejects_bad_input(frame, name):
    with pytest.raises(ValueError, match=name):
        validate_orca_frame(frame, ["user_id", "item_id"])


def test_validate_orca_frame_accepts_good_input_and_checks_vocab():
    frame = _good_frame()
    validate_orca_frame(frame, ["user_id", "item_id"], vocab_sizes=[3, 4])
    validate_orca_frame(datasets.Dataset.from_pandas(frame), ["user_id", "item_id"], vocab_sizes=[3, 4])
    # Float 0/1 clicks are accepted; unclicked rows may carry a real bin (the official code bins every row).
    validate_orca_frame(_with(_with(frame, "click", [1.0, 0.0, 1.0, 0.0]), "dwell_bin", [2, 5, 0, 1]), ["user_id"])
    with pytest.raises(ValueError, match="item_id"):
        validate_orca_frame(frame, ["user_id", "item_id"], vocab_sizes=[3, 3])
    # Inference inputs without labels.
    validate_orca_frame(frame.drop(columns=["click", "dwell_bin"]), ["user_id"], require_labels=False)


# ------------------------------------------------------------------------------------------------ Tenrec


def _tenrec_rows():
    rows = [
        # user, item, click, gender, age, category_second, category_first, read_time
        ("u9", 101, 1, 1, 25, "c2a", "c1", 30),
        ("u1", 102, 0, 2, 45, "c2b", "c1", 0),
        ("u1", 101, 1, 1, np.nan, "c2a", "c1", np.nan),  # missing read time on a click -> 1 s, bin 0
        ("u5", 103, 1, np.nan, 5, "c2c", "c3", 26.7),  # truncated to 26 s -> bin 1 (26.7 s would be bin 2)
        ("u9", 104, 1, 2, 60, "c2b", "c1", 1000),  # clipped to 400 s -> bin 7
        ("u5", 102, np.nan, 1, 33, "c2a", "c3", 55),  # missing click -> 0
    ]
    frame = pd.DataFrame(0, index=range(len(rows)), columns=list(TENREC_QK_ARTICLE_COLUMNS))
    for name, values in zip(
        ["user_id", "item_id", "click", "gender", "age", "category_second", "category_first", "read_time"],
        zip(*rows),
    ):
        frame[name] = list(values)
    return frame


def test_tenrec_loader_reads_csv(tmp_path):
    path = tmp_path / "Tenrec_QK-article_sample.csv"
    _tenrec_rows().to_csv(path, index=False)
    dataset, field_names, vocab_sizes, post_click = load_tenrec_qk_article(path)
    assert field_names == list(TENREC_FIELD_NAMES)
    assert post_click == []
    a = _arrays(dataset)
    np.testing.assert_array_equal(a["click"], [1, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(a["dwell_bin"], [2, -100, 0, 1, 7, -100])
    np.testing.assert_allclose(a["dwell_seconds"], [30, 0, 1, 26, 400, 0])
    # Contiguous ids in sorted string order (LabelEncoder on strings, as the official code).
    np.testing.assert_array_equal(a["user_id"], [2, 0, 0, 1, 2, 1])
    np.testing.assert_array_equal(a["item_id"], [0, 1, 0, 2, 3, 1])
    np.testing.assert_array_equal(a["category_second"], [0, 1, 0, 2, 1, 0])
    np.testing.assert_array_equal(a["category_first"], [0, 0, 0, 1, 0, 1])
    # Missing gender ("nan") is a category of its own; gender 1.0/2.0 are read as floats because of the NaN.
    assert len(np.unique(a["gender"])) == 3 and a["gender"][3] not in (a["gender"][0], a["gender"][1])
    # Age: NaN -> mean (33.6 -> 33); five distinct ages keep five ids, in numeric order (5 is not floored to 8).
    np.testing.assert_array_equal(a["age"], [1, 3, 2, 0, 4, 2])
    for name, size in zip(field_names, vocab_sizes):
        assert a[name].max() + 1 == size and set(np.unique(a[name])) == set(range(size)), name
    assert dataset.features["dwell_seconds"] == datasets.Value("float32")
    assert all(dataset.features[name] == datasets.Value("int64") for name in [*field_names, "click", "dwell_bin"])


def test_tenrec_loader_keeps_small_age_codes_apart():
    """Issue 39: the official code floors age at 8, which merges Tenrec's small age codes into one id. Every
    distinct age below 8 must keep its own id (and ages above 15 distinct values get 15 equal-width bins)."""
    frame = pd.concat([_tenrec_rows()] * 2, ignore_index=True)
    frame["age"] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 3]
    ages = _arrays(load_tenrec_qk_article(frame).dataset)["age"]
    np.testing.assert_array_equal(ages, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 3])
    many = pd.concat([_tenrec_rows()] * 5, ignore_index=True)
    many["age"] = list(range(1, 31))  # 30 distinct ages -> the official 15 equal-width bins, no floor
    binned = _arrays(load_tenrec_qk_article(many).dataset)["age"]
    np.testing.assert_array_equal(binned, np.arange(30) // 2)


def test_tenrec_loader_headerless_label_ctr_dataframe_and_max_rows(tmp_path):
    reference = _arrays(load_tenrec_qk_article(_tenrec_rows()).dataset)
    path = tmp_path / "QK-article.csv"
    _tenrec_rows().to_csv(path, index=False, header=False)
    headerless = _arrays(load_tenrec_qk_article(path).dataset)
    renamed = _arrays(load_tenrec_qk_article(_tenrec_rows().rename(columns={"click": "label_ctr"})).dataset)
    for name in reference:
        np.testing.assert_array_equal(headerless[name], reference[name])
        np.testing.assert_array_equal(renamed[name], reference[name])
    assert len(load_tenrec_qk_article(path, max_rows=4).dataset) == 4


@pytest.mark.parametrize(
    "column, values, name",
    [
        ("read_time", None, "read_time"),
        ("category_first", None, "category_first"),
        ("read_time", ["x", 1, 2, 3, 4, 5], "read_time"),
        ("click", [1, 0, 3, 1, 1, 0], "click"),
        ("age", [20, "old", 30, 40, 50, 60], "age"),
    ],
)
def test_tenrec_loader_bad_input(column, values, name):
    frame = _tenrec_rows()
    if values is None:
        frame = frame.drop(columns=[column])
    else:
        frame[column] = values
    with pytest.raises(ValueError, match=name):
        load_tenrec_qk_article(frame)


# ------------------------------------------------------------------------------------------------ features, split


def test_to_model_features_columns_and_torch_format():
    config = SyntheticOrcaConfig(num_users=30, num_items=20, num_impressions=2000, seed=2)
    ds = generate_synthetic(config)
    features = to_model_features(ds, FIELD_NAMES, field_vocab_sizes(config))
    assert set(features.column_names) == {
        "input_ids",
        "click_labels",
        "dwell_labels",
        "user_ids",
        "dwell_seconds",
        "true_click_prob",
    }
    a, f = _arrays(ds), features.with_format("numpy")[:]
    np.testing.assert_array_equal(f["input_ids"], np.stack([a[name] for name in FIELD_NAMES], axis=1))
    np.testing.assert_array_equal(f["click_labels"], a["click"].astype(np.float32))
    np.testing.assert_array_equal(f["dwell_labels"], a["dwell_bin"])
    np.testing.assert_array_equal(f["user_ids"], a["user_id"])
    t = features.with_format("torch")[:8]
    assert t["input_ids"].shape == (8, len(FIELD_NAMES)) and t["input_ids"].dtype == torch.int64
    assert t["click_labels"].dtype == torch.float32 and t["dwell_labels"].dtype == torch.int64


def test_to_model_features_default_size_checks_vocab():
    # Its speed is measured by benchmarks/orca_features.py (tests time nothing).
    ds = generate_synthetic(SyntheticOrcaConfig(shortcut_strength=1.0, seed=4))
    features = to_model_features(ds, FIELD_NAMES, field_vocab_sizes(SyntheticOrcaConfig()))
    assert len(features) == 200_000
    sizes = field_vocab_sizes(SyntheticOrcaConfig())
    sizes[FIELD_NAMES.index("category")] = 5
    with pytest.raises(ValueError, match="category"):
        to_model_features(ds, FIELD_NAMES, sizes)


def test_to_model_features_without_labels():
    frame = _good_frame().drop(columns=["click", "dwell_bin", "dwell_seconds"])
    features = to_model_features(datasets.Dataset.from_pandas(frame), ["item_id", "user_id"])
    assert features.column_names == ["input_ids", "user_ids"]
    assert features["input_ids"][:] == [[3, 0], [0, 1], [1, 2], [2, 1]]


def test_train_val_test_split():
    ds = datasets.Dataset.from_dict({"row": np.arange(1001)})
    split = train_val_test_split(ds, seed=2025)
    assert {k: len(v) for k, v in split.items()} == {"train": 800, "validation": 100, "test": 101}
    parts = [np.asarray(split[k]["row"][:]) for k in ("train", "validation", "test")]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(1001))
    again = train_val_test_split(ds, seed=2025)
    np.testing.assert_array_equal(again["test"]["row"][:], parts[2])
    assert not np.array_equal(train_val_test_split(ds, seed=1)["test"]["row"][:], parts[2])
    # Random, not a head/tail cut.
    assert not np.array_equal(np.sort(parts[0]), np.arange(800))


@pytest.mark.parametrize("fractions", [(0.8, 0.1), (0.8, 0.3, 0.1), (1.0, 0.0, 0.0), (0.8, -0.1, 0.3)])
def test_train_val_test_split_rejects_bad_fractions(fractions):
    with pytest.raises(ValueError, match="fractions"):
        train_val_test_split(datasets.Dataset.from_dict({"row": np.arange(100)}), seed=0, fractions=fractions)


def test_numpy_columns_reads_whole_columns_without_iterating_rows(monkeypatch):
    """`numpy_columns` (what `TensorRows` and the reproduction's `predict` read) gives the same arrays and dtypes as
    converting `dataset[column]` row by row, honours a `filter`'s indices mapping, and never iterates the lazy
    `Column` (that row-by-row path cost minutes of a quick reproduction)."""
    from hf_ext.orca.data import numpy_columns
    from hf_ext.orca.trainer import EVAL_COLUMNS, TensorRows

    config = SyntheticOrcaConfig(num_users=30, num_items=20, num_impressions=2000, seed=2)
    features = to_model_features(generate_synthetic(config), FIELD_NAMES, field_vocab_sizes(config))
    clicked = features.filter(lambda c: [x > 0.5 for x in c], input_columns="click_labels", batched=True)
    rowwise = {
        name: {c: np.asarray(ds.with_format("numpy")[c]) for c in EVAL_COLUMNS}
        for name, ds in (("all", features), ("clicked", clicked))
    }
    monkeypatch.setattr(datasets.arrow_dataset.Column, "__iter__", lambda self: pytest.fail("iterated a Column"))
    for name, ds in (("all", features), ("clicked", clicked)):
        cols, rows = numpy_columns(ds, EVAL_COLUMNS), TensorRows(ds, EVAL_COLUMNS)
        for c in EVAL_COLUMNS:
            assert cols[c].dtype == rowwise[name][c].dtype, (name, c)
            np.testing.assert_array_equal(cols[c], rowwise[name][c])
            assert torch.equal(rows.columns[c], torch.as_tensor(rowwise[name][c])), (name, c)
    assert numpy_columns(clicked, ["input_ids"])["input_ids"].shape == (len(clicked), len(FIELD_NAMES))
    assert (numpy_columns(clicked, ["click_labels"])["click_labels"] == 1).all()
