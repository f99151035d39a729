"""`compute_metrics` building blocks for the methods' `Trainer`s, so `trainer.evaluate()` reports each method's own
metrics (named as in the README tables) and not only the loss.

Causal LMs keep only the arg-max token per position (`preprocess_logits_for_metrics=argmax_logits`), so an eval set
never holds `(N, L, vocab)` logits in memory; predictions are compared with the labels shifted as in the LM loss.
"""

from __future__ import annotations

import numpy as np


def argmax_logits(logits, labels):
    """`preprocess_logits_for_metrics`: the arg-max token per position (the first output if the model returns
    several)."""
    if isinstance(logits, (tuple, list)):
        logits = logits[0]
    return logits.argmax(-1)


def _shifted(eval_pred) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    preds, labels = eval_pred.predictions, eval_pred.label_ids
    if isinstance(preds, (tuple, list)):
        preds = preds[0]
    pred = np.asarray(preds)[:, :-1]
    gold = np.asarray(labels)[:, 1:]
    return pred, gold, gold != -100


def token_accuracy(eval_pred) -> dict[str, float]:
    """`{"token_acc"}`: share of next-token predictions equal to the label, over positions whose label is not -100."""
    pred, gold, mask = _shifted(eval_pred)
    return {"token_acc": float(((pred == gold) & mask).sum() / max(int(mask.sum()), 1))}


def answer_exact_match(eval_pred, max_positions: int | None = None) -> dict[str, float]:
    """`{"exact_match"}`: share of rows whose labelled positions (the first `max_positions` of them, when given) are
    all predicted right. Under teacher forcing this is exactly greedy decoding's exact match over those positions:
    each greedy step sees the same prefix as the reference as long as every earlier token was right."""
    pred, gold, mask = _shifted(eval_pred)
    if max_positions is not None:
        mask = mask & (np.cumsum(mask, axis=1) <= max_positions)
    rows = mask.any(axis=1)
    ok = ((pred == gold) | ~mask).all(axis=1) & rows
    return {"exact_match": float(ok.sum() / max(int(rows.sum()), 1))}
