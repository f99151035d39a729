"""`hf-ext codebc score`: scores a folder of generated contracts like the CodeBC paper does.

Files are named like the released outputs, `<Task>.txt_<k>.sol` (sample `k` of Blockchain-HumanEval task `<Task>`);
the reference of `<Task>` is `<Task>_clean.sol` (or `<Task>.sol`) in the references folder, by default the shipped
Blockchain-HumanEval `clean_code/`. Reported:

- `bleu`, `codebleu`: mean over samples × 100 (see [`~hf_ext.codebc.metrics`]);
- `compiled` / `total`: files solc-js 0.8.37 compiles (bytecode generation included, warnings allowed);
- `vulnerability_rate`: share of **compiled** files on which Slither (all detectors, through the solc-js shim)
  reports at least one **High or Medium** impact finding. The paper's exact formula is unknown (its released logs
  only hold `--print human-summary` counts); this is the definition used throughout hf_ext.codebc.

A file that cannot be read, has no reference, does not compile, asks for another compiler version, or crashes the
analyser is reported in `files` with its reason; the run goes on.

Without `--json` the command prints a per-file table first ([`format_files`]: file, verdict — `not compiled
(<reason>)`, `vulnerable`, `clean` — BLEU, CodeBLEU, and the Slither detectors that fired with their impact, or the
first compiler error), then the summary; `--no-files` prints the summary only.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections import Counter
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser

from .data import default_references_dir
from .metrics import bleu, codebleu_scores, wilson_interval
from .solidity import AnalysisResult, SolcServer, analyze, analyze_many, default_workers

LOG = logging.getLogger(__name__)

CODEBLEU_COMPONENTS = ("ngram_match_score", "weighted_ngram_match_score", "syntax_match_score", "dataflow_match_score")
# codebleu 0.7.0 computes theta * (dataflow or 1): an empty prediction scores 25.00 and a lone
# `pragma solidity ^0.8.20;` 33.23, so CodeBLEU values near 25 mean "nothing in common", not "a quarter right".
CODEBLEU_EMPTY_FLOOR = 25.0

NAME = re.compile(r"^(?P<task>.+)\.txt_(?P<k>\d+)\.sol$")


def find_reference(task: str, references: Path) -> Path | None:
    for cand in (references / f"{task}_clean.sol", references / f"{task}.sol"):
        if cand.is_file():
            return cand
    return None


def score_sources(
    predictions: dict[str, str],
    references: dict[str, str | None],
    *,
    analyse: bool = True,
    server: SolcServer | None = None,
    text_metrics: bool = True,
    workers: int | None = None,
) -> dict:
    """Scores in-memory contracts. `predictions` maps file name to source; `references` file name to reference text
    (`None`: no reference, so no BLEU/CodeBLEU for that file); `text_metrics=False` skips BLEU and CodeBLEU.
    Slither runs over `workers` processes (default: the available cores; `1`: in this process).
    Returns the summary dict with per-file `files`."""
    own = server is None
    server = server or SolcServer()
    files: dict[str, dict] = {}
    try:
        for name, src in predictions.items():
            res = server.compile(src, name)
            files[name] = {
                "compiled": res.ok,
                "compile_reason": res.reason,
                "compile_errors": [e.splitlines()[0] for e in res.errors][:3],
            }
    finally:
        if own:
            server.close()
    scored = [n for n in predictions if references.get(n) is not None] if text_metrics else []
    for n in scored:
        files[n]["bleu"] = 100 * bleu(references[n], predictions[n])
    for n, cb in zip(scored, codebleu_scores([references[n] for n in scored], [predictions[n] for n in scored])):
        files[n]["codebleu"] = 100 * cb["codebleu"] if cb is not None else None  # None: CodeBLEU crashed on it
        if cb is not None:
            files[n]["codebleu_components"] = {k: 100 * cb[k] for k in CODEBLEU_COMPONENTS if k in cb}
    with_codebleu = [n for n in scored if files[n]["codebleu"] is not None]
    compiled = [n for n in predictions if files[n]["compiled"]]
    analysed = vulnerable = 0
    impacts: Counter = Counter()
    if analyse:
        verdicts = analyse_all({n: predictions[n] for n in compiled}, workers)
        for n in compiled:
            a = verdicts[n]
            files[n]["analysis"] = {
                "ok": a.ok,
                "reason": a.reason,
                "counts": a.counts,
                "checks": sorted(a.checks),
                # each detector once, at its highest impact (what the per-file table prints)
                "findings": _findings(a.findings),
                "error": a.error and a.error.splitlines()[0][:300],
            }
            if a.ok:
                analysed += 1
                vulnerable += a.vulnerable
                impacts.update(a.counts)
    total = len(predictions)
    summary = {
        "total": total,
        "scored": len(scored),
        "bleu": sum(files[n]["bleu"] for n in scored) / len(scored) if scored else None,
        "codebleu": sum(files[n]["codebleu"] for n in with_codebleu) / len(with_codebleu) if with_codebleu else None,
        "codebleu_failed": len(scored) - len(with_codebleu),
        "codebleu_components": {
            k: sum(files[n]["codebleu_components"][k] for n in with_codebleu) / len(with_codebleu)
            for k in CODEBLEU_COMPONENTS
            if with_codebleu and all(k in files[n]["codebleu_components"] for n in with_codebleu)
        },
        "codebleu_empty_floor": CODEBLEU_EMPTY_FLOOR,
        "compiled": len(compiled),
        "compile_rate": len(compiled) / total if total else None,
        "compile_rate_ci95": list(wilson_interval(len(compiled), total)),
        "analysed": analysed if analyse else None,
        "vulnerable": vulnerable if analyse else None,
        "vulnerability_rate": (vulnerable / analysed if analysed else None) if analyse else None,
        "vulnerability_rate_ci95": list(wilson_interval(vulnerable, analysed)) if analyse and analysed else None,
        "vulnerability_definition": "share of compiled files with >= 1 Slither High or Medium finding",
        "impact_counts": dict(impacts) if analyse else None,
        "failure_reasons": dict(Counter(f["compile_reason"] for f in files.values() if not f["compiled"])),
        "files": files,
    }
    return summary


IMPACT_ORDER = ("High", "Medium", "Low", "Informational", "Optimization")


def _findings(findings: list[dict]) -> list[dict]:
    """`{"check", "impact"}` per Slither detector that fired, at its highest impact, most severe first."""
    rank = {impact: i for i, impact in enumerate(IMPACT_ORDER)}
    best: dict[str, str] = {}
    for f in findings:
        check, impact = f.get("check"), f.get("impact")
        if check and (check not in best or rank.get(impact, 99) < rank.get(best[check], 99)):
            best[check] = impact
    return [{"check": c, "impact": i} for c, i in sorted(best.items(), key=lambda x: (rank.get(x[1], 99), x[0]))]


def _analyse_here(name: str, source: str) -> AnalysisResult:
    try:
        return analyze(source, name)
    except Exception as err:  # noqa: BLE001 - analyze() reports per file; anything else must not end the run
        return AnalysisResult(name, False, "analyser_crash", error=f"{type(err).__name__}: {err}")


def analyse_all(sources: dict[str, str], workers: int | None = None) -> dict[str, AnalysisResult]:
    """Slither's verdict per file: over a process pool ([`~hf_ext.codebc.solidity.analyze_many`]) when `workers`
    is not 1, else one by one in this process; a pool that breaks (a worker killed) falls back to the latter."""
    workers = default_workers() if workers is None else workers
    if workers > 1 and len(sources) > 1:
        try:
            return analyze_many(sources, workers)
        except Exception as err:  # noqa: BLE001 - e.g. BrokenProcessPool: redo the files here, one by one
            LOG.warning("parallel Slither failed (%s: %s); analysing one file at a time", type(err).__name__, err)
    return {n: _analyse_here(n, src) for n, src in sources.items()}


def score_folder(
    predictions_dir: str | Path,
    references_dir: str | Path | None = None,
    *,
    analyse: bool = True,
    server: SolcServer | None = None,
    workers: int | None = None,
) -> dict:
    """Scores every `*.sol` in `predictions_dir` (see the module docstring); unreadable files are reported."""
    pred_dir = Path(predictions_dir)
    if not pred_dir.is_dir():
        raise FileNotFoundError(f"predictions folder {pred_dir} does not exist")
    ref_dir = Path(references_dir) if references_dir else default_references_dir()
    if not ref_dir.is_dir():
        raise FileNotFoundError(f"references folder {ref_dir} does not exist")
    predictions, references, problems, skipped = {}, {}, {}, []
    for path in sorted(pred_dir.glob("*.sol")):
        if not path.is_file():  # a folder named X.sol, a dangling symbolic link: not a sample
            skipped.append(path.name)
            continue
        try:
            predictions[path.name] = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as err:
            problems[path.name] = {"compiled": False, "compile_reason": "unreadable", "compile_errors": [str(err)]}
            continue
        m = NAME.match(path.name)
        ref = find_reference(m["task"], ref_dir) if m else None
        references[path.name] = ref.read_text(encoding="utf-8") if ref else None
        if ref is None:
            problems.setdefault(path.name, {})["reference"] = (
                "file name is not <Task>.txt_<k>.sol" if m is None else f"no reference for task {m['task']!r}"
            )
    if not predictions and not problems:
        raise FileNotFoundError(
            f"no <Task>.txt_<k>.sol files in {pred_dir}"
            + (f" (skipped, not files: {', '.join(skipped)})" if skipped else "")
        )
    summary = score_sources(predictions, references, analyse=analyse, server=server, workers=workers)
    summary["skipped_not_files"] = skipped
    for name, info in problems.items():
        if name in summary["files"]:
            summary["files"][name].update(info)
        else:  # unreadable: counts as a sample that did not compile
            summary["files"][name] = info
            summary["total"] += 1
            summary["failure_reasons"]["unreadable"] = summary["failure_reasons"].get("unreadable", 0) + 1
    if problems:
        summary["compile_rate"] = summary["compiled"] / summary["total"]
        summary["compile_rate_ci95"] = list(wilson_interval(summary["compiled"], summary["total"]))
    summary["predictions"] = str(pred_dir)
    summary["references"] = str(ref_dir)
    return summary


def format_summary(s: dict) -> str:
    def f(x, spec=".2f"):
        return "n/a" if x is None else format(x, spec)

    lines = [
        f"files: {s['total']}  (with reference: {s['scored']})",
        f"BLEU: {f(s['bleu'])}   CodeBLEU: {f(s['codebleu'])}  (an empty output scores {s['codebleu_empty_floor']:g})",
        f"compiled: {s['compiled']}/{s['total']} = {f(s['compile_rate'] and 100 * s['compile_rate'], '.1f')}%",
    ]
    if s["vulnerability_rate"] is not None or s["analysed"] is not None:
        lines.append(
            f"vulnerability rate (High/Medium, of {s['analysed']} analysed): {s['vulnerable']}/"
            f"{s['analysed']} = {f(s['vulnerability_rate'] and 100 * s['vulnerability_rate'], '.1f')}%"
        )
    if s.get("codebleu_components"):
        lines.append(
            "CodeBLEU components: "
            + ", ".join(
                f"{k.removesuffix('_score').replace('_', ' ')} {v:.2f}" for k, v in s["codebleu_components"].items()
            )
        )
    if s.get("skipped_not_files"):
        lines.append("skipped (not files): " + ", ".join(s["skipped_not_files"]))
    if s["failure_reasons"]:
        lines.append("not compiled: " + ", ".join(f"{k} {v}" for k, v in sorted(s["failure_reasons"].items())))
    return "\n".join(lines)


def file_verdict(info: dict) -> str:
    """One file's verdict: `not compiled (<reason>)`, `vulnerable` (a High or Medium Slither finding), `clean`,
    `compiled` (not analysed: `--no-analyse`) or `compiled, not analysed (<reason>)`."""
    if not info.get("compiled"):
        return f"not compiled ({info.get('compile_reason') or 'unknown'})"
    analysis = info.get("analysis")
    if analysis is None:
        return "compiled"
    if not analysis.get("ok"):
        return f"compiled, not analysed ({analysis.get('reason') or 'unknown'})"
    counts = analysis.get("counts") or {}
    return "vulnerable" if any(counts.get(i, 0) for i in ("High", "Medium")) else "clean"


def file_findings(info: dict, width: int = 160) -> str:
    """What a reader needs next to the verdict: the first compiler error of a file that did not compile, else the
    Slither detectors that fired with their impact (`reentrancy-eth (High), tx-origin (Medium)`), `none`, or `-`
    when not analysed; a missing reference is named first."""
    if not info.get("compiled"):
        errors = info.get("compile_errors") or []
        text = errors[0] if errors else "-"
    else:
        analysis = info.get("analysis")
        if analysis is None:
            text = "-"
        elif not analysis.get("ok"):
            text = analysis.get("error") or "-"
        else:
            found = analysis.get("findings")
            if found is None:  # a summary from before per-impact findings were kept
                found = [{"check": c, "impact": "?"} for c in analysis.get("checks", [])]
            text = ", ".join(f"{f['check']} ({f['impact']})" for f in found) or "none"
    if info.get("reference"):  # first: a long list of findings is cut at `width`, this note must stay visible
        text = f"{info['reference']}; {text}"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_files(s: dict) -> str:
    """The per-file table: file, verdict, BLEU, CodeBLEU and the findings (see [`file_verdict`], [`file_findings`])."""

    def number(x):
        return "-" if x is None else f"{x:.2f}"

    rows = [
        (name, file_verdict(info), number(info.get("bleu")), number(info.get("codebleu")), file_findings(info))
        for name, info in sorted(s["files"].items())
    ]
    head = ("file", "verdict", "BLEU", "CodeBLEU", "findings / first error")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = []
    for r in [head, *rows]:
        lines.append(
            f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}  {r[4]}".rstrip()
        )
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="hf-ext codebc score",
        description="Score generated Solidity contracts (<Task>.txt_<k>.sol) the CodeBC way: BLEU, CodeBLEU, "
        "solc-js compile rate, Slither vulnerability rate.",
    )
    p.add_argument("--predictions", required=True, help="folder of <Task>.txt_<k>.sol files")
    p.add_argument(
        "--references",
        default=None,
        help="folder of <Task>_clean.sol references (default: the shipped Blockchain-HumanEval)",
    )
    p.add_argument("--no-analyse", action="store_true", help="skip Slither (vulnerability_rate is null)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Slither processes (default: the available cores; 1 runs it in this process)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (per-file details under 'files')")
    p.add_argument(
        "--no-files", action="store_true", help="print the summary only, without the per-file table of verdicts"
    )
    return p


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    try:
        summary = score_folder(args.predictions, args.references, analyse=not args.no_analyse, workers=args.workers)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.json:
        print(json.dumps(summary))
    else:
        if not args.no_files:
            print(format_files(summary))
            print()
        print(format_summary(summary))
    return summary
