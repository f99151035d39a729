"""ML-kNN on a hand-computed example, per-label subsets, and BR-kNN."""

import numpy as np
import pytest

from hf_ext.gpmfs.mlknn import BRkNN, MLkNN

X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
y = np.array([[1], [1], [1], [0], [0], [1]])


def test_hand_computed_mlknn():
    # k=2 leave-one-out neighbour counts: x0..x2 -> 2, x3, x4 -> 1 (neighbours 10/11/12 hold one positive), x5 -> 0.
    clf = MLkNN(k=2, s=1.0).fit(X, y)
    assert clf.prior_[0] == pytest.approx((1 + 4) / (2 + 6))
    # positives have counts {2, 2, 2, 0}: c1 = [1, 0, 3]; negatives {1, 1}: c0 = [0, 2, 0]
    np.testing.assert_allclose(clf.like1_[:, 0], np.array([2, 1, 4]) / 7)
    np.testing.assert_allclose(clf.like0_[:, 0], np.array([1, 3, 1]) / 5)
    proba = clf.predict_proba(np.array([[0.5], [11.2]]))[:, 0]
    p1, p0 = 5 / 8 * 4 / 7, 3 / 8 * 1 / 5  # x=0.5: both neighbours positive (C=2)
    q1, q0 = 5 / 8 * 1 / 7, 3 / 8 * 3 / 5  # x=11.2: neighbours 11 (neg) and 12 (pos), C=1
    np.testing.assert_allclose(proba, [p1 / (p1 + p0), q1 / (q1 + q0)])
    np.testing.assert_array_equal(clf.predict(np.array([[0.5], [11.2]]))[:, 0], [1, 0])


def test_per_label_subsets_equal_separate_fits(rng):
    Xr = rng.standard_normal((80, 6))
    Yr = (rng.random((80, 2)) < 0.5).astype(int)
    subsets = [np.array([0, 1]), np.array([2, 3, 4])]
    joint = MLkNN(k=5).fit(Xr, Yr, feature_subsets=subsets).predict_proba(Xr[:10])
    for j, idx in enumerate(subsets):
        alone = MLkNN(k=5).fit(Xr[:, idx], Yr[:, [j]]).predict_proba(Xr[:10][:, idx])[:, 0]
        np.testing.assert_allclose(joint[:, j], alone)


def test_brknn_scores_are_neighbour_fractions():
    clf = BRkNN(k=2).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(np.array([[0.5], [11.2]]))[:, 0], [1.0, 0.5])


def test_bad_inputs():
    with pytest.raises(ValueError, match="k"):
        MLkNN(k=0)
    with pytest.raises(ValueError, match="feature_subsets"):
        MLkNN().fit(X, y, feature_subsets=[np.array([], dtype=int)])
    with pytest.raises(ValueError, match="features"):
        MLkNN(k=2).fit(X, y).predict_proba(np.zeros((1, 3)))
