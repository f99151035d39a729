"""GPMFSSelector as a scikit-learn estimator, and its bad-input handling."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import check_estimator

from hf_ext.gpmfs.config import GPMFSConfig
from hf_ext.gpmfs.selector import GPMFSSelector, select_features


def test_check_estimator_passes_every_check():
    # GPMFS is a supervised transformer with tags target_tags.required and multi_output. A 1-D y is handled as
    # documented (binary -> one label, multi-class -> one-hot), so the generic checks, which pass 1-D class labels,
    # all apply: no check is excluded. (check_array_api_input is skipped by sklearn itself without SCIPY_ARRAY_API.)
    results = check_estimator(GPMFSSelector(max_iter=5), on_fail=None, on_skip=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    assert not failed
    assert sum(r["status"] == "passed" for r in results) > 30


def test_params_config_and_supports(small):
    sel = GPMFSSelector(budget=4, theta=0.2, k_personal=2)
    assert sel.get_params()["budget"] == 4
    sel.set_params(theta=0.3)
    assert sel.config == GPMFSConfig(budget=4, theta=0.3, k_personal=2)
    assert GPMFSSelector.from_config(sel.config).get_params() == sel.get_params()
    with pytest.raises(NotFittedError):
        sel.get_support()
    sel.fit(small.X, small.Y)
    assert sel.get_support().sum() == 4 and len(sel.global_indices_) == 4
    assert sel.transform(small.X).shape == (len(small.X), 4)
    for j in range(small.Y.shape[1]):
        idx = sel.get_support(indices=True, label=j)
        assert len(idx) == 4  # equal budget per label
        np.testing.assert_array_equal(sel.transform(small.X, label=j), small.X[:, idx])
        np.testing.assert_array_equal(np.flatnonzero(sel.get_support(label=j)), idx)
    with pytest.raises(ValueError, match="label"):
        sel.get_support(label=small.Y.shape[1])
    # reselection reuses W
    other = sel.with_selection(theta=1.0)
    np.testing.assert_array_equal(other.W_, sel.W_)
    assert all(np.array_equal(s, other.global_indices_) for s in other.label_indices_)
    with pytest.raises(ValueError, match="with_selection"):
        sel.with_selection(alpha=2.0)


def test_pipeline_clone_and_feature_names(small):
    df = pd.DataFrame(small.X, columns=small.feature_names)
    sel = clone(GPMFSSelector(budget=3)).fit(df, small.Y)
    assert list(sel.get_feature_names_out()) == [small.feature_names[i] for i in sel.global_indices_]
    out = make_pipeline(GPMFSSelector(budget=3)).fit(df, small.Y).transform(df)
    assert out.shape == (len(df), 3)


def test_non_binary_labels_raise(small):
    Y = small.Y.copy()
    Y[0, 0] = 2
    with pytest.raises(ValueError, match="y must be binary"):
        GPMFSSelector().fit(small.X, Y)
    with pytest.raises(ValueError, match="y must be a binary indicator"):
        GPMFSSelector().fit(small.X, np.full(small.Y.shape, "a"))


def test_one_dimensional_y_is_documented_one_hot(small):
    y = np.arange(len(small.X)) % 3
    assert GPMFSSelector(budget=2).fit(small.X, y).n_labels_ == 3
    assert GPMFSSelector(budget=2).fit(small.X, y % 2).n_labels_ == 1
    with pytest.raises(ValueError, match="y has a single class"):
        GPMFSSelector().fit(small.X, np.zeros(len(small.X)))
    with pytest.raises(ValueError, match="y is None"):
        GPMFSSelector().fit(small.X, None)


def test_label_without_positives_raises(small):
    Y = small.Y.copy()
    Y[:, 1] = 0
    with pytest.raises(ValueError, match=r"y: label\(s\) \[1\] have no positive"):
        GPMFSSelector().fit(small.X, Y)


def test_nan_features_raise(small):
    X = small.X.copy()
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        GPMFSSelector().fit(X, small.Y)


def test_constant_features_warn_and_rank_last(small):
    X = small.X.copy()
    X[:, [0, 5]] = 7.0
    with pytest.warns(UserWarning, match=r"X: features \[0, 5\] are constant"):
        sel = GPMFSSelector(budget=10).fit(X, small.Y)
    assert np.all(sel.W_[[0, 5]] == 0)
    assert set(sel.ranking_[-2:].tolist()) == {0, 5}
    assert not np.isin([0, 5], sel.global_indices_).any()


def test_theta_out_of_range_and_budget_larger_than_d(small):
    with pytest.raises(ValueError, match="theta"):
        GPMFSSelector(theta=1.5).fit(small.X, small.Y)
    with pytest.raises(ValueError, match="theta"):
        GPMFSSelector(theta=-0.01).fit(small.X, small.Y)
    with pytest.raises(ValueError, match="budget"):
        GPMFSSelector(budget=small.X.shape[1] + 1).fit(small.X, small.Y)


# Issue 39: theta strictly between 0 and 1 must act. "Ignoring the threshold" (every feature with s_ij > 0 is a
# candidate) is what theta -> 0 does, so each case below also pins that theta = 0 selects differently.
_W_THETA = np.array(
    [
        [1.0, 0.1],  # f0 ┐ G = {f0, f1} (largest row norms)
        [0.9, 1.0],  # f1 ┘
        [0.7, 0.05],  # f2: label 0's best outside G (s = 0.7)
        [0.4, 0.6],  # f3: label 1's best outside G (s = 0.6)
        [0.1, 0.3],  # f4
        [0.0, 0.0],  # f5: never
    ]
)


@pytest.mark.parametrize(
    "theta, expected",
    [
        (0.0, [[2, 3], [3, 4]]),  # no threshold: the cap of 2 binds
        (0.2, [[2, 3], [3, 4]]),
        (0.5, [[2], [3]]),
        (0.65, [[2], []]),
        (0.8, [[], []]),
        (1.0, [[], []]),
    ],
)
def test_theta_between_0_and_1_changes_the_personal_sets_literal_union(theta, expected):
    sel = select_features(_W_THETA, budget=2, k_personal=2, theta=theta, equal_budget=False)
    np.testing.assert_array_equal(sel.global_indices, [0, 1])
    assert [p.tolist() for p in sel.personal_indices] == expected
    assert [s.tolist() for s in sel.label_indices] == [sorted([0, 1, *p]) for p in expected]


def test_theta_between_0_and_1_changes_the_label_sets_at_equal_budget():
    # Equal budget: a personal feature displaces the member of G its label values least, and only if worth more.
    sets = {
        t: [s.tolist() for s in select_features(_W_THETA, 2, 2, t, equal_budget=True).label_indices]
        for t in (0.0, 0.5, 0.65)
    }
    assert sets[0.5] == [[0, 1], [1, 3]]  # label 1: f3 (s = 0.6) replaces f0 (s = 0.1)
    assert sets[0.65] == [[0, 1], [0, 1]]  # f3 is below the threshold: label 1 keeps G
    assert sets[0.65] != sets[0.5]


def test_theta_acts_on_a_fitted_selector(planted):
    """On planted data, reselecting the same fitted W at theta = 0.5 differs from theta = 0 (no threshold) and from
    theta = 1 (global-only), and every personal feature clears the threshold."""
    sel = GPMFSSelector(budget=0.05, theta=0.5, k_personal=0.5, max_iter=15).fit(planted.X, planted.Y)
    by_theta = {t: sel.with_selection(theta=t) for t in (0.0, 0.5, 1.0)}
    label_sets = {t: [s.tolist() for s in s_.label_indices_] for t, s_ in by_theta.items()}
    assert label_sets[0.5] != label_sets[0.0]
    assert label_sets[0.5] != label_sets[1.0]
    absW = np.abs(sel.W_)
    for j, personal in enumerate(by_theta[0.5].personal_indices_):
        assert np.all(absW[personal, j] / absW[:, j].max() >= 0.5)
