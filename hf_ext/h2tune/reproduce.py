"""`hf-ext reproduce h2tune`: three clients on two tiny decoders (clients 0 and 1 share a Llama-style base with LoRA
ranks 4 and 8; client 2 is a shallower, narrower GPT-2-style decoder with rank 16), the bases briefly pretrained on a
shared corpus of plain sums (cached under `--out/pretrained`), each client posing (a + b) mod 10 in its own format
(fill-in `3+4=`, `3+4 mod 10=`, program output `print((3+4)%10)>`; at quick scale client 2 poses fill-in, see
`presets.QUICK`) with little local data: 25 operand pairs per client, and **test inputs disjoint from the client's own
training inputs** (every test pair is another client's training pair; see `data.client_split`).

Compared (`task.VARIANTS`): local-only plain LoRA; the pooled-data ceiling (each model trained on every client's
operand pairs, posed in its own format); **the adapter-only control** (the H2Tune adapter trained locally, no
aggregation); H2Tune; with `--full` also HetLoRA (rank-padded averaging within a base), FLoRA (stacking within a base)
and the ablations no sparsification, index-aligned layers and joint instead of alternating training. The verdicts
(`report.py`) are per client, paired over seeds with 95 % t-intervals: **sharing** = H2Tune − adapter-only (the
headline), **adapter form** = adapter-only − local-only, and both together = H2Tune − local-only; each needs the
client's headroom (pooled ceiling − local-only, interval above 0) as its premise, else *premise absent*. The rules are
printed before any work. Per-client exact match after each round (mean over seeds: the convergence curve), final
exact match (mean ± sample SD), bytes sent per round; every spread comes from `hf_ext.core.reporting`. Writes
`results.json`, `results.md`, each H2Tune client's adapted model under `--out/clients` and the pushable
`--out/artifact` (client 0: base at the root, adapter in `adapter/`).

Two engines run the same client and server code (`H2TuneClient.run_round`, `server_update`): `--engine simulation`
runs the Flower ServerApp and ClientApps on Flower's simulation engine (Ray), one federation at a time (the `--full`
default); `--engine inprocess` loops over the clients in worker processes, spreading the (variant, seed) runs over
`--workers` single-threaded processes (the quick default: no Ray start-up per run). Either way the bases are
pretrained first (or loaded from the cache under `--out/pretrained`, keyed by config, init seed and steps). The
scales are in `presets.py`: quick 4 seeds, 3 rounds of 50 local steps, four variants; `--full` 3 seeds, 3 rounds of
300 steps, every variant; `--pretrained` SmolLM2 + two derived bases, 4 seeds, 48 test pairs, four variants.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.parallel import run_jobs
from hf_ext.core.paths import work_dir

from .aggregation import server_update
from .alignment import initial_global
from .federation_log import FederationLog
from .model import MODULE_SLOTS
from .presets import (
    FULL,
    FULL_SEEDS,
    PRETRAINED,
    PRETRAINED_SEEDS,
    PRETRAINED_VARIANTS,
    QUICK,
    QUICK_SEEDS,
    QUICK_VARIANTS,
)
from .report import HEADLINE, all_rules, comparisons, decide, format_comparisons, headroom, verdict_rules
from .task import GLOBAL_RANK, VARIANTS, H2TuneClient, RunConfig, global_shape, pretrained_base

# Stated before running (README): the claims and the criterion, one `VerdictRule` per comparison and client
# (report.verdict_rules), printed before any work.
PREDICTION = (
    "Sharing helps a client when H2Tune beats the adapter-only control (the same H2Tune adapter trained locally, no "
    "aggregation) by at least 0.05 exact match with the 95 % t-interval of the paired per-seed gain above 0; decided "
    "only on clients with headroom (pooled ceiling − local-only, 95 % interval above 0), else PREMISE ABSENT. The "
    "adapter form alone (adapter-only − local-only LoRA) and both together (H2Tune − local-only) are decided by the "
    "same rule. HetLoRA and FLoRA can help only clients 0 and 1 (one shared base)."
)
SETTING_PREMISE = "setting check on that client: chance < local-only < pooled ceiling (mean over seeds)"


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hf-ext reproduce h2tune", description=__doc__)
    p.add_argument("--full", action="store_true", help="3 seeds, 3 rounds of 300 local steps, every variant")
    p.add_argument("--out", default=str(work_dir("h2tune")), help="output folder (results.json, clients/)")
    from hf_ext.core.devices import add_device_argument

    add_device_argument(p)
    p.add_argument("--rounds", type=int, help="federated rounds")
    p.add_argument("--seeds", nargs="+", type=int, help="seeds")
    p.add_argument("--local-steps", type=int, help="optimiser steps per client per round")
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="worker processes (one thread each; in-process engine; with --pretrained each holds three decoders)",
    )
    p.add_argument(
        "--engine",
        choices=("inprocess", "simulation"),
        help="inprocess: the client and server code in worker processes (quick default); simulation: "
        "the Flower apps on Flower's simulation engine, Ray (--full default)",
    )
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="subset of the compared methods")
    p.add_argument(
        "--pretrained",
        action="store_true",
        help="real and derived bases: SmolLM2-135M-Instruct (fill-in, r 8) and two smaller bases derived "
        "from it (smollm2-L24, modulo, r 4; smollm2-L28, program, r 16), healed by distillation and "
        "cached (see presets.PRETRAINED for the CPU budget)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="reuse the (variant, seed) federations OUT/federations.jsonl holds from a run with the same settings "
        "(a run cut short, or seeds run apart: --seeds 0 1 and --seeds 2 3, then all four to decide)",
    )
    p.add_argument("--heal-steps", type=int, help="--pretrained: distillation steps per derived base")
    p.add_argument("--num-train", type=int, help="training examples per client")
    p.add_argument("--num-test", type=int, help="test examples per client")
    p.add_argument(
        "--client-tasks",
        help="comma-separated task per client (fill_in, choice, program, modulo); default: the preset's",
    )
    return p


def run_variant(variant: str, run: RunConfig) -> dict:
    """One federated run of `variant` in this process: the same [`H2TuneClient.run_round`] and
    [`server_update`] calls the Flower apps make. Returns per-client accuracy per round (measured after local
    training, before aggregation, as the paper's code does) and the bytes all clients send per round."""
    run = run.for_variant(variant)
    max_layers = run.max_layers
    clients = [H2TuneClient(spec, run, max_layers, index=i) for i, spec in enumerate(run.clients)]
    shape = global_shape(max_layers)
    message = None
    if run.mode == "h2tune":
        message = {"g": initial_global(max_layers, len(MODULE_SLOTS), GLOBAL_RANK, seed=run.seed).numpy()}
    acc = {c.spec.name: [] for c in clients}
    groups = {str(i): c.group for i, c in enumerate(clients)}  # the server's own view: which client is on which base
    bytes_per_round = 0
    for _ in range(run.rounds):
        payloads = {}
        for i, c in enumerate(clients):
            payloads[str(i)] = c.run_round(message)
            acc[c.spec.name].append(c.evaluate())
        bytes_per_round = sum(int(a.nbytes) for p in payloads.values() for a in p.values())
        message, _ = server_update(run.mode, payloads, shape, current=message, groups=groups)
    return {"accuracy": acc, "bytes_sent_per_round": bytes_per_round, "clients": clients, "final_message": message}


REPRODUCE_ROUND_TIMEOUT_S = 86_400.0


def run_variant_flower(variant: str, run: RunConfig, engine: str = "simulation") -> dict:
    """One federated run of `variant` through the Flower apps (`server_app.app`, `client_app.app`): on Flower's
    simulation engine (Ray, `engine="simulation"`) or in-process (`engine="local"`). Same result format as
    [`run_variant`], without the client objects (they live in the nodes)."""
    from hf_ext.core.federated import run_local, run_simulation

    from .client_app import app as client_app
    from .server_app import app as server_app

    run = run.for_variant(variant)
    n = len(run.clients)
    # Every client must answer every round for the run to be the in-process computation. The per-round timeout is
    # a deployment's guard against a dead node; here all nodes share one machine, and Ray runs its actors at a lower
    # priority, so on a busy machine a round can take far longer than a deployment would wait (600 s): a day.
    config = {**run.to_run_config(), "min-nodes": n, "timeout": max(run.timeout, REPRODUCE_ROUND_TIMEOUT_S)}
    if engine == "simulation":
        state = run_simulation(server_app, client_app, num_supernodes=n, run_config=config)
    elif engine == "local":
        state = run_local(
            server_app, client_app, num_nodes=n, run_config=config, node_configs=[{"partition-id": i} for i in range(n)]
        )
    else:
        raise ValueError(f"unknown engine {engine!r}; use 'simulation' or 'local'")
    per = dict(state["client-accuracy"])
    missing = [f"round {r}: {c.name}" for r in range(1, run.rounds + 1) for i, c in enumerate(run.clients)
               if f"{r}:{i}" not in per]  # fmt: skip
    if missing:  # a round aggregated without a client: not the computation the reproduction compares
        raise RuntimeError(
            f"{variant} seed {run.seed} on the {engine} engine: no accepted reply from " + "; ".join(missing)
            + " (timed out, failed or rejected: see the server log); rerun it (`--resume` keeps the finished runs)"
        )  # fmt: skip
    acc = {c.name: [float(per[f"{r}:{i}"]) for r in range(1, run.rounds + 1)] for i, c in enumerate(run.clients)}
    sent = dict(state["bytes-received"])
    final = {k: v.numpy() for k, v in state["arrays"].items()} if "arrays" in state else None
    return {"accuracy": acc, "bytes_sent_per_round": int(sent[str(run.rounds)]), "final_message": final or None}


def save_clients(clients, out: Path) -> None:
    """Each client's adapted model as a Hub artifact pair (see [`H2TuneClient.save_artifact`])."""
    for c in clients:
        c.save_artifact(out)


def _built_base(spec) -> bool:
    """Whether client `spec`'s base is built by the run and cached: a tiny decoder (pretrained) or a derived SmolLM2
    (healed); a shipped or user model is only loaded."""
    from .derive import is_derived

    return not spec.model or is_derived(spec.model)


def _pretrain_job(index: int, run: RunConfig) -> float:
    """Builds (or finds in the cache) client `index`'s base — pretrains a tiny decoder, heals a derived SmolLM2 —
    and returns the seconds it took."""
    from .bases import tiny_client_base
    from .clients import base_seed
    from .derive import derive_smollm2

    t0 = time.perf_counter()
    spec, seed = run.clients[index], base_seed(run.clients, index)
    if spec.model:
        derive_smollm2(spec.model, run.heal_steps, run.cache_dir)
    else:
        pretrained_base(tiny_client_base(spec, seed), spec, run, init_seed=seed)
    return time.perf_counter() - t0


def _variant_job(
    variant: str, run: RunConfig, out: str | None, engine: str = "inprocess"
) -> tuple[str, int, dict, float]:
    """One (variant, seed) run (in a worker for the in-process engine); with `out`, also saves its clients there."""
    t0 = time.perf_counter()
    if engine == "simulation":
        res = run_variant_flower(variant, dataclasses.replace(run, save_dir=out or ""), engine="simulation")
    else:
        res = run_variant(variant, run)
        if out is not None:
            save_clients(res["clients"], Path(out))
    return (
        variant,
        run.seed,
        {"accuracy": res["accuracy"], "bytes_sent_per_round": res["bytes_sent_per_round"]},
        time.perf_counter() - t0,
    )


def _cell(variant: str, r: dict, name: str) -> str:
    """`mean ± SD, Δ paired difference to local-only (mean ± SD [95 % interval])` of client `name` under `variant`
    (both from `hf_ext.core.reporting`: sample SD, Student-t interval)."""
    from hf_ext.core.reporting import summarize

    cell = summarize(r["final_accuracy_per_seed"][name]).cell()
    diff = r.get("paired_vs_local", {}).get(name)
    if diff is not None and variant != "local-only":
        cell += f", Δ {_diff_cell(diff)}"
    return cell


def _diff_cell(diff: dict) -> str:
    from hf_ext.core.reporting import paired_difference

    d = paired_difference(diff["per_pair"], [0.0] * len(diff["per_pair"]))
    return d.cell().replace("-0.000", "+0.000")  # no "-0.000"


def format_table(results: dict) -> str:
    n = len(results["seeds"])
    clients = results["clients"]
    lines = [
        f"final exact match, mean ± SD (sample) over {n} seed{'s' if n > 1 else ''} {results['seeds']}; "
        "Δ = paired per-seed difference vs local-only, mean ± SD [95 % t-interval]",
        f"{'variant':<22}"
        + "".join(f"{c['name'] + ' (' + c['task'] + ')':>50}" for c in clients)
        + f"{'bytes/round':>14}",
    ]
    for variant, r in results["variants"].items():
        cells = ""
        for c in clients:
            cells += f"{_cell(variant, r, c['name']):>50}"
        lines.append(f"{variant:<22}{cells}{r['bytes_sent_per_round']:>14}")
    return "\n".join(lines)


def format_markdown(results: dict) -> str:
    """The README / card tables of a run (written as `results.md`): final exact match per client with the paired
    per-seed difference to local-only, then the per-round curve (mean over seeds)."""
    clients = results["clients"]
    head = " | ".join(
        f"{c['name']} ({c['task']}, {c['family']} L{c['layers']} d{c['hidden']} r{c['rank']})" for c in clients
    )
    lines = [f"| variant | {head} | bytes / round |", "|---" * (len(clients) + 2) + "|"]
    for variant, r in results["variants"].items():
        cells = []
        for c in clients:
            cells.append(_cell(variant, r, c["name"]))
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {r['bytes_sent_per_round']:,} |")
    lines += [
        "",
        f"| variant (exact match after round 1 / 2 / ...) | {' | '.join(c['name'] for c in clients)} |",
        "|---" * (len(clients) + 1) + "|",
    ]
    for variant, r in results["variants"].items():
        curves = [np.mean([seed_acc[c["name"]] for seed_acc in r["accuracy_per_round"]], axis=0) for c in clients]
        lines.append(f"| {variant} | " + " | ".join(" / ".join(f"{a:.2f}" for a in cv) for cv in curves) + " |")
    return "\n".join(lines) + "\n"


def format_curves(results: dict) -> str:
    """The convergence curve: per-client exact match after each round, mean over seeds, one row per variant."""
    clients = [c["name"] for c in results["clients"]]
    lines = ["exact match after each round (mean over seeds), per client: round 1 / round 2 / ..."]
    for variant, r in results["variants"].items():
        cells = []
        for name in clients:
            curve = np.mean([seed_acc[name] for seed_acc in r["accuracy_per_round"]], axis=0)
            cells.append(f"{name} " + " / ".join(f"{a:.2f}" for a in curve))
        lines.append(f"{variant:<22}" + "   ".join(cells))
    return "\n".join(lines)


def setting_check(results: dict) -> dict:
    """Before any comparison: local-only must land strictly between chance and the pooled-data ceiling on every
    client (mean over seeds); otherwise the setting cannot show a collaboration gain there (a client at chance learned
    nothing, a client at the ceiling has nothing left to gain)."""
    from .data import CHANCE

    variants = results["variants"]
    out = {"passed": True, "clients": {}}
    if "local-only" not in variants or "pooled" not in variants:
        return {"passed": None, "clients": {}, "note": "needs the local-only and pooled variants"}
    for c in results["clients"]:
        chance = CHANCE.get(c["task"])
        local = variants["local-only"]["final_accuracy_mean"][c["name"]]
        ceiling = variants["pooled"]["final_accuracy_mean"][c["name"]]
        ok = (chance is None or local > chance) and local < ceiling
        out["clients"][c["name"]] = {"chance": chance, "local_only": local, "pooled_ceiling": ceiling, "ok": ok}
        out["passed"] = out["passed"] and ok
    return out


def paired_differences(results: dict) -> None:
    """Adds `paired_vs_local` (per client: [`~hf_ext.core.reporting.paired_difference`] against local-only over
    the same seeds: per-seed differences, mean, sample SD and 95 % t-interval)."""
    from hf_ext.core.reporting import paired_difference

    base = results["variants"].get("local-only")
    if base is None:
        return
    for r in results["variants"].values():
        r["paired_vs_local"] = {
            name: paired_difference(per_seed, base["final_accuracy_per_seed"][name]).to_dict()
            for name, per_seed in r["final_accuracy_per_seed"].items()
        }


def _save_records(out: Path, results: dict, run, seeds, ns) -> None:
    """`training_record.json` beside each saved H2Tune client (`clients/<name>/adapter` and `base`): its final
    exact match in the first seed's federation, so `hf-ext push h2tune --from ...` renders the card from it."""
    from hf_ext.core.records import metric, save_training_record

    per_seed = results["variants"].get("h2tune", {}).get("final_accuracy_per_seed", {})
    for spec in run.clients:
        folder = out / "clients" / spec.name
        if not (folder / "adapter").is_dir() or spec.name not in per_seed:
            continue
        data = f"synthetic-{spec.task.replace('_', '-')}"
        common = dict(
            method="h2tune",
            command=results["command"],
            datasets=[
                {
                    "name": data,
                    "hub_id": None,
                    "description": f"hf_ext.h2tune.data '{spec.task}' modular-arithmetic task",
                }
            ],
            config={
                "client": spec.__dict__,
                "run": {k: v for k, v in run.__dict__.items() if isinstance(v, (int, float, str, bool))},
            },
        )
        # base_model stays unset: the base is the sibling `base/` folder, not a Hub repo; push it first and set it
        save_training_record(
            folder / "adapter",
            **common,
            skip_nonfinite=True,
            metrics=[metric("exact match", "exact_match", per_seed[spec.name][0], dataset=data, higher_is_better=True)],
            notes=f"{spec.name} ({spec.family}, {spec.layers} layers, r={spec.rank}) after "
            f"{run.rounds} rounds, seed {seeds[0]}; its base decoder is in ../base",
        )
        if (folder / "base").is_dir():
            save_training_record(
                folder / "base",
                **common,
                notes=f"{spec.name}'s base decoder (pretrained on the shared sums corpus), unmodified by the adapter",
            )
        if spec == run.clients[0] and (folder / "base").is_dir():
            # the pushable artifact (`hf-ext push h2tune` with no --from): base at the root, adapter in adapter/
            from .artifact import release_from_client

            release = release_from_client(folder, out / "artifact")
            save_training_record(
                release,
                **common,
                skip_nonfinite=True,
                metrics=[
                    metric("exact match", "exact_match", per_seed[spec.name][0], dataset=data, higher_is_better=True)
                ],
                notes=f"{spec.name} ({spec.family}, {spec.layers} layers, r={spec.rank}) after "
                f"{run.rounds} rounds, seed {seeds[0]}: base decoder at the root, H2Tune "
                "adapter in adapter/",
            )


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    from hf_ext.core.devices import set_device

    set_device(ns.device)
    out = Path(ns.out)
    scale = PRETRAINED if ns.pretrained else FULL if ns.full else QUICK
    run = RunConfig(cache_dir=str(out / "pretrained"), **scale)
    seeds = ns.seeds or (PRETRAINED_SEEDS if ns.pretrained else FULL_SEEDS if ns.full else QUICK_SEEDS)
    for flag, field in (
        ("rounds", "rounds"),
        ("local_steps", "local_steps"),
        ("heal_steps", "heal_steps"),
        ("num_train", "num_train"),
        ("num_test", "num_test"),
        ("client_tasks", "client_tasks"),
    ):
        if getattr(ns, flag) is not None:
            run = dataclasses.replace(run, **{field: getattr(ns, flag)})
    engine = ns.engine or ("simulation" if ns.full else "inprocess")
    variants = ns.variants or (PRETRAINED_VARIANTS if ns.pretrained else list(VARIANTS) if ns.full else QUICK_VARIANTS)
    out.mkdir(parents=True, exist_ok=True)
    from hf_ext.core.reporting import (
        RESULTS_SCHEMA_VERSION,
        environment,
        print_rules,
        reproduce_command,
        summarize,
        write_results,
    )
    from hf_ext.core.results_render import markdown_tables

    clients = [c.__dict__ for c in run.clients]
    rules = verdict_rules(clients)
    print(f"prediction (stated before the run): {PREDICTION}")
    print_rules(all_rules(rules))  # the criteria, before any work (the headline, sharing vs adapter-only, first)
    start = time.perf_counter()
    results: dict = {
        "scale": "pretrained" if ns.pretrained else "full" if ns.full else "quick",
        "command": reproduce_command("h2tune", argv),
        "engine": engine,
        "run": run.__dict__,
        "seeds": seeds,
        "clients": clients,
        "variants": {},
        "prediction": PREDICTION,
        # by comparison and client (what the tables read), and flat (the results.json schema the docs render)
        "rules_by_comparison": {kind: {n: rule.to_dict() for n, rule in r.items()} for kind, r in rules.items()},
        "rules": [rule.to_dict() for r in rules.values() for rule in r.values()],
        "headline": HEADLINE,
    }
    done: dict[tuple[str, int], dict] = {}
    workers = max(1, ns.workers)
    # phase 1: the distinct bases (each cached once; every later run loads them)
    from .clients import base_seed

    # (tiny bases pretrained, derived SmolLM2 bases healed), so parallel runs never build the same base twice
    firsts = sorted({base_seed(run.clients, i) - 1000 for i in range(len(run.clients)) if _built_base(run.clients[i])})
    for i, secs in zip(
        firsts, run_jobs(_pretrain_job, [(i, run) for i in firsts], workers=workers, desc="h2tune pretraining")
    ):
        print(f"pretrained the base of {run.clients[i].name} ({secs:.0f} s)", flush=True)
    results["seconds_pretrain"] = time.perf_counter() - start
    # phase 2: every (variant, seed) federated run; the first seed's H2Tune clients are saved. The simulation engine
    # runs one federation at a time in this process (Ray spreads its clients over the cores).
    # Every finished federation goes to OUT/federations.jsonl as it ends; --resume reuses those of the same settings
    # (a --pretrained run of hours cut short, or its seeds run apart), training only what is missing.
    log = FederationLog(out, run, engine, resume=ns.resume)
    # seed-major, so a run cut short (a time limit) leaves whole seeds, every variant paired, for --resume
    jobs = [
        (v, dataclasses.replace(run, seed=seed), str(out) if v == "h2tune" and seed == seeds[0] else None, engine)
        for seed in seeds
        for v in variants
    ]
    for variant, job_run, saves, _engine in jobs:
        logged = log.get(variant, job_run.seed, needs_clients=saves is not None)
        if logged is not None:
            done[(variant, job_run.seed)] = logged
            print(f"{variant} seed {job_run.seed}: from {log.path.name}", flush=True)
    jobs = [j for j in jobs if (j[0], j[1].seed) not in done]
    for variant, seed, res, secs in run_jobs(
        _variant_job, jobs, workers=1 if engine == "simulation" else workers, desc="h2tune reproduce"
    ):
        done[(variant, seed)] = res
        log.add(variant, seed, res, secs)
        final = {k: v[-1] for k, v in res["accuracy"].items()}
        print(f"{variant} seed {seed}: final exact match {final} ({secs:.0f} s)", flush=True)
    if log.reused:
        results["federations_from_log"] = log.reused
    for variant in variants:
        per_seed = [done[(variant, seed)] for seed in seeds]
        final = {c.name: [r["accuracy"][c.name][-1] for r in per_seed] for c in run.clients}
        results["variants"][variant] = {
            "final_accuracy_mean": {k: float(np.mean(v)) for k, v in final.items()},
            "final_accuracy_sd": {k: summarize(v).to_dict()["sd"] for k, v in final.items()},
            "final_accuracy_per_seed": final,
            "accuracy_per_round": [r["accuracy"] for r in per_seed],
            "bytes_sent_per_round": per_seed[0]["bytes_sent_per_round"],
        }
    paired_differences(results)
    results["setting_check"] = setting_check(results)
    results["headroom"] = headroom(results)
    results["comparisons"] = comparisons(results)
    verdicts = decide(results, rules)
    results["verdicts_by_comparison"] = {k: {n: v.to_dict() for n, v in vs.items()} for k, vs in verdicts.items()}
    results["verdicts"] = [v.to_dict() for vs in verdicts.values() for v in vs.values()]
    results["seconds"] = time.perf_counter() - start
    results["seconds_federated"] = results["seconds"] - results["seconds_pretrain"]
    results["environment"] = environment()
    results.update(schema_version=RESULTS_SCHEMA_VERSION, method="h2tune")
    # the display tables the docs renderer reads (hf_ext.core.results_render): the results.md tables
    results["report"] = markdown_tables(
        [
            "Final exact match per client (mean ± SD over seeds, paired difference to local-only)",
            "Exact match after each round (mean over seeds)",
            "Sharing vs adapter form: paired differences per client (95 % t interval) and their verdicts",
        ],
        format_markdown(results) + "\n" + format_comparisons(results),
    )
    write_results(out / "results.json", results)
    (out / "results.md").write_text(format_markdown(results) + "\n" + format_comparisons(results))
    _save_records(out, results, run, seeds, ns)
    check = results["setting_check"]
    for name, c in check["clients"].items():
        print(
            f"setting check {name}: chance {c['chance']} < local-only {c['local_only']:.3f} < pooled ceiling "
            f"{c['pooled_ceiling']:.3f}: {'ok' if c['ok'] else 'FAILED (no comparison is informative here)'}"
        )
    table = format_table(results)
    print(table)
    print(format_curves(results))
    for name, c in results["headroom"].get("clients", {}).items():
        print(f"headroom {name}: {c['detail']}" + ("" if c["ok"] else " (its verdicts: PREMISE ABSENT)"))
    print(format_comparisons(results))
    for kind, vs in verdicts.items():
        for verdict in vs.values():
            print(f"[verdict{' (headline)' if kind == HEADLINE else ''}] {verdict.line()}")
    print(
        f"wrote {out / 'results.json'} and {out / 'clients'} ({results['seconds']:.0f} s: pretraining "
        f"{results['seconds_pretrain']:.0f} s, federated runs {results['seconds_federated']:.0f} s)"
    )
    results["table"] = table
    return results


if __name__ == "__main__":
    main()
