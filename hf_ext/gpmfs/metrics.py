"""Multi-label evaluation metrics (Zhang & Zhou, 2014 definitions) used for [GPMFS](https://arxiv.org/abs/2504.12740).

Conventions, stated because libraries differ:
- ranks: `rank_i(l) = |{l' : s_il' >= s_il}|` (ties count against the label, as scikit-learn's `coverage_error`);
- ranking loss counts a (relevant, irrelevant) pair as wrong when `s_rel <= s_irr` (ties are errors) and skips
  samples with no or all labels relevant (undefined); average precision skips samples without relevant labels;
- one-error takes the first label of highest score (`argmax`) and counts every sample;
- coverage is `max_{l relevant} rank(l) - 1` (MULAN's; scikit-learn's `coverage_error` omits the `- 1`);
- macro-F1 uses F1 = 0 for a label with no true and no predicted positives (scikit-learn's `zero_division=0`).
Losses (lower is better): Hamming, ranking loss, one-error, coverage. Higher is better: the rest.
"""

from __future__ import annotations

import numpy as np

LOWER_IS_BETTER = ("hamming_loss", "ranking_loss", "one_error", "coverage")
HIGHER_IS_BETTER = ("average_precision", "macro_f1", "micro_f1")
METRICS = LOWER_IS_BETTER + HIGHER_IS_BETTER


def _check(Y, Z, name: str):
    Y = np.asarray(Y)
    Z = np.asarray(Z, dtype=np.float64)
    if Y.ndim != 2 or Y.shape != Z.shape:
        raise ValueError(f"Y and {name} must be 2-D arrays of the same shape, got {Y.shape} and {Z.shape}")
    return (Y > 0), Z


def _ranks(S: np.ndarray) -> np.ndarray:
    """rank_i(l) = number of labels scored >= s_il (1 = best)."""
    return (S[:, None, :] >= S[:, :, None]).sum(axis=2)


def hamming_loss(Y, P) -> float:
    """Fraction of wrong (sample, label) predictions."""
    Y, P = _check(Y, P, "P")
    return float(np.mean(Y != (P > 0)))


def ranking_loss(Y, S) -> float:
    """Mean fraction of (relevant, irrelevant) label pairs ordered wrongly (`s_rel <= s_irr`)."""
    Y, S = _check(Y, S, "S")
    losses = []
    for y, s in zip(Y, S):
        rel, irr = s[y], s[~y]
        if rel.size and irr.size:
            losses.append(np.mean(rel[:, None] <= irr[None, :]))
    return float(np.mean(losses)) if losses else 0.0


def one_error(Y, S) -> float:
    """Fraction of samples whose top-scored label is not relevant."""
    Y, S = _check(Y, S, "S")
    return float(np.mean(~Y[np.arange(Y.shape[0]), np.argmax(S, axis=1)]))


def coverage(Y, S) -> float:
    """Mean number of steps down the ranking needed to cover every relevant label (`max rank - 1`)."""
    Y, S = _check(Y, S, "S")
    R = _ranks(S)
    return float(np.mean([(R[i][Y[i]].max() - 1) if Y[i].any() else 0 for i in range(Y.shape[0])]))


def average_precision(Y, S) -> float:
    """Mean over samples with relevant labels of the precision at each relevant label's rank."""
    Y, S = _check(Y, S, "S")
    R = _ranks(S)
    values = []
    for i in range(Y.shape[0]):
        if Y[i].any():
            r = R[i][Y[i]]
            values.append(np.mean([(r <= rl).sum() / rl for rl in r]))
    return float(np.mean(values)) if values else 0.0


def _counts(Y, P):
    Y, P = _check(Y, P, "P")
    P = P > 0
    return (Y & P).sum(axis=0), (~Y & P).sum(axis=0), (Y & ~P).sum(axis=0)


def macro_f1(Y, P) -> float:
    """Unweighted mean over labels of F1 = 2 TP / (2 TP + FP + FN) (0 when undefined)."""
    tp, fp, fn = _counts(Y, P)
    denom = 2 * tp + fp + fn
    return float(np.mean(np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)))


def micro_f1(Y, P) -> float:
    """F1 of the pooled counts of every label."""
    tp, fp, fn = (c.sum() for c in _counts(Y, P))
    denom = 2 * tp + fp + fn
    return float(2 * tp / denom) if denom else 0.0


def evaluate_all(Y, P, S) -> dict[str, float]:
    """All seven metrics from true labels `Y`, {0, 1} predictions `P` and scores `S` (each `(n, q)`)."""
    return {
        "hamming_loss": hamming_loss(Y, P),
        "ranking_loss": ranking_loss(Y, S),
        "one_error": one_error(Y, S),
        "coverage": coverage(Y, S),
        "average_precision": average_precision(Y, S),
        "macro_f1": macro_f1(Y, P),
        "micro_f1": micro_f1(Y, P),
    }
