"""Friedman + Nemenyi (hf_ext.gpmfs.stats) against Demšar (2006), JMLR 7:1-30, and scipy."""

import numpy as np
import pytest
from scipy.stats import friedmanchisquare

from hf_ext.gpmfs.stats import critical_difference, friedman, friedman_statistics, nemenyi_q, rank_rows

# Demšar (2006), Table 5: Nemenyi critical values q_alpha for k = 2..10 classifiers.
Q_005 = (1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164)
Q_010 = (1.645, 2.052, 2.291, 2.459, 2.589, 2.693, 2.780, 2.855, 2.920)


@pytest.mark.parametrize("alpha, table", [(0.05, Q_005), (0.10, Q_010)])
def test_nemenyi_critical_values_match_demsar_table_5(alpha, table):
    assert [nemenyi_q(k, alpha) for k in range(2, 11)] == pytest.approx(table, abs=1e-3)


def test_demsar_worked_example_statistics():
    # Sec. 3.2.2 / 3.2.4: four C4.5 variants on N = 14 data sets with average ranks 3.143, 2.000, 2.893, 1.964
    # (= 44/14, 28/14, 40.5/14, 27.5/14): chi2_F = 9.28, F_F = 3.69 (> F(3, 39) critical 2.85), CD = 1.25.
    ranks = np.array([44, 28, 40.5, 27.5]) / 14
    chi2, p_chi2, f_stat, p = friedman_statistics(ranks, 14)
    assert chi2 == pytest.approx(9.28, abs=0.005)
    assert f_stat == pytest.approx(3.69, abs=0.005)
    assert p < 0.05 and p_chi2 < 0.05  # both the chi2 and the Iman-Davenport F reject at 5 %
    assert critical_difference(4, 14, 0.05) == pytest.approx(1.25, abs=0.005)
    assert critical_difference(4, 14, 0.10) == pytest.approx(1.12, abs=0.005)


def test_rank_rows_average_ties_and_orientation():
    S = np.array([[0.9, 0.8, 0.8, 0.1], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(rank_rows(S), [[1, 2.5, 2.5, 4], [2.5, 2.5, 2.5, 2.5]])
    np.testing.assert_array_equal(rank_rows(S, higher_is_better=False), [[4, 2.5, 2.5, 1], [2.5, 2.5, 2.5, 2.5]])
    with pytest.raises(ValueError, match="scores"):
        rank_rows(np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        rank_rows(np.array([[0.1, np.nan]]))


def test_friedman_on_a_table_equals_scipy_without_ties():
    S = np.random.default_rng(0).random((12, 5))
    res = friedman(S, methods=list("abcde"))
    assert res.chi2 == pytest.approx(friedmanchisquare(*S.T).statistic)
    assert res.p_chi2 == pytest.approx(friedmanchisquare(*S.T).pvalue)
    assert res.rank_of("a") == pytest.approx(rank_rows(S)[:, 0].mean())
    assert res.cd == pytest.approx(nemenyi_q(5) * np.sqrt(5 * 6 / (6 * 12)))
    assert res.to_dict()["avg_ranks"]["e"] == pytest.approx(res.avg_ranks[4])


def test_friedman_detects_a_consistent_winner_and_not_noise():
    rng = np.random.default_rng(1)
    S = rng.random((15, 4))
    S[:, 2] += 1.0  # method c wins every block
    res = friedman(S, methods=list("abcd"))
    assert res.rejects and res.rank_of("c") == 1.0
    assert res.differs("c", "a") and res.differs("c", "b")
    noise = friedman(rng.random((15, 4)), methods=list("abcd"))
    assert not noise.rejects
    identical = friedman(np.tile([0.1, 0.2, 0.3], (5, 1)))
    assert identical.rejects and identical.p_value == 0.0  # every block ranks alike
