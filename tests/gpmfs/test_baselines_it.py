"""The information-theoretic baselines (LRFS, SCLS) on hand cases, and their estimators against references."""

import numpy as np
import pytest
from sklearn.metrics import mutual_info_score

from hf_ext.gpmfs.baselines import (
    conditional_mutual_info,
    conditional_mutual_info_all,
    discretize,
    entropy,
    lrfs_order,
    mutual_info,
    scls_order,
)


def test_mutual_information_hand_case():
    # a = b on a fair coin: I = H = ln 2; independent halves: I = 0
    a = np.array([0, 0, 1, 1])
    assert mutual_info(a, a) == pytest.approx(np.log(2)) and entropy(a) == pytest.approx(np.log(2))
    assert mutual_info(a, np.array([0, 1, 0, 1])) == pytest.approx(0.0)
    rng = np.random.default_rng(0)
    u, v = rng.integers(0, 4, 300), rng.integers(0, 3, 300)
    assert mutual_info(u, (u + v) % 3) == pytest.approx(mutual_info_score(u, (u + v) % 3))


def test_conditional_mutual_information_hand_case():
    # b = a XOR c with a, c fair independent bits: I(a; b) = 0 but I(a; b | c) = ln 2
    a = np.array([0, 0, 1, 1, 0, 0, 1, 1])
    c = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    b = a ^ c
    assert mutual_info(a, b) == pytest.approx(0.0)
    assert conditional_mutual_info(a, b, c) == pytest.approx(np.log(2))
    D = np.column_stack([a, c, np.zeros(8, dtype=int)])
    np.testing.assert_allclose(conditional_mutual_info_all(D, b, c), [np.log(2), 0.0, 0.0], atol=1e-12)


def test_discretize_bins():
    np.testing.assert_array_equal(discretize(np.array([[0.0], [0.5], [1.0], [0.19]]), 5)[:, 0], [0, 2, 4, 0])


@pytest.fixture
def redundant_case():
    """Feature 1 copies label 0, feature 2 duplicates feature 1, feature 3 carries label 1, feature 0 is noise."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (400, 2))
    A = y[:, 0] + 0.01 * rng.random(400)
    X = np.column_stack([rng.random(400), A, A.copy(), y[:, 1] + 0.5 * rng.random(400)])
    return X, y


def test_scls_skips_the_redundant_copy(redundant_case):
    X, y = redundant_case
    order = scls_order(X, y, 3)
    assert set(order[:2]) == {1, 3}  # the two informative features first
    assert order[2] == 0  # the copy of a chosen feature has I(f; s) / H(f) = 1, so its score is 0


def test_lrfs_scores_follow_the_formula(redundant_case):
    X, y = redundant_case
    D = discretize(X)
    rel = [
        conditional_mutual_info(D[:, f], y[:, 1], y[:, 0]) + conditional_mutual_info(D[:, f], y[:, 0], y[:, 1])
        for f in range(4)
    ]
    order = lrfs_order(X, y, 4)
    assert order[0] == int(np.argmax(rel))
    # second pick: argmax rel(f) - I(f; first) over the rest (mean redundancy over one chosen feature)
    J = [rel[f] - mutual_info(D[:, f], D[:, order[0]]) if f != order[0] else -np.inf for f in range(4)]
    assert order[1] == int(np.argmax(J))
    # third pick: the redundancy is the MEAN over the two chosen features
    J3 = [
        rel[f] - (mutual_info(D[:, f], D[:, order[0]]) + mutual_info(D[:, f], D[:, order[1]])) / 2
        if f not in order[:2]
        else -np.inf
        for f in range(4)
    ]
    assert order[2] == int(np.argmax(J3))
    assert sorted(order.tolist()) == [0, 1, 2, 3]


def test_lrfs_and_scls_criteria_by_hand():
    """The two criteria on numbers: relevance [1.0, 0.5], summed redundancy [0.8, 0.0] with two features chosen."""
    from hf_ext.gpmfs.baselines import lrfs_criterion, scls_criterion

    rel, red, H = np.array([1.0, 0.5]), np.array([0.8, 0.0]), np.array([1.6, 1.0])
    np.testing.assert_allclose(lrfs_criterion(rel, red, 2, H), [1.0 - 0.4, 0.5])  # mean redundancy: f0 wins
    np.testing.assert_allclose(scls_criterion(rel, red, 2, H), [1.0 * (1 - 0.5), 0.5])
