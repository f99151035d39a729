"""The tables and the figure of `hf-ext reproduce gpmfs`: the printed table, the README / card Markdown, the display
tables the docs renderer reads, and the AP / macro-F1 by budget plot."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .tuning import HYPER

# The compared arms of the reproduction, in table order.
METHODS = ("gpmfs", "gpmfs_global", "all", "random", "ftest", "rfs", "lrfs", "scls", "prior")


def _sd(cell: dict) -> float:
    # a single run has no sample SD (stored as None)
    return float("nan") if cell.get("sd") is None else cell["sd"]


def _diff_cell(c: dict, digits: int = 4) -> str:
    """`+0.0021 ± 0.0038 [-0.0026, +0.0068]` from a stored [`PairedDifference`] dict."""
    if c.get("ci_low") is None:
        return f"{c['mean']:+.{digits}f} (n = {c['n']})"
    return f"{c['mean']:+.{digits}f} ± {c['sd']:.{digits}f} [{c['ci_low']:+.{digits}f}, {c['ci_high']:+.{digits}f}]"


def format_table(results: dict) -> str:
    """Plain-text table: average precision and macro-F1 (and planted private recall) per method and budget."""
    lines = []
    for name, ds in results["datasets"].items():
        budgets = list(next(iter(ds["results"].values())).keys())
        metrics = ["average_precision", "macro_f1"] + (["recall_private"] if name == "planted" else [])
        lines.append(
            f"\n{name} ({ds['n']}x{ds['d']}, q={ds['q']}, {ds['protocol']}, {ds.get('runtime_s', '?')} s); mean ± SD"
        )
        for metric in metrics:
            lines.append(f"  {metric:<18}" + "".join(f"{b:>16}" for b in budgets))
            for method in METHODS:
                cells = [ds["results"][method][b][metric] for b in budgets]
                lines.append(f"    {method:<16}" + "".join(f"{c['mean']:>9.4f}±{_sd(c):.4f}" for c in cells))
        lines.append(
            "  tuned theta per run "
            + "  ".join(f"{b}: {'/'.join(f'{t:g}' for t in ds['tuned_theta'][b])}" for b in budgets)
        )
        for key in ("gpmfs_minus_global", "gpmfs_minus_ftest"):
            ap_diff = [ds[key][b]["average_precision"] for b in budgets]
            wins = ", ".join(f"{c['better_in']}/{c['runs']}" for c in ap_diff)
            lines.append(
                f"  {key.replace('_minus_', ' - ')} AP (mean ± SD [95 % CI]) "
                + "  ".join(_diff_cell(c) for c in ap_diff)
                + f"   (gpmfs better in {wins} runs)"
            )
        params = ds["tuned_params"]
        lines.append(
            "  tuned alpha/beta/gamma/lam per run: " + "  ".join("/".join(f"{p[h]:g}" for h in HYPER) for p in params)
        )
        lss = ds["label_specific_strength"]
        lines.append(
            "  label-specific strength (mean|P_j|/|G|) "
            + " ".join(f"{b}:{lss[b]['mean']:.3f}" for b in budgets)
            + f"  overall {lss['overall']:.3f}"
        )
    return "\n".join(lines)


def verdict_report(results: dict) -> list[dict]:
    """The verdict run's display tables for the docs renderer: AP per data × budget × arm, the Friedman ranks, the
    pooled paired differences (the tables of [`~hf_ext.gpmfs.reproduce_verdict.format_verdict_markdown`])."""
    from hf_ext.core.results_render import markdown_tables

    from . import reproduce_verdict as V

    titles = ["Average precision per data set, budget and arm (mean ± SD over CV runs)",
              "Friedman average ranks per metric (Iman-Davenport p, Nemenyi critical difference)",
              "Pooled AP difference, GPMFS − each arm (data × budget blocks)"]  # fmt: skip
    return markdown_tables(titles, V.format_verdict_markdown(results))


def format_markdown(results: dict, metrics=("average_precision", "macro_f1")) -> str:
    """The README / model-card tables from `results.json`: data x budget x method (mean ± SD over folds or seeds),
    then per data set the paired GPMFS differences, the tuned weights and the label-specific strength."""
    head = "| data | metric | budget | " + " | ".join(METHODS) + " |"
    lines = [head, "|" + "---|" * (3 + len(METHODS))]
    for name, ds in results["datasets"].items():
        for metric in list(metrics) + (["recall_private"] if name == "planted" else []):
            for b in ds["results"]["gpmfs"]:
                cells = [ds["results"][m][b][metric] for m in METHODS]
                lines.append(
                    f"| {name} | {metric} | {b} | " + " | ".join(f"{c['mean']:.4f}±{_sd(c):.4f}" for c in cells) + " |"
                )
    lines += [
        "",
        "| data | budget | GPMFS − global-only AP (better in) | GPMFS − F-test AP (better in) "
        "| tuned θ per run | label-specific strength |",
        "|---|---|---|---|---|---|",
    ]
    for name, ds in results["datasets"].items():
        for b in ds["results"]["gpmfs"]:
            g, f = ds["gpmfs_minus_global"][b]["average_precision"], ds["gpmfs_minus_ftest"][b]["average_precision"]
            lss = ds["label_specific_strength"][b]
            lines.append(
                f"| {name} | {b} | {_diff_cell(g)} ({g['better_in']}/{g['runs']}) | "
                f"{_diff_cell(f)} ({f['better_in']}/{f['runs']}) | "
                f"{'/'.join(f'{t:g}' for t in ds['tuned_theta'][b])} | {lss['mean']:.3f}±{_sd(lss):.3f} |"
            )
    lines += [
        "",
        "| data | tuned α/β/γ/λ per run (GPMFS) | global-only arm | overall label-specific strength |",
        "|---|---|---|---|",
    ]
    for name, ds in results["datasets"].items():
        fmt = lambda ps: ", ".join("/".join(f"{p[h]:g}" for h in HYPER) for p in ps)  # noqa: E731
        lines.append(
            f"| {name} | {fmt(ds['tuned_params'])} | {fmt(ds['tuned_params_global'])} | "
            f"{ds['label_specific_strength']['overall']:.3f} |"
        )
    return "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    """Metric-vs-budget figure: average precision of every data set, plus planted private-feature recall."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["datasets"])
    panels = [(n, "average_precision") for n in names] + ([("planted", "recall_private")] if "planted" in names else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    axes = axes[0]
    for ax, (name, metric) in zip(axes, panels):
        ds = results["datasets"][name]
        for method in METHODS:
            budgets = list(ds["results"][method])
            x = [float(b.rstrip("%")) for b in budgets]
            y = [ds["results"][method][b][metric]["mean"] for b in budgets]
            e = [np.nan_to_num(_sd(ds["results"][method][b][metric])) for b in budgets]
            ax.errorbar(
                x,
                y,
                yerr=e,
                marker="o",
                capsize=3,
                label=method,
                linestyle="--" if method in ("all", "random", "prior") else "-",
            )
        ax.set_title(f"{name}: {metric}")
        ax.set_xlabel("budget (% of features per label)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
