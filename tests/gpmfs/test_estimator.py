"""GPMFSMultiLabelClassifier: scikit-learn compliance, per-label columns, and theta reaching GridSearchCV scores."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils.estimator_checks import check_classifiers_train, parametrize_with_checks

from hf_ext.gpmfs.estimator import GPMFSMultiLabelClassifier
from hf_ext.gpmfs.selector import GPMFSSelector


# Every check of scikit-learn's check_estimator, nothing skipped. The one tag set on purpose is poor_score (a
# selector keeps 20 % of the columns by default, so the accuracy floors of the score checks do not apply); the
# test below shows they pass once the budget keeps every column.
@parametrize_with_checks([GPMFSMultiLabelClassifier(GPMFSSelector(max_iter=5)), GPMFSSelector(max_iter=5)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_score_checks_pass_with_the_full_budget():
    class Strict(GPMFSMultiLabelClassifier):
        def __sklearn_tags__(self):
            tags = super().__sklearn_tags__()
            tags.classifier_tags.poor_score = False
            return tags

    check_classifiers_train("strict", Strict(GPMFSSelector(budget=1.0, max_iter=5)))


def test_each_label_is_fitted_on_its_own_columns(small):
    clf = GPMFSMultiLabelClassifier(GPMFSSelector(budget=5, theta=0.2, k_personal=2), LogisticRegression())
    clf.fit(small.X, small.Y)
    sets = clf.selector_.label_feature_sets()
    assert any(not np.array_equal(sets[0], s) for s in sets[1:])  # the personal sets differ between labels
    P = clf.predict_proba(small.X)
    assert P.shape == small.Y.shape
    for j, cols in enumerate(sets):
        np.testing.assert_array_equal(clf.feature_sets_[j], cols)
        ref = LogisticRegression().fit(small.X[:, cols], small.Y[:, j])
        np.testing.assert_allclose(P[:, j], ref.predict_proba(small.X[:, cols])[:, 1])
        np.testing.assert_array_equal(clf.predict(small.X)[:, j], ref.predict(small.X[:, cols]))


def test_theta_changes_grid_search_scores(planted):
    """The bug of a plain Pipeline: only the global set reached the classifier, so theta changed nothing."""
    X, Y = planted.X[:300], planted.Y[:300]
    clf = Pipeline(
        [
            ("scale", MinMaxScaler()),
            ("clf", GPMFSMultiLabelClassifier(GPMFSSelector(budget=0.1, max_iter=10), KNeighborsClassifier(10))),
        ]
    )
    search = GridSearchCV(
        clf, {"clf__selector__theta": [0.2, 1.0]}, scoring="f1_macro", cv=KFold(3, shuffle=True, random_state=0)
    ).fit(X, Y)
    scores = search.cv_results_["mean_test_score"]
    assert abs(scores[0] - scores[1]) > 0.02, scores
    # planted private features are only reachable through the personal sets: theta < 1 wins at a 10 % budget
    assert search.best_params_["clf__selector__theta"] == 0.2


def test_cross_val_score_with_a_label_missing_from_a_fold(small):
    Y = small.Y.copy()
    Y[:, 2] = 0
    Y[5, 2] = 1  # one positive: every training fold but one sees a constant label
    clf = GPMFSMultiLabelClassifier(GPMFSSelector(budget=4, max_iter=5))
    scores = cross_val_score(clf, small.X, Y, cv=KFold(4), scoring="f1_micro")
    assert np.all(np.isfinite(scores))
    fitted = clf.fit(small.X[10:], Y[10:])
    assert fitted.selector_.n_labels_ == 2  # the constant label is set aside, not fed to GPMFS
    assert np.all(fitted.predict(small.X)[:, 2] == 0)


def test_one_d_targets_are_an_ordinary_classifier(small):
    y = small.Y[:, 0] + 2 * small.Y[:, 1]  # four classes
    clf = GPMFSMultiLabelClassifier(GPMFSSelector(budget=6, max_iter=5)).fit(small.X, y)
    assert set(clf.predict(small.X)) <= set(np.unique(y))
    np.testing.assert_allclose(clf.predict_proba(small.X).sum(axis=1), 1.0)
    assert clf.predict_proba(small.X).shape == (len(y), 4)


def test_bad_components_are_named():
    with pytest.raises(TypeError, match="selector must be a GPMFSSelector"):
        GPMFSMultiLabelClassifier(selector=LogisticRegression()).fit(np.eye(4), [0, 1, 0, 1])
    with pytest.raises(TypeError, match="base_estimator must be"):
        GPMFSMultiLabelClassifier(base_estimator=MinMaxScaler()).fit(np.eye(4), [0, 1, 0, 1])
