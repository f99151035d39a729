"""`hf-ext reproduce h2tune`: three heterogeneous tiny decoders (Llama-, Qwen2- and GPT-2-style; different depths,
widths and LoRA ranks), briefly pretrained on a shared corpus of plain sums (cached under `--out/pretrained`), on three
phrasings of (a + b) mod 10. Compares H2Tune (shared middle matrices through relation-guided alignment, unweighted
mean on the server) with local-only LoRA, HetLoRA (pad → average → truncate), and the ablations index-aligned layers
and joint instead of alternating training; per-client exact match after each round (mean ± std over seeds), bytes
sent per round. Prints the table, writes `results.json` and each H2Tune client's adapted model (base + adapter +
card) under `--out/clients`.

Two engines run the same client and server code (`H2TuneClient.run_round`, `server_update`): `--engine simulation`
runs the Flower ServerApp and ClientApps on Flower's simulation engine (Ray), one federation at a time (the `--full`
default); `--engine inprocess` loops over the clients in worker processes, spreading the (variant, seed) runs over
`--workers` single-threaded processes (the quick default: no Ray start-up per run). Either way the three bases are
pretrained first (or loaded from the cache under `--out/pretrained`, keyed by config, init seed and steps). Quick
scale: 2 seeds, 3 rounds of 20 local steps; `--full`: 3 seeds, 5 rounds of 40 steps; both pretrain 300 steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from hf_ext.core.paths import work_dir
from hf_ext.core.parallel import run_jobs

from .aggregation import server_update
from .alignment import initial_global
from .model import MODULE_SLOTS
from .task import CLIENTS, GLOBAL_RANK, VARIANTS, H2TuneClient, RunConfig, global_shape, pretrained_base

def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext reproduce h2tune", description=__doc__)
    p.add_argument("--full", action="store_true", help="3 seeds, 5 rounds, 40 local steps per round")
    p.add_argument("--out", default=str(work_dir("h2tune")), help="output folder (results.json, clients/)")
    from hf_ext.core.devices import add_device_argument

    add_device_argument(p)
    p.add_argument("--rounds", type=int, help="federated rounds")
    p.add_argument("--seeds", nargs="+", type=int, help="seeds")
    p.add_argument("--local-steps", type=int, help="optimiser steps per client per round")
    p.add_argument("--workers", type=int, default=2, help="worker processes (one thread each; in-process engine)")
    p.add_argument("--engine", choices=("inprocess", "simulation"),
                   help="inprocess: the client and server code in worker processes (quick default); simulation: "
                        "the Flower apps on Flower's simulation engine, Ray (--full default)")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="subset of the compared methods")
    return p


def run_variant(variant: str, run: RunConfig) -> dict:
    """One federated run of `variant` in this process: the same [`H2TuneClient.run_round`] and
    [`server_update`] calls the Flower apps make. Returns per-client accuracy per round (measured after local
    training, before aggregation, as the paper's code does) and the bytes all clients send per round."""
    run = run.for_variant(variant)
    max_layers = max(c.layers for c in CLIENTS)
    clients = [H2TuneClient(spec, run, max_layers, index=i) for i, spec in enumerate(CLIENTS)]
    shape = global_shape(max_layers)
    message = None
    if run.mode == "h2tune":
        message = {"g": initial_global(max_layers, len(MODULE_SLOTS), GLOBAL_RANK, seed=run.seed).numpy()}
    acc = {c.spec.name: [] for c in clients}
    bytes_per_round = 0
    for _ in range(run.rounds):
        payloads = {}
        for i, c in enumerate(clients):
            payloads[str(i)] = c.run_round(message)
            acc[c.spec.name].append(c.evaluate())
        bytes_per_round = sum(int(a.nbytes) for p in payloads.values() for a in p.values())
        message, _ = server_update(run.mode, payloads, shape, current=message)
    return {"accuracy": acc, "bytes_sent_per_round": bytes_per_round, "clients": clients, "final_message": message}


def run_variant_flower(variant: str, run: RunConfig, engine: str = "simulation") -> dict:
    """One federated run of `variant` through the Flower apps (`server_app.app`, `client_app.app`): on Flower's
    simulation engine (Ray, `engine="simulation"`) or in-process (`engine="local"`). Same result format as
    [`run_variant`], without the client objects (they live in the nodes)."""
    from hf_ext.core.federated import run_local, run_simulation

    from .client_app import app as client_app
    from .server_app import app as server_app

    run = run.for_variant(variant)
    config = {**run.to_run_config(), "min-nodes": len(CLIENTS)}
    if engine == "simulation":
        state = run_simulation(server_app, client_app, num_supernodes=len(CLIENTS), run_config=config)
    elif engine == "local":
        state = run_local(server_app, client_app, num_nodes=len(CLIENTS), run_config=config,
                          node_configs=[{"partition-id": i} for i in range(len(CLIENTS))])
    else:
        raise ValueError(f"unknown engine {engine!r}; use 'simulation' or 'local'")
    per = dict(state["client-accuracy"])
    acc = {c.name: [float(per[f"{r}:{i}"]) for r in range(1, run.rounds + 1)] for i, c in enumerate(CLIENTS)}
    sent = dict(state["bytes-received"])
    final = {k: v.numpy() for k, v in state["arrays"].items()} if "arrays" in state else None
    return {"accuracy": acc, "bytes_sent_per_round": int(sent[str(run.rounds)]), "final_message": final or None}


def save_clients(clients, out: Path) -> None:
    """Each client's adapted model as a Hub artifact pair (see [`H2TuneClient.save_artifact`])."""
    for c in clients:
        c.save_artifact(out)


def _pretrain_job(index: int, run: RunConfig) -> float:
    """Pretrains (or finds in the cache) client `index`'s base; returns the seconds it took."""
    from .data import VOCAB_SIZE
    from .testing import tiny_base, tiny_base_config

    t0 = time.perf_counter()
    spec = CLIENTS[index]
    base = tiny_base(tiny_base_config(spec.family, spec.layers, spec.hidden, VOCAB_SIZE), seed=1000 + index)
    pretrained_base(base, spec, run, init_seed=1000 + index)
    return time.perf_counter() - t0


def _variant_job(variant: str, run: RunConfig, out: str | None, engine: str = "inprocess"
                 ) -> tuple[str, int, dict, float]:
    """One (variant, seed) run (in a worker for the in-process engine); with `out`, also saves its clients there."""
    t0 = time.perf_counter()
    if engine == "simulation":
        res = run_variant_flower(variant, dataclasses.replace(run, save_dir=out or ""), engine="simulation")
    else:
        res = run_variant(variant, run)
        if out is not None:
            save_clients(res["clients"], Path(out))
    return variant, run.seed, {"accuracy": res["accuracy"], "bytes_sent_per_round": res["bytes_sent_per_round"]}, \
        time.perf_counter() - t0


def format_table(results: dict) -> str:
    n = len(results["seeds"])
    lines = [f"final exact match, mean ± std (population) over {n} seed{'s' if n > 1 else ''} {results['seeds']}",
             f"{'variant':<22}" + "".join(f"{c.name + ' (' + c.task + ')':>24}" for c in CLIENTS)
             + f"{'bytes/round':>14}"]
    for variant, r in results["variants"].items():
        cells = "".join(f"{r['final_accuracy_mean'][c.name]:>17.3f}±{r['final_accuracy_std'][c.name]:.3f}"
                        for c in CLIENTS)
        lines.append(f"{variant:<22}{cells}{r['bytes_sent_per_round']:>14}")
    return "\n".join(lines)


def _save_records(out: Path, results: dict, run, seeds, ns) -> None:
    """`training_record.json` beside each saved H2Tune client (`clients/<name>/adapter` and `base`): its final
    exact match in the first seed's federation, so `hf-ext push h2tune --from ...` renders the card from it."""
    from hf_ext.core.records import metric, save_training_record

    per_seed = results["variants"].get("h2tune", {}).get("final_accuracy_per_seed", {})
    for spec in CLIENTS:
        folder = out / "clients" / spec.name
        if not (folder / "adapter").is_dir() or spec.name not in per_seed:
            continue
        data = f"synthetic-{spec.task.replace('_', '-')}"
        common = dict(method="h2tune", command="hf-ext reproduce h2tune" + (" --full" if ns.full else ""),
                      datasets=[{"name": data, "hub_id": None,
                                 "description": f"hf_ext.h2tune.data '{spec.task}' modular-arithmetic task"}],
                      config={"client": spec.__dict__, "run": {k: v for k, v in run.__dict__.items()
                                                               if isinstance(v, (int, float, str, bool))}})
        # base_model stays unset: the base is the sibling `base/` folder, not a Hub repo; push it first and set it
        save_training_record(folder / "adapter", **common, skip_nonfinite=True,
                             metrics=[metric("exact match", "exact_match", per_seed[spec.name][0], dataset=data,
                                             higher_is_better=True)],
                             notes=f"{spec.name} ({spec.family}, {spec.layers} layers, r={spec.rank}) after "
                                   f"{run.rounds} rounds, seed {seeds[0]}; its base decoder is in ../base")
        if (folder / "base").is_dir():
            save_training_record(folder / "base", **common, notes=f"{spec.name}'s base decoder (pretrained on the "
                                 "shared sums corpus), unmodified by the adapter")
        if spec is CLIENTS[0] and (folder / "base").is_dir():
            # the pushable artifact (`hf-ext push h2tune` with no --from): base at the root, adapter in adapter/
            from .artifact import release_from_client

            release = release_from_client(folder, out / "artifact")
            save_training_record(release, **common, skip_nonfinite=True,
                                 metrics=[metric("exact match", "exact_match", per_seed[spec.name][0], dataset=data,
                                                 higher_is_better=True)],
                                 notes=f"{spec.name} ({spec.family}, {spec.layers} layers, r={spec.rank}) after "
                                       f"{run.rounds} rounds, seed {seeds[0]}: base decoder at the root, H2Tune "
                                       "adapter in adapter/")


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    from hf_ext.core.devices import set_device

    set_device(ns.device)
    out = Path(ns.out)
    run = RunConfig(rounds=5 if ns.full else 3, local_steps=40 if ns.full else 20, pretrain_steps=300,
                    cache_dir=str(out / "pretrained"))
    seeds = ns.seeds or ([0, 1, 2] if ns.full else [0, 1])
    if ns.rounds:
        run = dataclasses.replace(run, rounds=ns.rounds)
    if ns.local_steps:
        run = dataclasses.replace(run, local_steps=ns.local_steps)
    engine = ns.engine or ("simulation" if ns.full else "inprocess")
    variants = ns.variants or list(VARIANTS)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results: dict = {"scale": "full" if ns.full else "quick", "engine": engine, "run": run.__dict__, "seeds": seeds,
                     "clients": [c.__dict__ for c in CLIENTS], "variants": {}}
    done: dict[tuple[str, int], dict] = {}
    workers = max(1, ns.workers)
    # phase 1: the three bases (each cached once; every later run loads them)
    for i, secs in enumerate(run_jobs(_pretrain_job, [(i, run) for i in range(len(CLIENTS))], workers=workers,
                                      desc="h2tune pretraining")):
        print(f"pretrained base {i + 1}/{len(CLIENTS)} ({secs:.0f} s)", flush=True)
    results["seconds_pretrain"] = time.perf_counter() - start
    # phase 2: every (variant, seed) federated run; the first seed's H2Tune clients are saved. The simulation engine
    # runs one federation at a time in this process (Ray spreads its clients over the cores).
    jobs = [(v, dataclasses.replace(run, seed=seed), str(out) if v == "h2tune" and seed == seeds[0] else None, engine)
            for v in variants for seed in seeds]
    for variant, seed, res, secs in run_jobs(_variant_job, jobs, workers=1 if engine == "simulation" else workers,
                                             desc="h2tune reproduce"):
        done[(variant, seed)] = res
        final = {k: v[-1] for k, v in res["accuracy"].items()}
        print(f"{variant} seed {seed}: final exact match {final} ({secs:.0f} s)", flush=True)
    for variant in variants:
        per_seed = [done[(variant, seed)] for seed in seeds]
        final = {c.name: [r["accuracy"][c.name][-1] for r in per_seed] for c in CLIENTS}
        results["variants"][variant] = {
            "final_accuracy_mean": {k: float(np.mean(v)) for k, v in final.items()},
            "final_accuracy_std": {k: float(np.std(v)) for k, v in final.items()},
            "final_accuracy_per_seed": final,
            "accuracy_per_round": [r["accuracy"] for r in per_seed],
            "bytes_sent_per_round": per_seed[0]["bytes_sent_per_round"],
        }
    results["seconds"] = time.perf_counter() - start
    results["seconds_federated"] = results["seconds"] - results["seconds_pretrain"]
    (out / "results.json").write_text(json.dumps(results, indent=2))
    _save_records(out, results, run, seeds, ns)
    table = format_table(results)
    print(table)
    print(f"wrote {out / 'results.json'} and {out / 'clients'} ({results['seconds']:.0f} s: pretraining "
          f"{results['seconds_pretrain']:.0f} s, federated runs {results['seconds_federated']:.0f} s)")
    results["table"] = table
    return results


if __name__ == "__main__":
    main()
