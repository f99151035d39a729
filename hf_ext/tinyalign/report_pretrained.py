"""The pretrained run's report (`hf-ext reproduce tinyalign --pretrained`): the printed table and the display
tables of its `results.json`, from `reproduce_pretrained.summarise`'s output. No model is loaded here."""

from __future__ import annotations

from .report import METRIC_COLUMNS, metric_cells, references_line, stat_cell


def format_table(summary: dict) -> str:
    head = [
        "variant",
        "n seeds",
        *METRIC_COLUMNS,
        "paired Δ test CE vs base",
    ]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for variant, row in summary["rows"].items():
        delta = row.get("paired_minus_baseline", {}).get("test_loss")
        lines.append(
            " | ".join(
                [
                    variant,
                    str(row["test_loss"]["n"]),
                    *metric_cells(row),
                    ",".join(f"{d:+.3f}" for d in delta) if delta else "-",
                ]
            )
        )
    eff = summary["data_efficiency_token_accuracy"]
    if any(len(d) > 1 for d in eff.values()):
        lines.append(
            "\ndata efficiency (test token accuracy by train fraction): "
            + "; ".join(
                f"{v}: " + ", ".join(f"{float(f):.0%} {a:.3f}" for f, a in sorted(d.items())) for v, d in eff.items()
            )
        )
        for v, d in summary.get("data_efficiency", {}).items():
            if v != "baseline" and len(d["token_accuracy"]) > 1:
                at = d["reaches_baseline_full_at"]
                lines.append(
                    f"{v} reaches the baseline's 100 % token accuracy at: "
                    + (f"{at:.0%} of the train split" if at is not None else "no fraction")
                )
    if summary.get("references"):
        lines.append(references_line(summary["references"]))
    v = summary.get("verdict", {})
    for key, label in (("paired_test_ce", "test CE"), ("paired_token_accuracy", "token acc")):
        if key in v:
            d = v[key]
            interval = "no interval" if d["ci_low"] is None else f"[{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
            lines.append(f"k4 - baseline, paired {label}: {d['mean']:+.3f} (n = {d['n']}, 95 % {interval})")
    if "data_efficiency" in v:
        e = v["data_efficiency"]
        lines.append(f"data efficiency (k4 at {e['fraction']:.0%} vs baseline at 100 %): {e['verdict'].upper()}")
    if v:
        lines.append(f"verdict (rule stated beforehand, k4): {v['k4']}")
    return "\n".join(lines)


def report_tables(summary: dict, references: dict) -> list[dict]:
    """The display tables of `results.json` (what the docs render): the variants at 100 %, the data-efficiency
    curve, the training-CE checkpoints and the image-blind references."""
    from hf_ext.core.results_schema import table

    def per_seed(values, digits=3):
        return ", ".join("-" if v is None else f"{v:+.{digits}f}" for v in values)

    rows = []
    for variant, row in summary["rows"].items():
        paired = row.get("paired_minus_baseline", {})
        steps = row.get("steps_to_baseline_final_loss")
        rows.append(
            [variant, row["test_loss"]["n"], *metric_cells(row)]
            + [per_seed(paired["test_loss"]) if paired else "-", per_seed(paired["token_accuracy"]) if paired else "-"]
            + [", ".join("-" if n is None else str(n) for n in steps) if steps else "-"]
        )
    main = table(
        "Stage 1 (LM frozen) at 100 % of the train split, by variant (mean ± sample SD over seeds; Δ = variant − "
        "baseline of the same seed, listed per seed)",
        [
            "variant",
            "seeds",
            *METRIC_COLUMNS,
            "Δ test CE per seed",
            "Δ token acc per seed",
            "steps to baseline's final train CE",
        ],  # fmt: skip
        rows,
        note="Steps to baseline's final train CE: the first step whose 5-step mean training CE reaches that seed's "
        "baseline's final value (\"-\": never). nbr class match: share of retrieved neighbours of the test item's "
        "class (chance 0.10). released-k4 is the released code's retrieval, whose training query holds the answer.",
    )
    fractions = sorted({float(f) for d in summary["data_efficiency"].values() for f in d["token_accuracy"]})
    eff_rows = []
    for variant, d in summary["data_efficiency"].items():
        if len(d["token_accuracy"]) < 2:
            continue
        at = d["reaches_baseline_full_at"]
        for metric in ("token_accuracy", "class_word_accuracy"):
            eff_rows.append(
                [variant, {"token_accuracy": "token acc", "class_word_accuracy": "class-word acc"}[metric]]
                + [stat_cell(d[metric][str(f)]) if str(f) in d[metric] else "-" for f in fractions]
                + [("no fraction" if at is None else f"{at:.0%}") if metric == "token_accuracy" else ""]
            )
    curve = summary["loss_curve"]
    steps = sorted({int(k) for c in curve.values() for k in c})
    tables = [main]
    if eff_rows:
        tables.append(
            table(
                "Data efficiency: test metrics by share of the train split (1 epoch each; mean ± sample SD over seeds)",
                ["variant", "metric", *(f"{f:.0%}" for f in fractions), "token acc reaches the baseline's 100 % at"],
                eff_rows,
            )
        )
    tables += [
        table(
            "Training CE at a step (5-step mean ending there, mean over seeds, 100 % of the train split)",
            ["variant", *(f"step {n}" for n in steps)],
            [[v, *(f"{c[str(n)]:.2f}" if str(n) in c else "-" for n in steps)] for v, c in curve.items()],
        ),
        table(
            "Image-blind references (every choice made on the train split, scored on test)",
            ["reference", "caption", "class-word acc", "BLEU"],
            [
                [
                    "training-majority class",
                    references["majority_class"],
                    f"{references['majority_class_word_accuracy']:.3f}",
                    "-",
                ],
                [
                    "best constant caption (by BLEU on the train captions)",
                    references["best_constant_caption"],
                    f"{references['best_constant_caption_class_word_accuracy']:.3f}",
                    f"{references['best_constant_caption_test_bleu']:.1f}",
                ],
            ],  # fmt: skip
        ),
    ]
    return tables


__all__ = ["format_table", "report_tables"]
