"""Table cells, the quick run's table and its loss-curve figure for TinyAlign's reproductions, over seeds through
[`hf_ext.core.reporting.summarize`] (mean ± sample SD); no spread is computed here."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from hf_ext.core.reporting import summarize

# the caption metrics of every TinyAlign table, in order (final train CE ... retrieved neighbours' class match):
# their keys in a run's metrics and their column names
METRICS = ("final_train_loss", "test_loss", "token_accuracy", "class_word_accuracy", "bleu", "neighbour_class_match")
METRIC_COLUMNS = ("final train CE", "test CE", "token acc", "class-word acc", "BLEU", "nbr class match")


def metric_cells(stats: dict) -> list[str]:
    """The [`METRICS`] cells of one table row from `{metric: seed_stats}` (BLEU to one decimal, "-" for a metric the
    row does not have)."""
    return [stat_cell(stats[k], digits=1 if k == "bleu" else 3) if k in stats else "-" for k in METRICS]


def flags_command(prefix: str, run, skip: tuple[str, ...] = ("out",)) -> str:
    """`prefix` plus a `--flag value` for each field of the `run` dataclass that differs from its default (lists
    space-separated), less `skip`: the command as a user would type it to get this run."""
    from dataclasses import asdict

    defaults = asdict(type(run)())
    return prefix + "".join(
        f" --{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in asdict(run).items()
        if k not in skip and v != defaults[k]
    )


def seed_stats(values) -> dict:
    """`{"mean", "std", "n"}` of the finite `values` (one per seed): the mean and the **sample** SD (ddof = 1, `nan`
    for a single seed); NaN / `None` entries (a metric a variant does not have) are dropped and `n` counts the rest."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:  # e.g. neighbour agreement of the baseline, which retrieves nothing
        return {"mean": float("nan"), "std": float("nan"), "n": 0}
    s = summarize(finite)
    return {"mean": s.mean, "std": s.sd, "n": s.n}


def stat_cell(stat: dict, scale: float = 1.0, digits: int = 3) -> str:
    """`mean±sd`; `mean (n = 1)` for one seed; `n/a` when nothing was measured."""
    if not stat.get("n", 0):
        return "n/a"
    if stat["n"] < 2:
        return f"{stat['mean'] * scale:.{digits}f} (n = 1)"
    return f"{stat['mean'] * scale:.{digits}f}±{stat['std'] * scale:.{digits}f}"


def references_line(refs: dict) -> str:
    """One printed line for [`~hf_ext.tinyalign.metrics.constant_references`]' output: the training-majority class
    and the best constant caption, both chosen on the train split and scored on test."""
    return (
        f"references (chosen on the train split, scored on test): training-majority class "
        f"'{refs['majority_class']}' class-word acc {refs['majority_class_word_accuracy']:.3f}; best constant "
        f"caption '{refs['best_constant_caption']}' BLEU {refs['best_constant_caption_test_bleu']:.1f}, "
        f"class-word acc {refs['best_constant_caption_class_word_accuracy']:.3f}"
    )


def report_fields(results: dict, printed: str) -> dict:
    """What the docs renderer reads (`hf_ext.core.results_render`): the printed main table (its first block,
    `printed` being `format_table`'s output) and the data-efficiency table (token accuracy by train fraction)."""
    from hf_ext.core.results_render import markdown_tables, table

    block = printed.split("\n\n")[0].splitlines()
    main = markdown_tables(
        "Caption metrics by LM and variant (mean ± sample SD over seeds)",
        "\n".join(f"| {line} |" for line in block),
    )
    tables = [*main]
    for lm, eff in results.get("data_efficiency", {}).items():
        rows = []
        for variant, by_fraction in eff.items():
            if isinstance(by_fraction, dict) and variant != "criterion":
                for fraction, cells in by_fraction.items():
                    rows.append([variant, f"{float(fraction):.0%}", stat_cell(cells["token_accuracy"])])
        best = eff.get("smallest_fraction_matching_baseline_100")
        tables.append(
            table(
                f"Data efficiency ({lm} LM): test token accuracy by share of the training split",
                ["variant", "train fraction", "token accuracy"],
                rows,
                note=f"Smallest fraction at which TinyAlign matches the baseline at 100 %: {best} (paper: 0.4).",
            )
        )
    return {"report": tables}


def plot_curves(curves: dict[str, list[float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lms = sorted({k.split()[0] for k in curves})
    fig, axes = plt.subplots(1, len(lms), figsize=(6 * len(lms), 4), constrained_layout=True, squeeze=False)
    for ax, lm in zip(axes[0], lms):
        for name, losses in curves.items():
            if name.split()[0] == lm:
                w = 5
                smooth = np.convolve(losses, np.ones(w) / w, mode="valid") if len(losses) > w else losses
                ax.plot(
                    range(w, w + len(smooth)) if len(losses) > w else range(1, len(losses) + 1),
                    smooth,
                    label=name.split(" ", 1)[1],
                )
        ax.set_title(f"{lm} LM: training CE, stage 1 then stage 2 (mean over seeds)")
        ax.set_xlabel("step")
        ax.set_ylabel("caption cross-entropy")
        ax.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_table(results: dict) -> str:
    head = [
        "LM",
        "variant",
        "stage-1 token acc",
        "stage-1 class-word",
        *METRIC_COLUMNS,
        "steps to base CE",
    ]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for row in results["rows"]:
        m = row["metrics"]

        steps = ",".join("-" if s is None else str(s) for s in row["steps_to_baseline_final_loss"])
        s1 = row["stage1_metrics"]
        lines.append(
            " | ".join(
                [
                    row["lm"],
                    row["variant"],
                    stat_cell(s1["token_accuracy"]),
                    stat_cell(s1["class_word_accuracy"]),
                    *metric_cells(m),
                    steps,
                ]
            )
        )
    for lm, eff in results["data_efficiency"].items():
        lines.append(f"\ndata efficiency ({lm} LM, token accuracy by train fraction):")
        for v, by_f in eff.items():
            if isinstance(by_f, dict) and v != "criterion":
                lines.append(
                    f"  {v:>9}: "
                    + "  ".join(f"{float(f):.0%} {stat_cell(c['token_accuracy'])}" for f, c in by_f.items())
                )
        lines.append(
            f"  smallest fraction at which TinyAlign matches baseline-100%: "
            f"{eff['smallest_fraction_matching_baseline_100']} (paper: 0.4)"
        )
    if results.get("references"):
        lines.append("\n" + references_line(results["references"]))
    for name, v in results.get("verdict_objects", {}).items():
        metric = "class-word acc per test digit vs the training-majority class" if name.startswith("premise") else (
            "token acc")  # fmt: skip
        lines.append(f"{name}: paired Δ {metric} {v.difference.cell()} -> {v.verdict.upper()}")
    return "\n".join(lines)
