"""Seed summaries, paired differences and the stated verdict rules of `hf-ext reproduce fede4rag`, all through
[`hf_ext.core.reporting`] (mean ± sample SD; paired per-seed differences with a 95 % Student-t interval). Nothing
here computes a spread of its own.

A summary row is `{"mean": {metric: ...}, "sd": {metric: ...}, "per_seed": [...]}`; a difference row adds
`"ci_low"` / `"ci_high"` per metric (`None` with fewer than two seeds).
"""

from __future__ import annotations

import math

from hf_ext.core.reporting import Premise, VerdictRule, paired_difference, summarize


def _common_keys(rows: list[dict[str, float]]) -> list[str]:
    return [k for k in rows[0] if all(k in r for r in rows)]


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) else x


def seed_summary(rows: list[dict[str, float]]) -> dict:
    """Mean ± sample SD over seeds of every metric the rows share ([`~hf_ext.core.reporting.summarize`])."""
    stats = {k: summarize([r[k] for r in rows]) for k in _common_keys(rows)}
    return {
        "mean": {k: s.mean for k, s in stats.items()},
        "sd": {k: _none_if_nan(s.sd) for k, s in stats.items()},
        "per_seed": rows,
    }


def seed_differences(a: list[dict[str, float]], b: list[dict[str, float]]) -> dict:
    """Paired per-seed `a − b` of every shared metric ([`~hf_ext.core.reporting.paired_difference`]): mean, sample
    SD and the 95 % t interval; `per_seed` keeps the differences."""
    keys = [k for k in _common_keys(a) if all(k in r for r in b)]
    diffs = {k: paired_difference([r[k] for r in a], [r[k] for r in b]) for k in keys}
    return {
        "mean": {k: d.mean for k, d in diffs.items()},
        "sd": {k: _none_if_nan(d.sd) for k, d in diffs.items()},
        "ci_low": {k: _none_if_nan(d.ci_low) for k, d in diffs.items()},
        "ci_high": {k: _none_if_nan(d.ci_high) for k, d in diffs.items()},
        "per_seed": [dict(zip(keys, v, strict=True)) for v in zip(*(d.per_pair for d in diffs.values()), strict=True)],
    }


def cell(row: dict, key: str, *, signed: bool = False, interval: bool = False) -> str:
    """A table cell from a summary or difference row: `"0.412 ± 0.031"` (`"0.412 (n = 1)"` for one seed), signed for
    differences, with the 95 % interval appended when asked and available."""
    mean, sd = row["mean"][key], row["sd"][key]
    text = f"{mean:+.3f}" if signed else f"{mean:.3f}"
    text += f" (n = {len(row['per_seed'])})" if sd is None else f" ± {sd:.3f}"
    if interval and row.get("ci_low", {}).get(key) is not None:
        text += f" [{row['ci_low'][key]:+.3f}, {row['ci_high'][key]:+.3f}]"
    return text


# The criteria stated before the runs (README, "What would confirm or refute the paper"), on own-company MRR,
# paired over seeds; "differences larger than their spread" is now "the 95 % t interval excludes 0".
METRIC = "own.mrr"
PREMISE = "training helps at all: centralized − zero-shot own MRR > 0 (mean over seeds)"
RULES: dict[tuple[str, str], VerdictRule] = {
    ("centralized", "zero-shot"): VerdictRule(
        claim="centralized beats zero-shot (τ = 0.05)", metric="own MRR, centralized − zero-shot"
    ),
    ("fedavg", "zero-shot"): VerdictRule(
        claim="federated training beats zero-shot in-domain", metric="own MRR, FedAvg − zero-shot", premise=PREMISE
    ),
    ("fedavg", "local-only"): VerdictRule(
        claim="FedAvg beats local-only", metric="own MRR, FedAvg − local-only", premise=PREMISE
    ),
    ("fede4rag", "fedavg"): VerdictRule(
        claim="FedE4RAG (KD) is at least FedAvg", metric="own MRR, FedE4RAG − FedAvg", premise=PREMISE
    ),
}


def rules_for(settings) -> list[VerdictRule]:
    """The rules whose two arms are both run."""
    return [r for (a, b), r in RULES.items() if a in settings and b in settings]


def decide(flat: dict, settings, seeds) -> list:
    """Each applicable rule decided on the paired per-seed own MRR; `flat` maps `(setting, seed)` to flat metrics."""

    def arm(s):
        return [flat[(s, seed)][METRIC] for seed in seeds]

    premise = None
    if "centralized" in settings and "zero-shot" in settings:
        d = paired_difference(arm("centralized"), arm("zero-shot"))
        premise = Premise(PREMISE, d.mean > 0, f"centralized − zero-shot own MRR {d.mean:+.3f}")
    else:
        premise = Premise(PREMISE, False, "centralized or zero-shot was not run")
    out = []
    for (a, b), rule in RULES.items():
        if a in settings and b in settings:
            d = paired_difference(arm(a), arm(b))
            out.append(rule.decide(d, premise if rule.premise else None))
    return out


__all__ = ["RULES", "cell", "decide", "rules_for", "seed_differences", "seed_summary"]


COLUMNS = {
    "own.hit@1": "own hit@1",
    "own.hit@10": "own hit@10",
    "own.mrr": "own MRR",
    "union.hit@1": "union hit@1",
    "union.mrr": "union MRR",
    "micro.hit@1": "micro hit@1",
    "fb.hit@1": "FB hit@1",
    "fb.mrr": "FB MRR",
}


def report_fields(results: dict) -> dict:
    """What the docs renderer reads (`hf_ext.core.results_render`): the printed per-setting table (mean ± sample SD
    over seeds) and the paired differences to zero-shot with their 95 % t intervals."""
    from hf_ext.core.results_render import table

    rows, diffs = [], []
    for setting, r in results["settings"].items():
        steps = r["steps"][0]
        rows.append([setting, f"{steps['total']} ({steps['sequential']})", *(cell(r, c) for c in COLUMNS)])
        d = r.get("minus_zero-shot")
        if d:
            diffs.append(
                [setting, *(cell(d, c, signed=True, interval=True) for c in ("own.mrr", "union.mrr", "fb.mrr"))]
            )
    tables = [
        table(
            f"Retrieval by setting (mean ± sample SD over seeds {results['seeds']})",
            ["setting", "steps (sequential)", *COLUMNS.values()],
            rows,
            note="own: each client's own questions; union: every client's; FB: FinanceBench questions. Steps are "
            "gradient steps in total over clients (the sequential chain in brackets).",
        )
    ]
    if diffs:
        tables.append(
            table(
                "Paired per-seed difference to zero-shot (mean ± sample SD [95 % t interval])",
                ["setting", "own MRR", "union MRR", "FB MRR"],
                diffs,
            )
        )
    return {"report": tables}
