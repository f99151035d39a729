"""Metrics against hand computations (and scikit-learn where the conventions agree)."""

import numpy as np
import pytest
from sklearn.metrics import coverage_error, f1_score, label_ranking_average_precision_score, label_ranking_loss

from hf_ext.gpmfs import metrics as M

Y = np.array([[1, 0, 1], [0, 1, 0]])
S = np.array([[0.9, 0.5, 0.3], [0.6, 0.4, 0.2]])
P = np.array([[1, 0, 0], [1, 1, 0]])


def test_hand_computed_example():
    assert M.hamming_loss(Y, P) == pytest.approx(2 / 6)
    # row 0: (0.9>0.5 ok, 0.3<0.5 wrong); row 1: (0.4<0.6 wrong, 0.4>0.2 ok)
    assert M.ranking_loss(Y, S) == pytest.approx(0.5)
    assert M.one_error(Y, S) == pytest.approx(0.5)  # row 1's top label is irrelevant
    assert M.coverage(Y, S) == pytest.approx((2 + 1) / 2)  # max relevant rank - 1: 3-1 and 2-1
    assert M.average_precision(Y, S) == pytest.approx(((1 + 2 / 3) / 2 + 1 / 2) / 2)
    assert M.macro_f1(Y, P) == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert M.micro_f1(Y, P) == pytest.approx(4 / 6)  # tp=2, fp=1, fn=1
    assert set(M.evaluate_all(Y, P, S)) == set(M.METRICS)


def test_ties_count_against_the_ranking():
    y, s = np.array([[1, 0]]), np.array([[0.5, 0.5]])
    assert M.ranking_loss(y, s) == 1.0
    assert M.coverage(y, s) == 1.0
    assert M.average_precision(y, s) == 0.5


def test_agrees_with_sklearn_where_conventions_match(rng):
    Yr = (rng.random((60, 6)) < 0.4).astype(int)
    Yr[Yr.sum(axis=1) == 0, 0] = 1
    Yr[Yr.sum(axis=1) == 6, 0] = 0
    Sr = rng.random((60, 6))  # continuous: no ties
    Pr = (Sr > 0.5).astype(int)
    assert M.coverage(Yr, Sr) == pytest.approx(coverage_error(Yr, Sr) - 1)
    assert M.average_precision(Yr, Sr) == pytest.approx(label_ranking_average_precision_score(Yr, Sr))
    assert M.ranking_loss(Yr, Sr) == pytest.approx(label_ranking_loss(Yr, Sr))
    assert M.macro_f1(Yr, Pr) == pytest.approx(f1_score(Yr, Pr, average="macro", zero_division=0))
    assert M.micro_f1(Yr, Pr) == pytest.approx(f1_score(Yr, Pr, average="micro", zero_division=0))


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="same shape"):
        M.hamming_loss(Y, P[:, :2])
