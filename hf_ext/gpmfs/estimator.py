"""[`GPMFSMultiLabelClassifier`]: one base classifier per label, each on its own GPMFS feature set.

A plain scikit-learn `Pipeline([("select", GPMFSSelector()), ("clf", ...)])` can only pass one column set to the
next step, so it uses the *global* set and `theta` has no effect. This meta-estimator fits the selector and then one
clone of `base_estimator` per label on that label's global + personal columns, so `selector__theta`,
`selector__budget`, ... change the predictions and can be tuned by `GridSearchCV` / `cross_val_score`.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from .selector import GPMFSSelector


class _ConstantLabel:
    """Predicts one value for a label that is constant in the training data (a rare label missing from a CV fold);
    GPMFS itself refuses such labels, so they are set aside before the selector is fitted."""

    def __init__(self, value: int):
        self.value = int(value)

    def predict(self, X):
        return np.full(X.shape[0], self.value, dtype=np.int64)

    def predict_proba(self, X):
        p = np.full((X.shape[0], 2), float(1 - self.value))
        p[:, 1] = float(self.value)
        return p


def _base_has(method: str):
    def check(self) -> bool:
        base = self.base_estimator if self.base_estimator is not None else LogisticRegression()
        return hasattr(base, method)

    return check


class GPMFSMultiLabelClassifier(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Binary relevance on GPMFS feature sets: label `j`'s classifier sees only `selector.label_feature_sets()[j]`.

    Args:
        selector ([`GPMFSSelector`], *optional*): unfitted selector (cloned at `fit`); `None` uses
            `GPMFSSelector()` with its defaults (budget 20 %, theta 0.5).
        base_estimator (scikit-learn classifier, *optional*): cloned once per label; `None` uses
            `LogisticRegression(max_iter=1000)`.

    Targets: a 2-D `y` of shape `(n, q)` is a label indicator matrix and `predict` returns one (0/1 per label).
    A 1-D `y` (binary or multi-class) is one-hot encoded for the selector (one-vs-rest), and `predict` returns the
    class of highest probability, so the estimator is also an ordinary classifier.

    Attributes:
        selector_ ([`GPMFSSelector`]): the fitted selector (on the labels that were not constant).
        estimators_ (`list`): one fitted classifier per label (a constant predictor for a constant label).
        feature_sets_ (`list[np.ndarray]`): the column indices each label's classifier uses.
        classes_ (`np.ndarray`): the classes of a 1-D `y`; for a 2-D `y`, `np.arange(q)` (the label indices).
        multilabel_ (`bool`): whether `y` was a 2-D indicator matrix.
        n_labels_ (`int`), n_features_in_ (`int`).

    Example:

    ```python
    >>> from sklearn.model_selection import GridSearchCV
    >>> clf = GPMFSMultiLabelClassifier(GPMFSSelector(budget=0.3), KNeighborsClassifier(10))
    >>> search = GridSearchCV(clf, {"selector__theta": [0.2, 0.6, 1.0]}, scoring="f1_macro").fit(X, Y)
    ```
    """

    def __init__(self, selector=None, base_estimator=None):
        self.selector = selector
        self.base_estimator = base_estimator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.classifier_tags.multi_label = True
        # A feature selector keeps a fraction of the columns by design (20 % by default: 1 of the 2 columns of the
        # blob data sklearn's score checks use), so the accuracy floors of those checks do not apply.
        tags.classifier_tags.poor_score = True
        return tags

    def _make_selector(self) -> GPMFSSelector:
        if self.selector is None:
            return GPMFSSelector()
        if not isinstance(self.selector, GPMFSSelector):
            raise TypeError(f"selector must be a GPMFSSelector, got {type(self.selector).__name__}")
        return clone(self.selector)

    def _make_base(self):
        base = LogisticRegression(max_iter=1000) if self.base_estimator is None else self.base_estimator
        if not hasattr(base, "fit") or not hasattr(base, "predict"):
            raise TypeError(f"base_estimator must be a scikit-learn classifier, got {type(base).__name__}")
        return base

    def fit(self, X, y):
        """Fits the selector on all non-constant labels, then one base classifier per label on its own columns.

        Args:
            X (array-like of shape `(n, d)`): finite features (NaN/inf raise).
            y (array-like of shape `(n, q)` or `(n,)`): 0/1 indicator matrix, or class labels.
        """
        selector, base = self._make_selector(), self._make_base()
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        if y is None:
            raise ValueError("GPMFSMultiLabelClassifier requires y to be passed, but the target y is None")
        if sp.issparse(y):
            y = y.toarray()
        y = np.asarray(y)
        if y.ndim not in (1, 2) or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-D or 2-D with {X.shape[0]} rows (one per sample of X), got {y.shape}")
        if y.ndim == 2 and y.shape[1] == 1 and not np.all(np.isin(np.unique(y), (0, 1))):
            y = y.ravel()  # a column of class labels (not 0/1 indicators): the same as 1-D, as in scikit-learn
        if y.ndim == 1:
            self.multilabel_ = False
            self._binarizer = LabelBinarizer()
            Y = self._binarizer.fit_transform(y)
            self.classes_ = self._binarizer.classes_
            if len(self.classes_) < 2:
                raise ValueError(f"y has a single class {self.classes_.tolist()}; a classifier needs 2 classes")
            if Y.shape[1] == 1:  # binary: one label
                Y = Y.astype(np.int64)
        else:
            self.multilabel_ = True
            if y.dtype.kind not in "biuf" or not np.all(np.isin(np.unique(y), (0, 1))):
                raise ValueError("y must be a binary (0/1) label indicator matrix when it is 2-D")
            Y = y.astype(np.int64)
            self.classes_ = np.arange(Y.shape[1])
        q = Y.shape[1]
        positives = Y.sum(axis=0)
        varying = np.flatnonzero((positives > 0) & (positives < Y.shape[0]))
        self.n_labels_ = q
        if varying.size:
            # GPMFS sees every label with both classes; labels positive everywhere carry no selection signal either.
            self.selector_ = selector.fit(X, Y[:, varying])
            sets = dict(zip(varying.tolist(), self.selector_.label_feature_sets()))
        else:
            self.selector_ = None
        fallback = None
        varying_set = set(varying.tolist())
        self.feature_sets_, self.estimators_ = [], []
        for j in range(q):
            if j in varying_set:
                cols = sets[j]
                est = clone(base).fit(X[:, cols], Y[:, j])
            else:  # constant label: the global set (if any) and a constant prediction
                if fallback is None:
                    fallback = (
                        self.selector_.get_support(indices=True)
                        if self.selector_ is not None
                        else np.arange(X.shape[1])
                    )
                cols, est = fallback, _ConstantLabel(int(Y[0, j]))
            self.feature_sets_.append(np.asarray(cols, dtype=np.int64))
            self.estimators_.append(est)
        return self

    def _label_scores(self, X) -> np.ndarray:
        """(m, q) probability of label `j`, from each label's classifier on its own columns."""
        out = np.empty((X.shape[0], self.n_labels_))
        for j, (cols, est) in enumerate(zip(self.feature_sets_, self.estimators_)):
            if hasattr(est, "predict_proba"):
                proba = est.predict_proba(X[:, cols])
                classes = getattr(est, "classes_", np.array([0, 1]))
                out[:, j] = proba[:, list(classes).index(1)] if 1 in classes else 0.0
            else:
                out[:, j] = est.predict(X[:, cols])
        return out

    def _check_X(self, X):
        check_is_fitted(self, "estimators_")
        return validate_data(self, X, dtype=np.float64, reset=False)

    def predict(self, X):
        """0/1 indicator matrix `(m, q)` for a 2-D training `y`; class labels `(m,)` for a 1-D one."""
        X = self._check_X(X)
        if self.multilabel_:
            return np.column_stack(
                [est.predict(X[:, cols]) for cols, est in zip(self.feature_sets_, self.estimators_)]
            ).astype(np.int64)
        if self.n_labels_ == 1:
            pred = np.asarray(self.estimators_[0].predict(X[:, self.feature_sets_[0]])).astype(np.int64)
            return self.classes_[pred]
        return self.classes_[np.argmax(self._label_scores(X), axis=1)]

    @available_if(_base_has("predict_proba"))
    def predict_proba(self, X):
        """`(m, q)` per-label probabilities for a 2-D training `y` (the ranking scores of the multi-label metrics);
        `(m, n_classes)` rows summing to one for a 1-D `y` (one-vs-rest probabilities, normalised)."""
        X = self._check_X(X)
        P = self._label_scores(X)
        if self.multilabel_:
            return P
        if self.n_labels_ == 1:
            return np.column_stack([1.0 - P[:, 0], P[:, 0]])
        total = P.sum(axis=1, keepdims=True)
        return np.where(total > 0, P / np.where(total > 0, total, 1.0), 1.0 / P.shape[1])
