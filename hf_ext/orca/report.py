"""Tables and figures of `hf-ext reproduce orca`: reference rows, paired per-seed differences, the stated
confirm/refute criteria, and the CTR × DT heatmaps (the paper's Fig. 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .metrics import ctr_metrics, dt_metrics

# Rows of every table, in order. Oracle and trivial are computed, not trained; the others are trained models.
REFERENCE_ORDER = ("oracle", "oracle@train", "trivial", "single-task", "baseline", "orca", "orca-raw")
METRIC_KEYS = ("dt_ce", "dt_macro_f1", "dt_mae_s", "moderate_share_pred", "js_distance", "ctr_auc")

CRITERIA = """Stated before the runs (what would confirm or refute the paper on this generator):
  W (the baseline works): on the i.i.d. test the MTL baseline closes >= 50 % of the trivial -> oracle gap in
    DT cross-entropy at every strength; otherwise the ORCA comparison is called inconclusive (underfitting).
  C (confirm): on the shifted test (shortcut absent), ORCA's paired DT-CE gain over the baseline
    (baseline - ORCA, same data and init) is > 0 by more than its seed std at s >= 2, grows with s, and is
    within its seed std of 0 at s = 0; and ORCA's CTR AUC is within 0.002 of the baseline's.
  R (refute): at s >= 2 the paired gain is <= 0 (or within its seed std of 0), or it is as large at s = 0 as at
    s = 3 (a gain unrelated to the shortcut), or CTR AUC drops by more than 0.002.
  Also read: the MTL baseline vs the single-task model (does sharing with CTR hurt DT at all?), and ORCA vs its
    own raw head (same model: the effect of the subtraction alone)."""


def cross_entropy(dt_probs: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(np.asarray(dt_probs, dtype=np.float64)[np.arange(y.size), y], 1e-12, None)
    return float(-np.mean(np.log(p)))


def score(
    test: dict[str, np.ndarray],
    click_probs: np.ndarray | None,
    dt_probs: np.ndarray,
    bin_seconds,
    moderate_bins=(2, 3, 4, 5),
    user_ids: np.ndarray | None = None,
) -> dict[str, float]:
    """The metrics of one predictor on one test set (`dt_probs` for every row; DT metrics on clicked rows): every
    key of [`dt_metrics`] plus `dt_ce`, `ctr_auc` and `num_clicked`."""
    clicked = test["click"] > 0.5
    y = test["dwell_bin"][clicked].astype(np.int64)
    probs = np.asarray(dt_probs, dtype=np.float64)[clicked]
    probs = probs / probs.sum(1, keepdims=True)
    dt = dt_metrics(
        y,
        probs,
        dwell_seconds_true=test["dwell_seconds"][clicked],
        bin_seconds=bin_seconds,
        moderate_bins=moderate_bins,
        user_ids=None if user_ids is None else user_ids[clicked],
    )
    out = {"dt_ce": cross_entropy(probs, y), **dt, "num_clicked": int(clicked.sum())}
    if click_probs is not None:
        out.update(ctr_metrics(test["click"], click_probs))
    else:  # a single-task DT model has no CTR head worth scoring
        out.update(ctr_auc=float("nan"), ctr_logloss=float("nan"))
    return out


def _ms(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    if np.isnan(arr).all():  # a metric the row has none of (the single-task model's CTR AUC): shown as "—"
        return float("nan"), float("nan")
    return float(np.nanmean(arr)), float(np.nanstd(arr))


def gap_closed(model_ce: float, trivial_ce: float, oracle_ce: float) -> float:
    """Share of the trivial → oracle cross-entropy gap a model closes (1 = oracle, 0 = class prior)."""
    return (trivial_ce - model_ce) / (trivial_ce - oracle_ce) if trivial_ce > oracle_ce else float("nan")


def reference_table(cells: dict, strengths: list[float], seeds: list[int], test_name: str) -> str:
    """`cells[(s, seed, row)][test_name]` → one markdown table: mean ± std over seeds, and the gap closed."""
    head = ["s", "row", "DT CE", "gap closed", "macro-F1", "MAE s", "moderate% (true)", "JS dist", "CTR AUC"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for s in strengths:
        for row in REFERENCE_ORDER:
            per = [cells.get((s, seed, row), {}).get(test_name) for seed in seeds]
            if any(m is None for m in per):
                continue
            gaps = [
                gap_closed(
                    m["dt_ce"],
                    cells[(s, seed, "trivial")][test_name]["dt_ce"],
                    cells[(s, seed, "oracle")][test_name]["dt_ce"],
                )
                if (s, seed, "oracle") in cells
                else float("nan")
                for seed, m in zip(seeds, per)
            ]

            def cell(key, scale=1.0, digits=3, values=None):
                mean, std = _ms(values if values is not None else [m[key] for m in per])
                return "—" if np.isnan(mean) else f"{mean * scale:.{digits}f}±{std * scale:.{digits}f}"

            true = np.mean([m["moderate_share_true"] for m in per]) * 100
            lines.append(
                " | ".join(
                    [
                        f"{s:g}",
                        row,
                        cell("dt_ce"),
                        cell(None, values=gaps, digits=2),
                        cell("dt_macro_f1"),
                        cell("dt_mae_s", digits=1),
                        f"{cell('moderate_share_pred', 100, 1)} ({true:.1f})",
                        cell("js_distance"),
                        cell("ctr_auc", digits=4),
                    ]
                )
            )
    return "\n".join(lines)


PAIRS = (
    ("baseline", "orca", "ORCA gain over baseline"),
    ("orca-raw", "orca", "ORCA head vs its raw head"),
    ("single-task", "baseline", "baseline vs single-task"),
)


def paired_differences(cells: dict, strengths: list[float], seeds: list[int], test_name: str) -> dict:
    """Per (pair, s): per-seed `ref − new` DT-CE (positive = `new` better), macro-F1 `new − ref`, CTR AUC
    `new − ref`, with mean and std over seeds."""
    out = {}
    for ref, new, _ in PAIRS:
        for s in strengths:
            try:
                r = [cells[(s, seed, ref)][test_name] for seed in seeds]
                n = [cells[(s, seed, new)][test_name] for seed in seeds]
            except KeyError:
                continue
            d_ce = [a["dt_ce"] - b["dt_ce"] for a, b in zip(r, n)]
            d_f1 = [b["dt_macro_f1"] - a["dt_macro_f1"] for a, b in zip(r, n)]
            d_auc = [b["ctr_auc"] - a["ctr_auc"] for a, b in zip(r, n)]
            out[f"{new} vs {ref} @ s={s:g}"] = {
                "pair": (ref, new),
                "strength": s,
                "ce_gain": d_ce,
                "f1_gain": d_f1,
                "auc_change": d_auc,
                "ce_gain_mean_std": _ms(d_ce),
                "f1_gain_mean_std": _ms(d_f1),
                "auc_change_mean_std": _ms(d_auc),
            }
    return out


def paired_table(diffs: dict) -> str:
    head = ["pair", "s", "DT-CE gain per seed", "mean±std", "macro-F1 gain mean±std", "CTR AUC change mean±std"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for d in diffs.values():
        ref, new = d["pair"]
        per = " ".join(f"{v:+.3f}" for v in d["ce_gain"])
        (cm, cs), (fm, fs), (am, as_) = d["ce_gain_mean_std"], d["f1_gain_mean_std"], d["auc_change_mean_std"]
        auc = "—" if np.isnan(am) else f"{am:+.4f}±{as_:.4f}"
        lines.append(
            " | ".join([f"{new} − {ref}", f"{d['strength']:g}", per, f"{cm:+.3f}±{cs:.3f}", f"{fm:+.3f}±{fs:.3f}", auc])
        )
    return "\n".join(lines)


def verdict(cells: dict, diffs: dict, strengths: list[float], seeds: list[int]) -> list[str]:
    """The criteria above, applied mechanically."""
    lines = []
    gaps = {
        s: np.mean(
            [
                gap_closed(
                    cells[(s, seed, "baseline")]["iid"]["dt_ce"],
                    cells[(s, seed, "trivial")]["iid"]["dt_ce"],
                    cells[(s, seed, "oracle")]["iid"]["dt_ce"],
                )
                for seed in seeds
            ]
        )
        for s in strengths
        if all((s, seed, "baseline") in cells for seed in seeds)
    }
    works = all(g >= 0.5 for g in gaps.values())
    lines.append(
        "W: baseline gap closed on i.i.d. test "
        + ", ".join(f"s={s:g}: {g:.2f}" for s, g in gaps.items())
        + (" -> the baseline works" if works else " -> below 0.5 somewhere: comparisons inconclusive")
    )
    gain = {d["strength"]: d["ce_gain_mean_std"] for d in diffs.values() if d["pair"] == ("baseline", "orca")}
    auc = {d["strength"]: d["auc_change_mean_std"][0] for d in diffs.values() if d["pair"] == ("baseline", "orca")}
    if not gain:
        return lines
    strong = [s for s in gain if s >= 2]
    clear = [s for s in strong if gain[s][0] > max(gain[s][1], 1e-9)]
    zero_ok = 0.0 not in gain or abs(gain[0.0][0]) <= max(gain[0.0][1], 1e-9)
    lo, hi = min(gain), max(gain)
    grows = gain[hi][0] > gain[lo][0] + gain[hi][1]
    auc_ok = all(v >= -0.002 for v in auc.values() if not np.isnan(v))
    lines.append(
        "shifted test, ORCA DT-CE gain over baseline (mean±std): "
        + ", ".join(f"s={s:g}: {m:+.3f}±{sd:.3f}" for s, (m, sd) in sorted(gain.items()))
    )
    lines.append("CTR AUC change (ORCA − baseline): " + ", ".join(f"s={s:g}: {v:+.4f}" for s, v in sorted(auc.items())))
    if not works:
        lines.append("verdict: inconclusive (W failed)")
    elif strong and len(clear) == len(strong) and grows and zero_ok and auc_ok:
        lines.append("verdict: CONFIRMED on this generator (C holds)")
    elif not clear or not grows or not auc_ok:
        lines.append(
            f"verdict: REFUTED on this generator (R: gain clear at s>=2 in {len(clear)}/{len(strong)}, "
            f"grows with s: {grows}, ≈0 at s=0: {zero_ok}, CTR AUC kept: {auc_ok})"
        )
    else:
        lines.append(
            f"verdict: mixed (gain clear at s>=2 in {len(clear)}/{len(strong)}, grows: {grows}, "
            f"≈0 at s=0: {zero_ok}, CTR AUC kept: {auc_ok})"
        )
    return lines


def plot_heatmaps(panels: dict[str, np.ndarray], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), constrained_layout=True)
    for ax, (name, counts) in zip(np.atleast_1d(axes), panels.items()):
        share = counts / max(counts.sum(), 1)
        ax.imshow(share, aspect="auto", cmap="viridis", origin="lower")
        ax.set_title(name)
        ax.set_xlabel("DT bin")
        ax.set_yticks(range(share.shape[0]))
        ax.set_yticklabels([f"{0.05 * i:.2f}" for i in range(share.shape[0] - 1)] + ["≥0.40"])
        ax.set_ylabel("predicted CTR bucket (oracle: posterior CTR)")
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
