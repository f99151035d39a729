"""Metrics for ORCA ([CIKM'25](https://arxiv.org/abs/2508.16573)): CTR metrics on all impressions, dwell-time (DT)
metrics on clicked impressions, and measures of the "collapse to extreme bins" the paper shows in its Fig. 1.

The DT metrics follow the official evaluation: the predicted bin is the argmax of the DT probabilities, the
predicted time is that bin's seconds (`ORCA_BIN_SECONDS`), and NDCG is computed per user with the true read time as
relevance and the predicted seconds as score. The collapse measures (moderate-bin share, Jensen–Shannon distance,
normalised entropy) are this project's proposal: the paper's own scalar measure is unknown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import f1_score, log_loss, roc_auc_score

from .configuration_orca import ORCA_BIN_SECONDS

# Probabilities are clipped away from 0 and 1 so that one confident mistake gives a large but finite log-loss.
PROB_EPS = 1e-7
# Tolerance on the row sums of DT probabilities (float32 softmax sums to 1 within ~1e-6).
ROW_SUM_ATOL = 1e-3


def _as_1d(values: Any, name: str, dtype: Any = np.float64) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric: {err}") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} has NaN or infinite values")
    return array


def _check_same_length(**arrays: np.ndarray) -> None:
    names = list(arrays)
    n = len(arrays[names[0]])
    for name in names[1:]:
        if len(arrays[name]) != n:
            raise ValueError(f"{name} has {len(arrays[name])} entries but {names[0]} has {n}")


def _check_labels(values: np.ndarray, name: str, num_classes: int) -> np.ndarray:
    if np.any(values != np.round(values)) or np.any(values < 0) or np.any(values >= num_classes):
        bad = values[(values != np.round(values)) | (values < 0) | (values >= num_classes)][0]
        raise ValueError(f"{name} must hold integers in [0, {num_classes}), found {bad}")
    return values.astype(np.int64)


# --------------------------------------------------------------------------------------------------------------
# CTR
# --------------------------------------------------------------------------------------------------------------


def ctr_metrics(click_true: Any, click_prob: Any) -> dict[str, float]:
    """CTR metrics over all impressions.

    Args:
        click_true (array-like of 0/1, shape `[N]`): click labels.
        click_prob (array-like of `float`, shape `[N]`): predicted click probabilities in [0, 1]; clipped to
            `[1e-7, 1 - 1e-7]` for the log-loss.

    Returns:
        `dict` with `ctr_auc` (NaN when only one class is present: AUC is undefined there) and `ctr_logloss`.
    """
    y = _as_1d(click_true, "click_true")
    p = _as_1d(click_prob, "click_prob")
    _check_same_length(click_true=y, click_prob=p)
    y = _check_labels(y, "click_true", 2)
    if np.any(p < 0) or np.any(p > 1):
        raise ValueError("click_prob must be probabilities in [0, 1]")
    p = np.clip(p, PROB_EPS, 1 - PROB_EPS)
    auc = float(roc_auc_score(y, p)) if 0 < y.sum() < y.size else float("nan")
    return {"ctr_auc": auc, "ctr_logloss": float(log_loss(y, p, labels=[0, 1]))}


# --------------------------------------------------------------------------------------------------------------
# Histograms and collapse measures
# --------------------------------------------------------------------------------------------------------------


def bin_histogram(bins: Any, num_bins: int = len(ORCA_BIN_SECONDS), normalize: bool = True) -> np.ndarray:
    """Histogram of dwell-time bin ids.

    Args:
        bins (array-like of `int`, shape `[N]`): bin ids in `[0, num_bins)`.
        num_bins (`int`, defaults to 8): K.
        normalize (`bool`, defaults to `True`): return shares summing to 1 instead of counts.

    Returns:
        `np.ndarray` of shape `[K]` (`float64` shares or `int64` counts).
    """
    b = _check_labels(_as_1d(bins, "bins"), "bins", num_bins)
    counts = np.bincount(b, minlength=num_bins)
    return counts / counts.sum() if normalize else counts.astype(np.int64)


def _as_distribution(values: Any, name: str) -> np.ndarray:
    d = _as_1d(values, name)
    if np.any(d < 0) or d.sum() <= 0:
        raise ValueError(f"{name} must be non-negative with a positive sum")
    return d / d.sum()


def js_distance(p: Any, q: Any) -> float:
    """Jensen–Shannon distance in base 2 (the square root of the JS divergence), in [0, 1].

    It is 0 for identical histograms and 1 for histograms with disjoint support. Inputs are normalised to sum to 1,
    so counts can be passed directly. Equal to `scipy.spatial.distance.jensenshannon(p, q, base=2)`.

    Args:
        p (array-like, shape `[K]`): first histogram (non-negative).
        q (array-like, shape `[K]`): second histogram (non-negative).
    """
    p = _as_distribution(p, "p")
    q = _as_distribution(q, "q")
    _check_same_length(p=p, q=q)
    m = 0.5 * (p + q)

    def kl(a: np.ndarray) -> float:
        support = a > 0  # 0 · log 0 = 0; m > 0 wherever a > 0
        return float(np.sum(a[support] * np.log2(a[support] / m[support])))

    # Rounding can make the divergence a hair below 0; clip before the square root.
    return float(np.sqrt(max(0.0, 0.5 * kl(p) + 0.5 * kl(q))))


def normalized_entropy(hist: Any) -> float:
    """Shannon entropy of a histogram divided by `log K`: 1 for a uniform histogram, 0 when all mass is in one bin.

    Args:
        hist (array-like, shape `[K]`, `K >= 2`): non-negative counts or shares.
    """
    h = _as_distribution(hist, "hist")
    if h.size < 2:
        raise ValueError("hist must have at least 2 bins")
    nz = h[h > 0]
    return float(-np.sum(nz * np.log(nz)) / np.log(h.size))


def ctr_dt_heatmap(
    click_prob: Any,
    dwell_bin: Any,
    ctr_edges: Any = np.arange(0, 0.401, 0.05),
    num_bins: int = len(ORCA_BIN_SECONDS),
) -> np.ndarray:
    """Counts of clicked impressions per CTR bucket × dwell-time bin, as in the paper's Fig. 1.

    Row `i < len(ctr_edges) - 1` counts `ctr_edges[i] <= click_prob < ctr_edges[i+1]`; the last row is an overflow
    bucket for `click_prob >= ctr_edges[-1]` (≥ 0.40 by default, a range the paper's figure does not show). Rows
    with `dwell_bin == -100` (unclicked) are skipped, so a full dataset column can be passed.

    Args:
        click_prob (array-like of `float`, shape `[N]`): CTR of each impression (predicted or the generator's true
            one), `>= ctr_edges[0]`.
        dwell_bin (array-like of `int`, shape `[N]`): true or predicted DT bin, or -100 for unclicked rows.
        ctr_edges (array-like of `float`, defaults to `0.00, 0.05, ..., 0.40`): strictly increasing bucket edges.
        num_bins (`int`, defaults to 8): K.

    Returns:
        `np.ndarray` of `int64`, shape `[len(ctr_edges), K]` (the buckets plus the overflow row).
    """
    p = _as_1d(click_prob, "click_prob")
    b = _as_1d(dwell_bin, "dwell_bin")
    _check_same_length(click_prob=p, dwell_bin=b)
    # Rounded so that `np.arange`'s drift (0.30000000000000004) does not send a CTR of exactly 0.30 a row down.
    edges = np.round(_as_1d(ctr_edges, "ctr_edges"), 12)
    if edges.size < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError("ctr_edges must be at least 2 strictly increasing numbers")
    keep = b != -100
    p, b = p[keep], _check_labels(b[keep], "dwell_bin", num_bins)
    if np.any(p < edges[0]):
        raise ValueError(f"click_prob has values below ctr_edges[0] = {edges[0]}")
    rows = np.searchsorted(edges, p, side="right") - 1  # last edge and above -> overflow row len(edges) - 1
    heat = np.zeros((edges.size, num_bins), dtype=np.int64)
    np.add.at(heat, (rows, b), 1)
    return heat


# --------------------------------------------------------------------------------------------------------------
# Dwell time
# --------------------------------------------------------------------------------------------------------------


def _dcg_tie_averaged(relevance: np.ndarray, score: np.ndarray, discounts: np.ndarray) -> float:
    # Documents with equal scores share the average of their gains over the positions they jointly occupy
    # (McSherry & Najork, 2008), the same rule as sklearn's `ndcg_score(ignore_ties=False)` used by the official
    # code; the result does not depend on the input order of tied documents.
    order = np.argsort(-score, kind="stable")
    s, r = score[order], relevance[order]
    _, starts, sizes = np.unique(-s, return_index=True, return_counts=True)
    cum = np.concatenate([[0.0], np.cumsum(discounts)])
    total = 0.0
    for start, size in zip(starts, sizes):
        total += r[start : start + size].mean() * (cum[start + size] - cum[start])
    return total


def ndcg_per_user(relevance: Any, score: Any, user_ids: Any, k: int) -> float:
    """Mean over users of NDCG@k, with linear gains and `1 / log2(rank + 1)` discounts.

    Tied scores are averaged (see `sklearn.metrics.ndcg_score` with `ignore_ties=False`, which the official code
    calls): with only 8 distinct predicted times ties are common, and averaging makes the result independent of row
    order. A user with one document scores 1 (as in the official code); a user whose relevances are all 0 scores 0
    (as in sklearn).

    Args:
        relevance (array-like, shape `[N]`): true relevance (read seconds), `>= 0`.
        score (array-like, shape `[N]`): predicted score (predicted seconds).
        user_ids (array-like, shape `[N]`): user of each row.
        k (`int`): cut-off.
    """
    rel = _as_1d(relevance, "relevance")
    sc = _as_1d(score, "score")
    users = np.asarray(user_ids)
    if users.ndim != 1:
        raise ValueError(f"user_ids must be 1-D, got shape {users.shape}")
    _check_same_length(relevance=rel, score=sc, user_ids=users)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if np.any(rel < 0):
        raise ValueError("relevance must be >= 0")
    order = np.argsort(users, kind="stable")
    _, starts, sizes = np.unique(users[order], return_index=True, return_counts=True)
    values = np.empty(len(starts))
    for j, (start, size) in enumerate(zip(starts, sizes)):
        if size == 1:
            values[j] = 1.0
            continue
        idx = order[start : start + size]
        r, s = rel[idx], sc[idx]
        discounts = 1.0 / np.log2(np.arange(size) + 2.0)
        discounts[k:] = 0.0
        ideal = float(np.sum(np.sort(r)[::-1] * discounts))
        values[j] = _dcg_tie_averaged(r, s, discounts) / ideal if ideal > 0 else 0.0
    return float(values.mean())


def dt_metrics(
    dwell_bin_true: Any,
    dt_probs: Any,
    *,
    dwell_seconds_true: Any,
    bin_seconds: Any = ORCA_BIN_SECONDS,
    user_ids: Any = None,
    moderate_bins: tuple[int, ...] = (2, 3, 4, 5),
) -> dict[str, float]:
    """Dwell-time metrics on clicked impressions (the caller passes clicked rows only).

    - `dt_accuracy`, `dt_micro_f1`, `dt_macro_f1`: on the argmax bin. Macro-F1 averages over the classes present
      in the truth or the predictions (sklearn's default, as the official code); a class that is never predicted
      scores 0.
    - `dt_macro_auc`: mean of the one-vs-rest AUCs of the classes present in the truth. A class absent from the
      truth has no positives, so its AUC is undefined and it is left out of the mean (sklearn's
      `roc_auc_score(multi_class="ovr")` raises instead); NaN when fewer than 2 classes are present. With every
      class present it equals sklearn's macro OvR AUC.
    - `dt_mae_s`, `dt_rmse_s`: argmax bin → `bin_seconds` against the true seconds.
    - `ndcg@3`, `ndcg@5`: per user (see [`ndcg_per_user`]); NaN when `user_ids` is not given.
    - `moderate_share_pred`, `moderate_share_true`: share of argmax predictions / truths in `moderate_bins`.
    - `moderate_recall`: of the rows whose true bin is moderate, the share predicted in a moderate bin (the
      collapse onto extreme bins the paper shows lowers it); NaN when no true bin is moderate.
    - `js_distance`: Jensen–Shannon distance (base 2) between the predicted-bin and true-bin histograms.
    - `pred_entropy_norm`: entropy of the predicted-bin histogram divided by `log K`.

    Args:
        dwell_bin_true (array-like of `int`, shape `[N]`): true bins in `[0, K)`.
        dt_probs (array-like of `float`, shape `[N, K]`): predicted bin probabilities (rows sum to 1).
        dwell_seconds_true (array-like of `float`, shape `[N]`): true read time in seconds (clipped to [1, 400],
            as the dataset's `dwell_seconds` column).
        bin_seconds (array-like of `float`, defaults to `ORCA_BIN_SECONDS`): seconds of each bin; K is its length.
        user_ids (array-like, shape `[N]`, *optional*): user of each row, for NDCG.
        moderate_bins (`tuple[int, ...]`, defaults to `(2, 3, 4, 5)`): the bins counted as "moderate".

    Returns:
        `dict[str, float]` with the keys above.
    """
    seconds_of_bin = _as_1d(bin_seconds, "bin_seconds")
    num_bins = seconds_of_bin.size
    if num_bins < 2:
        raise ValueError("bin_seconds must have at least 2 bins")
    y = _check_labels(_as_1d(dwell_bin_true, "dwell_bin_true"), "dwell_bin_true", num_bins)
    try:
        probs = np.asarray(dt_probs, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"dt_probs must be numeric: {err}") from None
    if probs.ndim != 2 or probs.shape[1] != num_bins:
        raise ValueError(f"dt_probs must have shape [N, {num_bins}] (K = len(bin_seconds)), got {probs.shape}")
    if not np.all(np.isfinite(probs)) or np.any(probs < 0):
        raise ValueError("dt_probs must be finite and non-negative")
    if not np.allclose(probs.sum(axis=1), 1.0, atol=ROW_SUM_ATOL):
        raise ValueError("dt_probs rows must sum to 1 (pass softmax probabilities, not logits)")
    seconds = _as_1d(dwell_seconds_true, "dwell_seconds_true")
    _check_same_length(dwell_bin_true=y, dt_probs=probs, dwell_seconds_true=seconds)
    if user_ids is not None:
        user_ids = np.asarray(user_ids)
        _check_same_length(dwell_bin_true=y, user_ids=user_ids)
    moderate = np.asarray(moderate_bins, dtype=np.int64)
    if moderate.ndim != 1 or np.any(moderate < 0) or np.any(moderate >= num_bins):
        raise ValueError(f"moderate_bins must be bin ids in [0, {num_bins}), got {moderate_bins!r}")

    pred = probs.argmax(axis=1)
    pred_seconds = seconds_of_bin[pred]

    aucs = []
    for c in range(num_bins):
        positives = y == c
        if 0 < positives.sum() < y.size:
            aucs.append(roc_auc_score(positives, probs[:, c]))
    hist_pred = np.bincount(pred, minlength=num_bins)
    hist_true = np.bincount(y, minlength=num_bins)

    metrics = {
        "dt_accuracy": float(np.mean(pred == y)),
        "dt_macro_f1": float(f1_score(y, pred, average="macro", zero_division=0)),
        "dt_micro_f1": float(f1_score(y, pred, average="micro", zero_division=0)),
        "dt_macro_auc": float(np.mean(aucs)) if aucs else float("nan"),
        "dt_mae_s": float(np.mean(np.abs(pred_seconds - seconds))),
        "dt_rmse_s": float(np.sqrt(np.mean((pred_seconds - seconds) ** 2))),
        "moderate_share_pred": float(np.isin(pred, moderate).mean()),
        "moderate_share_true": float(np.isin(y, moderate).mean()),
        "moderate_recall": float(np.isin(pred[np.isin(y, moderate)], moderate).mean())
        if np.isin(y, moderate).any()
        else float("nan"),
        "js_distance": js_distance(hist_pred, hist_true),
        "pred_entropy_norm": normalized_entropy(hist_pred),
    }
    for k in (3, 5):
        metrics[f"ndcg@{k}"] = (
            ndcg_per_user(seconds, pred_seconds, user_ids, k) if user_ids is not None else float("nan")
        )
    return metrics
