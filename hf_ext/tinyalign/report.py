"""Table cells of TinyAlign's reproductions, over seeds through [`hf_ext.core.reporting.summarize`] (mean ± sample
SD); no spread is computed here."""

from __future__ import annotations

import math

from hf_ext.core.reporting import summarize


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
