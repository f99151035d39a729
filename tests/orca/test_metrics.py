"""ORCA metrics against hand-computed values, closed forms and sklearn/scipy references."""

import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from sklearn.metrics import ndcg_score, roc_auc_score

from hf_ext.orca.configuration_orca import ORCA_BIN_SECONDS
from hf_ext.orca.metrics import (
    bin_histogram,
    ctr_dt_heatmap,
    ctr_metrics,
    dt_metrics,
    js_distance,
    ndcg_per_user,
    normalized_entropy,
)

K = len(ORCA_BIN_SECONDS)


def _one_hot_probs(bins, confidence=0.9):
    probs = np.full((len(bins), K), (1 - confidence) / (K - 1))
    probs[np.arange(len(bins)), bins] = confidence
    return probs


# ------------------------------------------------------------------------------------------------ CTR


def test_ctr_metrics_hand_computed():
    y = [0, 0, 1, 1]
    p = [0.1, 0.4, 0.35, 0.8]
    out = ctr_metrics(y, p)
    # Positive/negative pairs ranked right: (0.35 > 0.1), (0.8 > 0.1), (0.8 > 0.4); wrong: (0.35 < 0.4) -> 3/4.
    assert out["ctr_auc"] == pytest.approx(0.75)
    expected_logloss = -(math.log(0.9) + math.log(0.6) + math.log(0.35) + math.log(0.8)) / 4
    assert out["ctr_logloss"] == pytest.approx(expected_logloss)


def test_ctr_metrics_clips_and_single_class():
    # A confident mistake gives -log(1e-7), not infinity.
    assert ctr_metrics([1, 0], [0.0, 0.0])["ctr_logloss"] == pytest.approx(-math.log(1e-7) / 2, rel=1e-6)
    assert math.isnan(ctr_metrics([1, 1, 1], [0.2, 0.5, 0.9])["ctr_auc"])


@pytest.mark.parametrize(
    "y, p, name",
    [
        ([0, 1, 1], [0.1, 0.2], "click_prob"),
        ([0, 1], [0.1, 1.2], "click_prob"),
        ([0, 2], [0.1, 0.2], "click_true"),
        ([[0, 1]], [[0.1, 0.2]], "click_true"),
        ([0, 1], [0.1, np.nan], "click_prob"),
    ],
)
def test_ctr_metrics_bad_input(y, p, name):
    with pytest.raises(ValueError, match=name):
        ctr_metrics(y, p)


# ------------------------------------------------------------------------------------------------ collapse measures


def test_js_distance_closed_forms():
    assert js_distance([3, 1, 0, 2], [3, 1, 0, 2]) == 0.0
    assert js_distance([0.5, 0.5, 0, 0], [1, 1, 0, 0]) == 0.0  # counts and shares of the same histogram
    assert js_distance([1, 2, 0, 0], [0, 0, 5, 1]) == pytest.approx(1.0)
    # p = (1, 0), q = (1/2, 1/2): JSD = 1/2 KL(p||m) + 1/2 KL(q||m) with m = (3/4, 1/4).
    jsd = 0.5 * math.log2(4 / 3) + 0.5 * (0.5 * math.log2(2 / 3) + 0.5 * math.log2(2))
    assert js_distance([1, 0], [1, 1]) == pytest.approx(math.sqrt(jsd))
    rng = np.random.default_rng(0)
    p, q = rng.random(K), rng.random(K)
    assert js_distance(p, q) == pytest.approx(jensenshannon(p, q, base=2))


def test_js_distance_bad_input():
    with pytest.raises(ValueError, match="q"):
        js_distance([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="p"):
        js_distance([0, 0], [1, 2])


def test_normalized_entropy():
    assert normalized_entropy(np.ones(K)) == pytest.approx(1.0)
    assert normalized_entropy([0, 0, 7, 0]) == 0.0
    assert normalized_entropy([1, 1, 0, 0]) == pytest.approx(math.log(2) / math.log(4))


def test_bin_histogram():
    np.testing.assert_array_equal(bin_histogram([0, 1, 1, 7], normalize=False), [1, 2, 0, 0, 0, 0, 0, 1])
    np.testing.assert_allclose(bin_histogram([0, 1, 1, 7]), [0.25, 0.5, 0, 0, 0, 0, 0, 0.25])
    with pytest.raises(ValueError, match="bins"):
        bin_histogram([0, 8])


def test_ctr_dt_heatmap_buckets_and_overflow():
    p = [0.0, 0.049, 0.05, 0.12, 0.39, 0.40, 0.9, 0.12, 0.3]
    b = [0, 1, 1, 5, 7, 2, 2, -100, 3]
    heat = ctr_dt_heatmap(p, b)
    assert heat.shape == (9, K) and heat.dtype == np.int64
    expected = np.zeros((9, K), dtype=np.int64)
    expected[0, 0] = expected[0, 1] = 1  # [0, 0.05)
    expected[1, 1] = 1  # [0.05, 0.10)
    expected[2, 5] = 1  # [0.10, 0.15)
    expected[7, 7] = 1  # [0.35, 0.40)
    expected[6, 3] = 1  # [0.30, 0.35), although np.arange's edge is 0.30000000000000004
    expected[8, 2] = 2  # overflow row: 0.40 and 0.9
    np.testing.assert_array_equal(heat, expected)
    assert heat.sum() == 8  # the unclicked row is skipped


@pytest.mark.parametrize(
    "p, b, name",
    [
        ([0.1, 0.2], [1], "dwell_bin"),
        ([0.1], [8], "dwell_bin"),
        ([-0.1], [1], "click_prob"),
        ([0.1], [1.5], "dwell_bin"),
    ],
)
def test_ctr_dt_heatmap_bad_input(p, b, name):
    with pytest.raises(ValueError, match=name):
        ctr_dt_heatmap(p, b)


# ------------------------------------------------------------------------------------------------ NDCG


def test_ndcg_hand_computed():
    # User 7: true seconds (100, 10, 50), predicted seconds (58.1, 14, 95.1) -> ranked docs 3, 1, 2.
    # User 9: a single click scores 1.
    relevance = [100.0, 10.0, 50.0, 30.0]
    score = [58.1, 14.0, 95.1, 1.0]
    users = [7, 7, 7, 9]
    dcg = 50 + 100 / math.log2(3) + 10 / 2
    idcg = 100 + 50 / math.log2(3) + 10 / 2
    assert ndcg_per_user(relevance, score, users, k=3) == pytest.approx((dcg / idcg + 1) / 2)
    # k = 1: only the top document counts: 50 / 100.
    assert ndcg_per_user(relevance, score, users, k=1) == pytest.approx((0.5 + 1) / 2)


def test_ndcg_ties_are_averaged_and_order_free():
    # Two documents with the same predicted time share the average gain over the two top positions.
    expected = (20 * (1 + 1 / math.log2(3))) / (30 + 10 / math.log2(3))
    assert ndcg_per_user([10.0, 30.0], [14.0, 14.0], [1, 1], k=3) == pytest.approx(expected)
    assert ndcg_per_user([30.0, 10.0], [14.0, 14.0], [1, 1], k=3) == pytest.approx(expected)


def test_ndcg_matches_sklearn_per_user_mean():
    rng = np.random.default_rng(3)
    users = rng.integers(0, 40, size=300)
    relevance = rng.integers(1, 400, size=300).astype(float)
    score = np.asarray(ORCA_BIN_SECONDS)[rng.integers(0, K, size=300)]
    for k in (3, 5):
        reference = []
        for u in np.unique(users):
            m = users == u
            reference.append(1.0 if m.sum() == 1 else ndcg_score(relevance[m][None], score[m][None], k=k))
        assert ndcg_per_user(relevance, score, users, k) == pytest.approx(np.mean(reference))


# ------------------------------------------------------------------------------------------------ dt_metrics


def test_dt_metrics_hand_computed():
    y = np.array([0, 1, 2, 2, 5])
    pred = np.array([0, 1, 2, 5, 1])
    seconds = np.array([1.0, 20.0, 40.0, 30.0, 150.0])
    users = np.array([1, 1, 2, 2, 3])
    out = dt_metrics(y, _one_hot_probs(pred), dwell_seconds_true=seconds, user_ids=users)
    assert out["dt_accuracy"] == pytest.approx(3 / 5)
    assert out["dt_micro_f1"] == pytest.approx(3 / 5)
    # Per-class F1 over classes {0, 1, 2, 5}: 0 -> 1; 1 -> P 1/2, R 1 -> 2/3; 2 -> P 1, R 1/2 -> 2/3; 5 -> 0.
    assert out["dt_macro_f1"] == pytest.approx((1 + 2 / 3 + 2 / 3 + 0) / 4)
    # Predicted seconds: 1, 14, 35.1, 167.1, 14.
    errors = np.array([0.0, 6.0, 4.9, 137.1, 136.0])
    assert out["dt_mae_s"] == pytest.approx(errors.mean())
    assert out["dt_rmse_s"] == pytest.approx(np.sqrt(np.mean(errors**2)))
    # Moderate bins 2-5: predictions {2, 5} -> 2/5; truths {2, 2, 5} -> 3/5.
    assert out["moderate_share_pred"] == pytest.approx(2 / 5)
    assert out["moderate_share_true"] == pytest.approx(3 / 5)
    # Moderate-bin recall: the truths in 2-5 are rows 2, 3, 4, predicted 2, 5, 1 -> 2 of 3 stay moderate.
    assert out["moderate_recall"] == pytest.approx(2 / 3)
    hist_pred = np.bincount(pred, minlength=K)
    hist_true = np.bincount(y, minlength=K)
    assert out["js_distance"] == pytest.approx(jensenshannon(hist_pred, hist_true, base=2))
    # Predicted histogram (1, 2, 1, 0, 0, 1, 0, 0) / 5.
    shares = np.array([1, 2, 1, 1]) / 5
    assert out["pred_entropy_norm"] == pytest.approx(-np.sum(shares * np.log(shares)) / np.log(K))
    # NDCG: user 1 ranked right (1.0), user 2 ranked wrong (30 s predicted higher than 40 s), user 3 single (1.0).
    user2 = (30 + 40 / math.log2(3)) / (40 + 30 / math.log2(3))
    assert out["ndcg@3"] == pytest.approx((1 + user2 + 1) / 3)
    assert out["ndcg@5"] == pytest.approx((1 + user2 + 1) / 3)


def test_dt_metrics_collapse_measures_on_a_collapsed_model():
    # Every prediction in bin 1 or 5 while the truth is spread evenly: no moderate bins 2-4 predicted.
    y = np.repeat(np.arange(K), 10)
    pred = np.where(y < 4, 1, 5)
    out = dt_metrics(y, _one_hot_probs(pred), dwell_seconds_true=np.asarray(ORCA_BIN_SECONDS)[y])
    assert out["moderate_share_true"] == pytest.approx(0.5)
    assert out["moderate_share_pred"] == pytest.approx(0.5)  # all of it in bin 5
    assert out["moderate_recall"] == pytest.approx(0.5)  # true bins 2, 3 -> 1 (extreme); 4, 5 -> 5 (moderate)
    assert out["pred_entropy_norm"] == pytest.approx(math.log(2) / math.log(K))
    # JSD between uniform-over-8 and half/half on 2 of those bins.
    p, q = np.zeros(K), np.full(K, 1 / K)
    p[[1, 5]] = 0.5
    assert out["js_distance"] == pytest.approx(jensenshannon(p, q, base=2))
    assert math.isnan(out["ndcg@3"])  # no user ids given
    perfect = dt_metrics(y, _one_hot_probs(y), dwell_seconds_true=np.asarray(ORCA_BIN_SECONDS)[y])
    assert perfect["js_distance"] == 0.0 and perfect["pred_entropy_norm"] == pytest.approx(1.0)
    assert perfect["dt_mae_s"] == 0.0 and perfect["dt_macro_f1"] == pytest.approx(1.0)


def test_dt_macro_auc_matches_sklearn_when_all_classes_present():
    rng = np.random.default_rng(0)
    y = np.concatenate([np.arange(K), rng.integers(0, K, size=200)])
    logits = rng.normal(size=(y.size, K)) + 1.5 * np.eye(K)[y]
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    out = dt_metrics(y, probs, dwell_seconds_true=np.asarray(ORCA_BIN_SECONDS)[y])
    assert out["dt_macro_auc"] == pytest.approx(roc_auc_score(y, probs, multi_class="ovr", average="macro"))


def test_dt_macro_auc_skips_classes_absent_from_truth():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, size=60)  # classes 3..7 never occur
    probs = rng.dirichlet(np.ones(K), size=60)
    out = dt_metrics(y, probs, dwell_seconds_true=np.full(60, 10.0))
    expected = np.mean([roc_auc_score(y == c, probs[:, c]) for c in range(3)])
    assert out["dt_macro_auc"] == pytest.approx(expected)
    single = dt_metrics(np.zeros(5, dtype=int), probs[:5], dwell_seconds_true=np.ones(5))
    assert math.isnan(single["dt_macro_auc"])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(dt_probs=np.full((3, K - 1), 1 / (K - 1))), "dt_probs"),
        (dict(dt_probs=np.full((3,), 1 / K)), "dt_probs"),
        (dict(dt_probs=np.full((3, K), 1.0)), "dt_probs"),
        (dict(dt_probs=np.full((2, K), 1 / K)), "dt_probs"),
        (dict(dwell_seconds_true=[1.0, 2.0]), "dwell_seconds_true"),
        (dict(dwell_bin_true=[0, 1, 8]), "dwell_bin_true"),
        (dict(dwell_bin_true=[0, -100, 2]), "dwell_bin_true"),
        (dict(user_ids=[1, 2]), "user_ids"),
        (dict(moderate_bins=(2, 9)), "moderate_bins"),
        (dict(dwell_bin_true=[]), "dwell_bin_true"),
    ],
)
def test_dt_metrics_bad_input(kwargs, name):
    args = dict(dwell_bin_true=[0, 1, 2], dt_probs=np.full((3, K), 1 / K), dwell_seconds_true=[1.0, 14.0, 30.0])
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        dt_metrics(args.pop("dwell_bin_true"), args.pop("dt_probs"), **args)
