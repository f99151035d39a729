"""`hf-ext reproduce fede4rag --full`: the round × λ verdict grid.

The earlier reading "KD (λ = 100) halves FedAvg's gain" came from 2 rounds, where round 1's teacher is the zero-shot
model, so it was close to built in; the paper's code runs 25 rounds. The grid trains FedAvg (λ = 0) and FedE4RAG with
λ ∈ {1, 10, 100} for R ∈ {2, 10, 25} rounds on Flower, every client for the **same number of gradient steps**
(`client_steps`, spread evenly over the rounds: more rounds = less work per round, the same total), next to zero-shot
and local-only (the same steps, no federation), on paired seeds; and the released sampling (one client per round,
∝ data size) as one setting at R = 25, λ = 100. The score is own-company MRR on each client's held-out questions
(macro mean over the five companies); FinanceBench is not scored in the grid (its time goes to the cells).

The verdict rules — the paper's claims and the earlier reading, stated below — are printed before the first job and
decided on the paired per-seed differences through [`hf_ext.core.reporting`] (sample SD, 95 % t interval).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from hf_ext.core.gc_freeze import gc_frozen
from hf_ext.core.reporting import (
    Premise,
    VerdictRule,
    environment,
    paired_difference,
    print_rules,
    write_results,
)

from .report import cell, seed_differences, seed_summary

ROUNDS = (2, 10, 25)
LAMBDAS = (0.0, 1.0, 10.0, 100.0)  # 0 = FedAvg
PAPER_LAMBDA = 100.0
METRIC = "own.mrr"
PREMISE = "training helps at all: local-only − zero-shot own MRR > 0 (mean over seeds)"


def cell_name(rounds: int, lam: float) -> str:
    return f"R{rounds} " + ("fedavg" if lam == 0 else f"λ={lam:g}")


def grid_rules(rounds=ROUNDS, lambdas=LAMBDAS) -> dict[tuple, VerdictRule]:
    """The rules, keyed `(kind, R, λ)`: the paper's FedE4RAG ≥ FedAvg (each λ > 0) and FedAvg > local-only, and the
    earlier reading "KD halves the gain" (λ = 100), each at every round count."""
    out = {}
    for r in rounds:
        for lam in (x for x in lambdas if x > 0):
            out[("kd", r, lam)] = VerdictRule(
                claim=f"FedE4RAG (λ = {lam:g}) beats FedAvg at {r} rounds",
                metric=f"own MRR, {cell_name(r, lam)} − {cell_name(r, 0)}",
                premise=PREMISE,
            )
        out[("fed", r, 0.0)] = VerdictRule(
            claim=f"FedAvg beats local-only at {r} rounds (matched client steps)",
            metric=f"own MRR, {cell_name(r, 0)} − local-only",
            premise=PREMISE,
        )
        if PAPER_LAMBDA in lambdas:
            out[("halves", r, PAPER_LAMBDA)] = VerdictRule(
                claim=f"KD (λ = 100) halves FedAvg's gain at {r} rounds",
                metric=f"own MRR, (FedAvg − zero-shot) − 2·(FedE4RAG λ = 100 − zero-shot) at {r} rounds",
                premise=f"FedAvg gains at {r} rounds: FedAvg − zero-shot own MRR > 0 (mean over seeds)",
            )
    return out


def decide_grid(own: dict[str, list[float]], rules: dict[tuple, VerdictRule]) -> list:
    """Each rule decided on `own` (arm → per-seed own MRR, seeds in the same order)."""
    zs, local = own["zero-shot"], own["local-only"]
    helps = paired_difference(local, zs)
    premise = Premise(PREMISE, helps.mean > 0, f"local-only − zero-shot own MRR {helps.mean:+.3f}")
    out = []
    for (kind, r, lam), rule in rules.items():
        fedavg = own[cell_name(r, 0)]
        if kind == "kd":
            out.append(rule.decide(paired_difference(own[cell_name(r, lam)], fedavg), premise))
        elif kind == "fed":
            out.append(rule.decide(paired_difference(fedavg, local), premise))
        else:
            kd = own[cell_name(r, lam)]
            gain = paired_difference(fedavg, zs)
            p = Premise(rule.premise, gain.mean > 0, f"FedAvg − zero-shot own MRR {gain.mean:+.3f}")
            # (F − Z) − 2 (K − Z) = (F + Z) − 2 K, paired per seed
            out.append(rule.decide(paired_difference([f + z for f, z in zip(fedavg, zs)], [2 * k for k in kd]), p))
    return out


_SUITES: dict = {}


def _job(name: str, setting: str, run, engine: str):
    from .evaluation import EvaluationSuite
    from .federation import run_setting

    t0 = time.perf_counter()
    # Each client round builds a `Trainer`, whose `train()` makes a full `gc.collect()`: over this process's ~500 k
    # live objects (torch, transformers, Flower, the caches) that cost ~1.1 s a round under load, 38 % of a
    # 25-round cell. Frozen for the job, they are skipped (see `hf_ext.core.gc_freeze`).
    with gc_frozen():
        key = (run.seed, run.max_passage_length, run.cache_dir)
        if key not in _SUITES:  # one per seed: its held-out questions depend on the seed, not on R or λ
            _SUITES[key] = _InDomainOnly(EvaluationSuite(run))
        suite = _SUITES[key]
        res = run_setting(setting, run, suite, engine=engine)
    res.pop("adapter", None)
    return name, run.seed, res, time.perf_counter() - t0


class _InDomainOnly:
    """An [`EvaluationSuite`] that scores in-domain only (the grid's metric), to spend the time on the cells."""

    def __init__(self, suite):
        self.in_domain = suite.in_domain

    def evaluate(self, model, companies=None) -> dict:
        return {"financebench": {}, "in_domain": self.in_domain.evaluate(model, companies)}


def grid_jobs(run, seeds, rounds=ROUNDS, lambdas=LAMBDAS, one_client: bool = True):
    """`(name, setting, run)` of every job: zero-shot, local-only, each (R, λ) cell and the one-client sampling.
    Cell-major (every seed of a cell before the next cell), the references and the paper's λ first: a run cut short
    keeps complete, paired cells."""
    # local-only: the same client_steps in one local fit (no rounds: nothing is exchanged)
    cells = [("zero-shot", "zero-shot", {}), ("local-only", "local-only", {"rounds": 1})]
    # the paper's round count and λ first: R = 25 (FedAvg, then λ = 100), then R = 2, then the rest
    for r in sorted(rounds, key=lambda r: (r != max(rounds), r != min(rounds), r)):
        for lam in sorted(lambdas, key=lambda lam: (lam != 0.0, lam != PAPER_LAMBDA, -lam)):
            setting = "fedavg" if lam == 0 else "fede4rag"
            cells.append((cell_name(r, lam), setting, {"rounds": r, "kd_lambda": lam}))
    if one_client:
        r = max(rounds)
        cells.append((f"R{r} one-client λ=100", "fede4rag-one-client", {"rounds": r, "kd_lambda": PAPER_LAMBDA}))
    return [(name, setting, replace(run, seed=seed, **kw)) for name, setting, kw in cells for seed in seeds]


def run_grid(run, seeds, out: Path, *, engine: str = "local", rounds=ROUNDS, lambdas=LAMBDAS, argv=None) -> dict:
    """Runs the grid (rules printed first), writes `out/results.json` and returns it."""
    from hf_ext.core.reporting import RESULTS_SCHEMA_VERSION

    from .reproduce import _cache_job, flat_metrics

    rules = grid_rules(rounds, lambdas)
    print_rules(list(rules.values()))
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for seed in seeds:  # the frozen-layer caches, once per seed (the holdout depends on it)
        for p in (-1, *range(5)):
            _cache_job(p, replace(run, seed=seed))
    progress = out / "progress.jsonl"
    finished = _finished_rows(progress)
    done = {}
    for name, setting, job_run in grid_jobs(run, seeds, rounds, lambdas):
        row = finished.get((name, job_run.seed))
        if row is not None and _same_run(row["run"], job_run):
            done[(name, job_run.seed)] = row
            print(f"{name} seed {job_run.seed}: finished earlier (progress.jsonl, same run config), not rerun")
            continue
        name, seed, res, secs = _job(name, setting, job_run, engine)
        done[(name, seed)] = {**res, "seconds": secs}
        own = flat_metrics(res["metrics"])[METRIC]
        print(f"{name} seed {seed}: own MRR {own:.3f}, steps {res['steps']} ({secs:.0f} s)", flush=True)
        with progress.open("a") as fh:
            row = {"name": name, "seed": seed, "seconds": secs, **res}
            row["run"] = {**job_run.__dict__, "lora_layers": list(job_run.lora_layers)}
            fh.write(json.dumps(row) + "\n")
    results = summarize_grid(done, seeds, rules)
    results.update(
        {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "method": "fede4rag",
            "scale": "full",
            "command": grid_command(rounds, lambdas),
            "argv": list(argv) if argv is not None else None,
            "engine": engine,
            "run": {**run.__dict__, "lora_layers": list(run.lora_layers)},
            "rules": [r.to_dict() for r in rules.values()],
            "environment": environment(),
            "seconds": time.perf_counter() - start,
        }
    )
    results["rag"] = generator_check_only(replace(run, seed=seeds[0]), out)
    write_results(out / "results.json", results)
    print(format_grid(results))
    return results


def _finished_rows(progress: Path) -> dict:
    """The jobs `progress.jsonl` already holds, keyed `(name, seed)` (the last row of a job wins)."""
    if not progress.is_file():
        return {}
    rows = [json.loads(line) for line in progress.read_text().splitlines() if line.strip()]
    return {(r["name"], r["seed"]): r for r in rows}


def _same_run(recorded: dict, run) -> bool:
    """A finished job is reused only when its recorded run config equals this job's, `cache_dir` aside (the cache
    holds the frozen layers' outputs, keyed by their inputs: where it lives changes no number)."""
    want = {**run.__dict__, "lora_layers": list(run.lora_layers)}
    return {k: v for k, v in recorded.items() if k != "cache_dir"} == {
        k: v for k, v in want.items() if k != "cache_dir"
    }


def generator_check_only(run, out: Path) -> dict | None:
    """The RAG loop's positive control with the offline generator (SmolLM2-135M-Instruct) and the zero-shot retriever:
    "golden passage beats no retrieval" on the clients' FinanceBench questions. If it fails, the RAG comparison is
    dropped (printed, and recorded under `dropped`); `None` when SmolLM2 is not installed."""
    from hf_ext.core.pretrained import load_smollm2, smollm2_available

    from .evaluation import EvaluationSuite
    from .rag import RAGAnswerer, run_rag
    from .task import build_model

    if not smollm2_available():
        print("RAG generator check skipped: SmolLM2-135M-Instruct is not installed")
        return None
    lm, tokenizer = load_smollm2()
    t0 = time.perf_counter()
    res = run_rag(RAGAnswerer(lm, tokenizer), {"zero-shot": build_model(run)[0]}, EvaluationSuite(run))
    res["seconds"] = time.perf_counter() - t0
    print(res.get("dropped") or f"RAG generator check passed: {res['generator_check']['reason']}", flush=True)
    return res


def rules_with_arms(rules: dict, names) -> dict:
    """The rules whose arms were all run (a grid cut short decides only those)."""
    have = set(names)

    def arms(kind, r, lam):
        base = {"zero-shot", "local-only", cell_name(r, 0)}
        return base | ({cell_name(r, lam)} if kind != "fed" else set())

    return {key: rule for key, rule in rules.items() if arms(*key) <= have}


def grid_command(rounds, lambdas) -> str:
    """The `hf-ext reproduce` command line of a grid over `rounds` × `lambdas`."""
    if tuple(rounds) == ROUNDS and tuple(lambdas) == LAMBDAS:
        return "hf-ext reproduce fede4rag --full"
    r, lam = " ".join(map(str, rounds)), " ".join(f"{x:g}" for x in lambdas)
    return f"hf-ext reproduce fede4rag --full --grid-rounds {r} --grid-lambdas {lam}"


def summarize_progress(out: Path, rounds=ROUNDS, lambdas=LAMBDAS, argv=None, rag_check: bool = False) -> dict:
    """A grid run cut short: `out/progress.jsonl` summarised over the cells that finished on every seed that the
    references (zero-shot, local-only) finished; the rules with all their arms are decided, the rest reported
    as not run. Writes `out/results.json` (its `cut_short` lists what is missing)."""
    from hf_ext.core.reporting import RESULTS_SCHEMA_VERSION

    from .task import RunConfig

    rows = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{out / 'progress.jsonl'} has no finished job")
    done = {(r["name"], r["seed"]): r for r in rows}
    seeds = sorted({s for n, s in done if n == "zero-shot" and ("local-only", s) in done})
    names = [n for n in dict.fromkeys(n for n, _ in done) if all((n, s) in done for s in seeds)]
    done = {(n, s): done[(n, s)] for n in names for s in seeds}
    stated = grid_rules(rounds, lambdas)
    rules = rules_with_arms(stated, names)
    results = summarize_grid(done, seeds, rules)
    first = rows[0]
    results.update(
        {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "method": "fede4rag",
            "scale": "full",
            "argv": list(argv) if argv is not None else None,
            "engine": "local",
            "rules": [r.to_dict() for r in rules.values()],
            "command": grid_command(rounds, lambdas) + " (cut short; summarised with --grid-summary)",
            "rules_not_run": [r.claim for k, r in stated.items() if k not in rules],
            "cut_short": {
                "cells_complete": names,
                "jobs_finished": len(rows),
                "seconds_of_finished_jobs": float(sum(r["seconds"] for r in rows)),
            },
            "environment": environment(),
            "seconds": float(sum(r["seconds"] for r in rows)),
            "first_job": {"name": first["name"], "seed": first["seed"]},
        }
    )
    if rag_check:
        results["rag"] = generator_check_only(
            RunConfig(**{**first["run"], "lora_layers": tuple(first["run"]["lora_layers"])}), out
        )
    write_results(out / "results.json", results)
    print(format_grid(results))
    return results


def summarize_grid(done: dict, seeds, rules) -> dict:
    """Summaries, paired differences to zero-shot and to FedAvg at the same R, the verdicts and the report tables."""
    from .reproduce import flat_metrics

    names = list(dict.fromkeys(n for n, _ in done))
    flat = {n: [flat_metrics(done[(n, s)]["metrics"]) for s in seeds] for n in names}
    own = {n: [f[METRIC] for f in flat[n]] for n in names}
    verdicts = decide_grid(own, rules)
    settings = {}
    for n in names:
        row = {**seed_summary(flat[n]), "steps": [done[(n, s)]["steps"] for s in seeds]}
        if n != "zero-shot":
            row["minus_zero-shot"] = seed_differences(flat[n], flat["zero-shot"])
        if n.startswith("R") and "fedavg" not in n:
            ref = n.split(" ")[0] + " fedavg"
            row["minus_fedavg"] = seed_differences(flat[n], flat[ref])
        if "sampled" in done[(n, seeds[0])]:
            row["sampled_seed0"] = done[(n, seeds[0])]["sampled"]
        settings[n] = row
    results = {"seeds": list(seeds), "settings": settings, "verdicts": [v.to_dict() for v in verdicts]}
    results["raw"] = {f"{n}:{s}": done[(n, s)] for n, s in done}
    results["report"] = grid_report(results)
    return results


def grid_report(results: dict) -> list[dict]:
    from hf_ext.core.results_render import table

    s = results["settings"]
    rows = []
    for n, r in s.items():
        steps = r["steps"][0]
        d0 = r.get("minus_zero-shot")
        dfa = r.get("minus_fedavg")
        rows.append(
            [
                n,
                f"{steps['total']} ({steps['sequential']})",
                cell(r, METRIC),
                cell(d0, METRIC, signed=True, interval=True) if d0 else "—",
                cell(dfa, METRIC, signed=True, interval=True) if dfa else "—",
            ]
        )
    return [
        table(
            f"Round × λ grid, own MRR (mean ± sample SD over seeds {results['seeds']}; differences paired per seed "
            "with the 95 % t interval)",
            ["setting", "steps total (sequential)", "own MRR", "− zero-shot", "− FedAvg (same R)"],
            rows,
            note="Every client trains the same number of gradient steps in every cell (client_steps, spread over the "
            "rounds); local-only trains those steps alone. Own MRR: each client's held-out questions over its own "
            "company's references, macro mean over the five clients.",
        )
    ]


def format_grid(results: dict) -> str:
    lines = []
    for t in results["report"]:
        lines.append(t["title"])
        lines.append(" | ".join(t["columns"]))
        lines.extend(" | ".join(str(c) for c in row) for row in t["rows"])
    lines.extend(f"{v['claim']}: {v['verdict'].upper()} ({v['reason']})" for v in results["verdicts"])
    rag = results.get("rag")
    if rag:
        lines.append(rag.get("dropped") or f"RAG generator check passed: {rag['generator_check']['reason']}")
    return "\n".join(lines)


def main_full(ns, out: Path, argv) -> dict:
    """`--full`: the round × λ grid ([`~hf_ext.fede4rag.grid.run_grid`]) on the in-process Flower grid (the same
    apps; Ray's start-up per federation would cost more than the cells at this size)."""
    from .task import RunConfig

    for flag in ("settings", "leave_out", "merge"):
        if getattr(ns, flag):
            raise ValueError(f"--{flag.replace('_', '-')} does not apply to --full (the grid has its own settings)")
    steps = ns.client_steps or 25
    rounds = tuple(ns.grid_rounds or ROUNDS)
    if steps < max(rounds):
        raise ValueError(f"--client-steps ({steps}) must be >= the largest of --grid-rounds ({max(rounds)})")
    run = RunConfig(
        rounds=max(rounds),
        client_steps=steps,
        max_passage_length=ns.max_passage_length or 64,
        train_fraction=ns.train_fraction or 1.0,
        learning_rate=ns.lr or RunConfig.learning_rate,
        temperature=ns.temperature or RunConfig.temperature,
        cache_dir=ns.cache_dir or str(out / "cache"),
    )
    if ns.grid_summary:
        return summarize_progress(out, rounds, tuple(ns.grid_lambdas or LAMBDAS), argv=argv, rag_check=True)
    engine = "local" if ns.engine == "simulation" else ns.engine
    return run_grid(
        run,
        ns.seeds or [0, 1, 2],
        out,
        engine=engine,
        rounds=rounds,
        lambdas=tuple(ns.grid_lambdas or LAMBDAS),
        argv=argv,
    )


__all__ = [
    "LAMBDAS",
    "ROUNDS",
    "cell_name",
    "decide_grid",
    "grid_jobs",
    "grid_rules",
    "main_full",
    "rules_with_arms",
    "run_grid",
    "summarize_grid",
    "summarize_progress",
]
