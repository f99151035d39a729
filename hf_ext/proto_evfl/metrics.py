"""Test metrics of Proto-EVFL runs: overall accuracy, macro-F1, per-class accuracy and unseen-class accuracy."""

from __future__ import annotations

import numpy as np


def classification_metrics(
    labels: np.ndarray, predictions: np.ndarray, num_classes: int, unseen_class: int | None = None
) -> dict[str, float]:
    """Metrics of one run on the (class-balanced) test set.

    Args:
        labels (`np.ndarray` of shape `(n,)`): true classes.
        predictions (`np.ndarray` of shape `(n,)`): predicted classes.
        num_classes (`int`): `C`; macro-F1 averages over all `C` classes (a class never predicted scores 0).
        unseen_class (`int`, *optional*): the never-labelled class of the zero-shot setting.

    Returns:
        `dict[str, float]`: `accuracy`, `macro_f1`, `acc_class_<c>` for every class and, with `unseen_class`,
        `unseen_accuracy` (recall of that class) and `seen_accuracy` (accuracy on the other classes' samples).
    """
    from sklearn.metrics import f1_score

    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.shape != predictions.shape or labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"labels and predictions must be non-empty vectors of one length, got {labels.shape} "
                         f"and {predictions.shape}")  # fmt: skip
    out = {
        "accuracy": float((labels == predictions).mean()),
        "macro_f1": float(f1_score(labels, predictions, labels=list(range(num_classes)), average="macro",
                                   zero_division=0)),
    }  # fmt: skip
    for c in range(num_classes):
        rows = labels == c
        out[f"acc_class_{c}"] = float((predictions[rows] == c).mean()) if rows.any() else float("nan")
    if unseen_class is not None:
        rows = labels == unseen_class
        out["unseen_accuracy"] = float((predictions[rows] == unseen_class).mean())
        out["seen_accuracy"] = float((predictions[~rows] == labels[~rows]).mean())
    return out


__all__ = ["classification_metrics"]
