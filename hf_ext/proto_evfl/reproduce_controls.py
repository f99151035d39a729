"""The controls that come before Proto-EVFL's verdicts in `hf-ext reproduce proto_evfl`.

* **Positive control of the long-tail claim**: the *oracle lower level* (`selection="oracle"`: the unaligned pool's
  true labels feed the prototype-contrastive loss, every row kept). If even true labels on the unaligned pool do not
  beat vanilla VFL (the 95 % interval of the paired difference excludes 0), the setting cannot reward any
  pseudo-labelling, and "Proto-EVFL beats vanilla VFL" is *premise absent*, not refuted.
* **Positive control of the zero-shot claim**: the oracle unseen prototype (`P_u` set to the mean fused test feature
  of the unseen class; [`~hf_ext.proto_evfl.baselines.oracle_unseen_metrics`]) must find the unseen class above
  chance: otherwise the features cannot separate it and the claim cannot be decided.
* **Every class unseen in turn** (`--unseen_classes`): per class and seed the unseen class's recall and precision,
  pooled into a one-sided binomial test against chance (`1 / C` recall of a uniform guess), so the zero-shot verdict
  rests on 10 × seeds runs instead of one class per seed.
"""

from __future__ import annotations

import numpy as np

from hf_ext.core.reporting import Premise, VerdictRule, paired_difference

ORACLE_VARIANT = "oracle_lower"
POSITIVE_CONTROL = "the oracle lower level (true labels on the unaligned pool) beats vanilla VFL (95 % interval > 0)"
ZERO_SHOT_CONTROL = "the oracle unseen prototype finds the unseen class above chance (95 % interval > 0)"
UNSEEN_SWEEP_RULE = VerdictRule(
    claim="Proto-EVFL recognises a never-labelled class above chance, every class unseen in turn",
    metric="unseen-class recall − chance, over classes × seeds",
    premise=ZERO_SHOT_CONTROL,
)


def combine(*premises: Premise) -> Premise:
    """One premise that holds when all do (the rule prints one line)."""
    return Premise(
        "; ".join(p.name for p in premises),
        all(p.passed for p in premises),
        "; ".join(p.detail for p in premises),
    )


def long_tail_control(cell: dict[str, dict]) -> Premise:
    """The positive control of one (dataset, long-tail, IR) cell, from its rows by variant."""
    if ORACLE_VARIANT not in cell or "vanilla_vfl" not in cell:
        return Premise(POSITIVE_CONTROL, False, "the oracle lower level was not run (pass it in --variants)")
    a = [m["accuracy"] for m in cell[ORACLE_VARIANT]["per_seed"]]
    b = [m["accuracy"] for m in cell["vanilla_vfl"]["per_seed"]]
    if len(a) < 2:
        return Premise(POSITIVE_CONTROL, False, "one seed: no interval")
    d = paired_difference(a, b)
    detail = f"oracle − vanilla {100 * d.mean:+.1f} points [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}]"
    return Premise(POSITIVE_CONTROL, d.ci_low > 0, detail)


def zero_shot_control(proto_row: dict, chance: float) -> Premise:
    """The oracle unseen prototype above chance over the seeds of Proto-EVFL's zero-shot runs."""
    values = [m["oracle_unseen_accuracy"] for m in proto_row["per_seed"] if "oracle_unseen_accuracy" in m]
    if len(values) < 2:
        return Premise(ZERO_SHOT_CONTROL, False, "fewer than 2 runs with the oracle prototype")
    d = paired_difference(values, [chance] * len(values))
    return Premise(ZERO_SHOT_CONTROL, d.ci_low > 0, f"oracle-P_u unseen recall {100 * (d.mean + chance):.1f} % "
                   f"vs chance {100 * chance:.0f} % [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}]")  # fmt: skip


def unseen_class_stats(labels: np.ndarray, predictions: np.ndarray, unseen: int) -> dict[str, float]:
    """Recall and precision of the never-labelled class, with the counts the binomial test pools."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    rows, predicted = labels == unseen, predictions == unseen
    hits = int((predictions[rows] == unseen).sum())
    return {
        "unseen_class": int(unseen),
        "unseen_recall": hits / max(int(rows.sum()), 1),
        "unseen_precision": float((labels[predicted] == unseen).mean()) if predicted.any() else 0.0,
        "unseen_hits": hits,
        "unseen_rows": int(rows.sum()),
        "unseen_predicted": int(predicted.sum()),
    }


def binomial_above_chance(hits: int, rows: int, chance: float) -> float:
    """One-sided p-value of `hits` recalled out of `rows` unseen-class rows under recall = `chance`."""
    from scipy.stats import binomtest

    if rows <= 0:
        raise ValueError("no unseen-class rows to test")
    return float(binomtest(hits, rows, chance, alternative="greater").pvalue)


def decide_unseen_sweep(runs: list[dict], chance: float, premise: Premise, alpha: float = 0.05) -> dict:
    """The zero-shot verdict over every (class, seed) run: the paired difference of recall − chance (t interval over
    runs) decides by [`UNSEEN_SWEEP_RULE`]; the pooled binomial test must agree for *confirmed* (else
    *inconclusive*, saying so)."""
    if not runs:
        raise ValueError("the unseen-class sweep has no runs")
    recalls = [r["unseen_recall"] for r in runs]
    d = paired_difference(recalls, [chance] * len(recalls))
    hits, rows = sum(r["unseen_hits"] for r in runs), sum(r["unseen_rows"] for r in runs)
    p = binomial_above_chance(hits, rows, chance)
    verdict = UNSEEN_SWEEP_RULE.decide(d, premise).to_dict()
    if verdict["verdict"] == "confirmed" and p >= alpha:
        verdict.update(verdict="inconclusive", reason=verdict["reason"] + f"; the pooled binomial test disagrees "
                       f"(p = {p:.3g})")  # fmt: skip
    per_class = {}
    for c in sorted({r["unseen_class"] for r in runs}):
        mine = [r for r in runs if r["unseen_class"] == c]
        per_class[c] = {
            "recall": float(np.mean([r["unseen_recall"] for r in mine])),
            "precision": float(np.mean([r["unseen_precision"] for r in mine])),
            "runs": len(mine),
        }
    return {"verdict": verdict, "recall_minus_chance": d.to_dict(), "pooled_hits": hits, "pooled_rows": rows,
            "binomial_p": p, "per_class": per_class}  # fmt: skip


def format_unseen_sweep(sweep: dict, chance: float) -> str:
    lines = ["| unseen class | recall | precision | runs |", "|---|---|---|---|"]
    for c, row in sweep["per_class"].items():
        lines.append(f"| {c} | {100 * row['recall']:.1f} | {100 * row['precision']:.1f} | {row['runs']} |")
    d = sweep["recall_minus_chance"]
    lines.append(
        f"pooled: {sweep['pooled_hits']} / {sweep['pooled_rows']} unseen rows recalled "
        f"({100 * sweep['pooled_hits'] / sweep['pooled_rows']:.1f} % vs chance {100 * chance:.0f} %), one-sided "
        f"binomial p = {sweep['binomial_p']:.3g}; recall − chance {100 * d['mean']:+.1f} points "
        f"[{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}] over {d['n']} runs"
    )
    v = sweep["verdict"]
    lines.append(f"{v['claim']}: {v['verdict'].upper()} ({v['reason']})")
    return "\n".join(lines)
