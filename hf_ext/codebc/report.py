"""What `hf-ext reproduce codebc` reports: the verdict rules (printed before the run), their decisions, the printed
tables and the `results.json` fields the docs renderer reads.

The two verdicts read the compile-free probe ([`~hf_ext.codebc.probe`]): a stage's AUROC (injected vs secure
held-out contracts) minus the **base** model's on the same bootstrap resamples of host contracts. The base never saw
a security tag, so it is the control: whatever it ranks by chance (length, style) is subtracted.
"""

from __future__ import annotations

from hf_ext.core.reporting import PairedDifference, Premise, VerdictRule

from .inject import injected_patterns
from .probe import bootstrap_auroc

PROBE_PREMISE = (
    "the probe's labels are real: the injected-pattern recogniser flags every injected probe contract and no secure one"
)
RULES = {
    "steering": VerdictRule(
        claim="Tag steering: after TI the `bug` tag makes injected code relatively more likely than secure code",
        metric="AUROC of Δ = log p(code | bug tag) − log p(code | correct tag), injected vs secure held-out "
        "contracts, stage TI − base (bootstrap over host contracts)",
        margin=0.0,
        premise=PROBE_PREMISE,
    ),
    "vd": VerdictRule(
        claim="Vulnerability detection: after VD the bug / correct log-odds ranks injected above secure contracts",
        metric="AUROC of log p(bug) − log p(correct) after the VD prompt, injected vs secure held-out contracts, "
        "stage VD − base (bootstrap over host contracts)",
        margin=0.0,
        premise=PROBE_PREMISE,
    ),
}
RULE_STAGE = {"steering": ("TI", "delta"), "vd": ("VD", "vd_log_odds")}


def probe_premise(probe: list[dict]) -> Premise:
    """[`PROBE_PREMISE`] measured on the probe rows."""
    inj = [bool(injected_patterns(r["code"])) for r in probe if r["injected"]]
    sec = [bool(injected_patterns(r["code"])) for r in probe if not r["injected"]]
    ok = bool(inj) and bool(sec) and all(inj) and not any(sec)
    return Premise(PROBE_PREMISE, ok, f"flagged {sum(inj)}/{len(inj)} injected, {sum(sec)}/{len(sec)} secure")


def stage_difference(probe: list[dict], stages: dict, stage: str, key: str) -> PairedDifference:
    """AUROC(`stage`) − AUROC(base) of the per-contract scores `key` (`delta` or `vd_log_odds`), bootstrapped over
    the probe's host contracts (the same resamples for both)."""
    labels = [int(r["injected"]) for r in probe]
    hosts = [r["host"] for r in probe]
    return bootstrap_auroc(stages[stage]["probe"][key], labels, hosts, stages["base"]["probe"][key])


def decide(r: dict, probe: list[dict]) -> list[dict]:
    """The verdicts of [`RULES`] on a finished run (`r["stages"]` with each stage's `probe` scores)."""
    premise = probe_premise(probe)
    out = []
    for name, rule in RULES.items():
        stage, key = RULE_STAGE[name]
        if stage not in r["stages"] or "probe" not in r["stages"][stage]:
            continue
        out.append(rule.decide(stage_difference(probe, r["stages"], stage, key), premise).to_dict())
    return out


def _auc_cell(d: dict | None) -> str:
    """`"0.62 [0.48, 0.75]"` from a stored AUROC − 0.5 difference."""
    if not d:
        return "n/a"
    lo, hi = d["ci_low"], d["ci_high"]
    ci = "" if lo is None else f" [{lo + 0.5:.2f}, {hi + 0.5:.2f}]"
    return f"{d['mean'] + 0.5:.2f}{ci}"


def _parse_cell(p: dict | None, fit: bool = False) -> str:
    if not p:
        return "n/a"
    k, n, c = ("fit_passed", "fit_total", "fit_ci95") if fit else ("passed", "total", "ci95")
    return f"{p[k]}/{p[n]} [{_pct(p[c][0]).strip()}, {_pct(p[c][1]).strip()}]"


def probe_rows(r: dict) -> list[list[str]]:
    return [
        [k, _auc_cell(ev.get("probe", {}).get("delta_auroc")), _auc_cell(ev.get("probe", {}).get("vd_auroc")),
         _parse_cell(ev.get("parse")), _parse_cell(ev.get("parse"), fit=True)]
        for k, ev in r["stages"].items()
    ]  # fmt: skip


PROBE_COLUMNS = ["stage", "Δ AUROC (tag steering)", "VD log-odds AUROC", "parser pass (all)", "parser pass (fit)"]


def _pct(x) -> str:
    return "  n/a" if x is None else f"{100 * x:5.1f}"


def _vd_cell(v: dict | None) -> str:
    if not v:
        return "n/a"
    return f"{v['correct']}/{v['total']} (const {v['constant_correct']})"


def format_table(r: dict) -> str:
    lines = [
        "Stage ablation (Blockchain-HumanEval, forced `correct` tag; VD: accuracy, constant predictor in brackets)",
        "stage | BLEU  | CodeBLEU | compiled [95% CI %]        | vuln (High/Med) | VD held-out       | VD Slither "
        "tests",
    ]
    for k, ev in r["stages"].items():
        s = ev["humaneval"]
        lo, hi = s["compile_rate_ci95"]
        vuln = "n/a" if s["vulnerability_rate"] is None else f"{s['vulnerable']}/{s['analysed']}"
        lines.append(
            f"{k:5} | {s['bleu']:5.2f} | {s['codebleu']:8.2f} | {s['compiled']:3d}/{s['total']:<3d} "
            f"[{_pct(lo)}, {_pct(hi)}]       | {vuln:15} | {_vd_cell(ev.get('vd_heldout')):17} | "
            f"{_vd_cell(ev.get('vd_real'))}"
        )
    lines += [
        "",
        "Tag steering (TI adapter; vulnerability rate among compiled outputs, 95% CI)",
        "condition        | compiled | vuln (High/Med of analysed) | injected-pattern HE | injected-pattern held-out",
    ]
    for k, v in r["steering"].items():
        h, o = v["humaneval"], v["heldout"]
        if h["vulnerability_rate"] is None:
            vuln = "n/a"
        else:
            lo, hi = h["vulnerability_rate_ci95"]
            vuln = f"{h['vulnerable']}/{h['analysed']} [{_pct(lo)}, {_pct(hi)}]"
        lines.append(
            f"{k:16} | {h['compiled']:3d}/{h['total']:<4d}| {vuln:27} | {h['injected_pattern_files']:3d}/"
            f"{h['total']:<15d} | {o['injected_pattern_files']}/{o['total']}"
        )
    agree = r["data"]["slither_agreement_per_pattern"]
    lines += [
        "",
        "Slither agreed with the injection (flagged High/Medium): "
        + ", ".join(f"{p} {a}/{n}" for p, (a, n) in agree.items()),
        "secure corpus contracts flagged by Slither 0.11.6: {}/{}".format(
            *r["data"]["secure_contracts_flagged_by_slither"]
        ),
        "mean training loss per stage: " + ", ".join(f"{k} {v:.3f}" for k, v in r["losses"].items()),
        "",
        probe_title(r),
        " | ".join(PROBE_COLUMNS),
    ]
    lines += [" | ".join(row) for row in probe_rows(r)]
    lines += ["", *(f"{v['claim']}: {v['verdict'].upper()} ({v['reason']})" for v in r.get("verdicts", []))]
    return "\n".join(lines)


def probe_title(r: dict) -> str:
    p = r["data"].get("probe", {})
    return (
        f"Measured without compilation (held-out probe: {p.get('hosts', 0)} host contracts, each secure + one "
        f"injected copy; AUROC with a 95 % bootstrap interval over hosts; parser pass = solc parses the "
        f"forced-`correct` Blockchain-HumanEval output, all tasks / the {p.get('fit_tasks', 0)} tasks whose "
        f"reference fits {p.get('max_new_tokens')} new tokens)"
    )


def report_fields(r: dict) -> dict:
    """What the docs renderer reads (`hf_ext.core.results_render`): the stage-ablation, tag-steering and compile-free
    probe tables as printed, the rules and verdicts (`r["rules"]`, `r["verdicts"]`), where and when it was
    measured, and a headline."""
    from hf_ext.core.reporting import RESULTS_SCHEMA_VERSION, environment
    from hf_ext.core.results_render import table

    def ci(rate_ci) -> str:
        lo, hi = rate_ci
        return f"[{_pct(lo).strip()}, {_pct(hi).strip()}]"

    stages = []
    for k, ev in r["stages"].items():
        s = ev["humaneval"]
        vuln = "n/a" if s["vulnerability_rate"] is None else f"{s['vulnerable']}/{s['analysed']}"
        stages.append([k, f"{s['bleu']:.2f}", f"{s['codebleu']:.2f}", f"{s['compiled']}/{s['total']} "
                       f"{ci(s['compile_rate_ci95'])}", vuln, _vd_cell(ev.get("vd_heldout")),
                       _vd_cell(ev.get("vd_real"))])  # fmt: skip
    steering = []
    for k, v in r.get("steering", {}).items():
        h, o = v["humaneval"], v["heldout"]
        vuln = "n/a" if h["vulnerability_rate"] is None else (
            f"{h['vulnerable']}/{h['analysed']} {ci(h['vulnerability_rate_ci95'])}")  # fmt: skip
        steering.append([k, f"{h['compiled']}/{h['total']}", vuln, f"{h['injected_pattern_files']}/{h['total']}",
                         f"{o['injected_pattern_files']}/{o['total']}"])  # fmt: skip
    tables = [
        table(
            "Stage ablation (Blockchain-HumanEval, forced `correct` tag)",
            [
                "stage",
                "BLEU",
                "CodeBLEU",
                "compiled [95 % CI %]",
                "vuln (High/Med)",
                "VD held-out",
                "VD Slither tests",
            ],  # fmt: skip
            stages,
            note="VD: accuracy, the constant predictor in brackets.",
            plot={"x": "stage", "y": ["BLEU", "CodeBLEU"], "kind": "bar", "ylabel": "score"},
        ),
        table(
            "Tag steering (TI adapter; vulnerability rate among compiled outputs, 95 % CI)",
            [
                "condition",
                "compiled",
                "vuln (High/Med of analysed)",
                "injected-pattern HE",
                "injected-pattern held-out",
            ],
            steering,
        ),
        table(probe_title(r), PROBE_COLUMNS, probe_rows(r), note="AUROC 0.50 = chance; base = the control."),
    ]
    last = list(r["stages"])[-1]
    s = r["stages"][last]["humaneval"]
    words = "; ".join(f"{v['claim'].split(':')[0]} {v['verdict']}" for v in r.get("verdicts", []))
    headline = (
        f"{words or 'no verdict'} (compile-free probe); stage {last}: BLEU {s['bleu']:.1f}, CodeBLEU "
        f"{s['codebleu']:.1f}, {s['compiled']}/{s['total']} compile"
    )
    return {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "method": "codebc",
        "scale": r["mode"],
        "environment": environment(),
        "rules": r.get("rules", []),
        "verdicts": r.get("verdicts", []),
        "headline": headline,
        "report": tables,
    }
