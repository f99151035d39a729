"""`hf-ext reproduce proto_evfl`: vanilla VFL, VFL + confidence-threshold pseudo-labels, Proto-EVFL and its
ablations on a vertical sklearn-digits split (left/right image halves) with a few aligned labels and long-tailed
unaligned pools, in a long-tail setting and a zero-shot one (one class never labelled); every run goes through the
Flower protocol in-process. Prints the table, writes `results.json` and the trained artifacts (top model and
party models of one Proto-EVFL run)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from hf_ext.core.parallel import run_jobs

# Each variant: overrides of the run settings' model fields and of the training arguments.
VARIANTS: dict[str, dict[str, dict]] = {
    "vanilla_vfl": {"model": {"aggregation": "concat", "classifier": "linear", "local_loss_weight": 0.0},
                    "train": {"selection": "none"}},
    "vfl_pseudo_label": {"model": {"aggregation": "concat", "classifier": "linear"},
                         "train": {"selection": "threshold", "prototype_ema": False, "discover_unseen": False}},
    "proto_evfl": {"model": {}, "train": {}},
    "ablation_uniform_prior": {"model": {}, "train": {"prior": "uniform"}},
    "ablation_threshold_selection": {"model": {}, "train": {"selection": "threshold"}},
    "ablation_concat_aggregation": {"model": {"aggregation": "concat"}, "train": {}},
}  # fmt: skip
SETTINGS = ("long_tail", "zero_shot")
REPORTED = ("accuracy", "macro_f1", "unseen_accuracy", "seen_accuracy")


@dataclass
class ProtoEvflReproduceArguments:
    """Scale of `hf-ext reproduce proto_evfl`. Quick scale by default; `--full` gives 5 seeds and IR 50 and 100.

    In the zero-shot setting the unseen class is `seed mod 10`, so the seeds also vary which class is unseen.
    """

    full: bool = False
    out: str = "runs/proto_evfl"
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    imbalance_ratios: list[float] = field(default_factory=lambda: [50.0])
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    settings: list[str] = field(default_factory=lambda: list(SETTINGS))
    rounds: int = 40
    workers: int = 2

    def __post_init__(self):
        if self.full:
            self.seeds, self.imbalance_ratios = [0, 1, 2, 3, 4], [50.0, 100.0]


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext reproduce proto_evfl", description=__doc__)
    p.add_argument("--full", action="store_true", help="5 seeds and imbalance ratios 50 and 100 (quick: 2 seeds, 50)")
    p.add_argument("--out", default="runs/proto_evfl", help="output folder (results.json, artifact/, parties/)")
    p.add_argument("--seeds", nargs="+", type=int, help="seeds (default 0 1; --full: 0..4)")
    p.add_argument("--imbalance-ratios", nargs="+", type=float, help="head/tail ratios of the unaligned pools")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="subset of the compared methods")
    p.add_argument("--settings", nargs="+", choices=list(SETTINGS), help="long_tail and/or zero_shot")
    p.add_argument("--rounds", type=int, help="bi-level rounds per run (default 40)")
    p.add_argument("--workers", type=int, help="parallel training processes (default 2; 1 runs in this process)")
    return p


def run_settings(variant: str, setting: str, seed: int, imbalance_ratio: float, rounds: int):
    """The [`ProtoEvflRunConfig`] of one run."""
    from .data import VerticalDataConfig
    from .task import ProtoEvflRunConfig
    from .training import ProtoEvflTrainingArguments

    spec = VARIANTS[variant]
    unseen = seed % 10 if setting == "zero_shot" else None
    data = VerticalDataConfig(unseen_class=unseen, imbalance_ratio=imbalance_ratio, seed=seed)
    warmup = min(ProtoEvflTrainingArguments.warmup_rounds, rounds // 2)
    training = ProtoEvflTrainingArguments(rounds=rounds, warmup_rounds=warmup, seed=seed, **spec["train"])
    return ProtoEvflRunConfig(data=data, training=training, **spec["model"])


def _run_job(job: tuple, rounds: int, out: str | None):
    variant, setting, seed, ratio = job
    from .training import run_federation

    result = run_federation(run_settings(variant, setting, seed, ratio, rounds))
    if out is not None:  # keep one Proto-EVFL federation as the published artifacts
        from hf_ext.core.hub import save_artifact

        from . import SPEC

        save_artifact(result.top_model, Path(out) / "artifact", SPEC)
        for k, party in enumerate(result.party_models):
            save_artifact(party, Path(out) / "parties" / f"party-{k}")
    metrics = {k: v for k, v in result.metrics.items() if k in REPORTED or k.startswith("acc_class")}
    return job, metrics


def _summarise(per_seed: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = [k for k in per_seed[0] if k != "seconds"]
    return {k: {"mean": float(np.mean([m[k] for m in per_seed])), "std": float(np.std([m[k] for m in per_seed]))}
            for k in keys}  # fmt: skip


def format_table(results: dict) -> str:
    head = ["setting", "IR", "variant", "accuracy", "macro-F1", "unseen-class acc"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in results["rows"]:
        m = row["metrics"]

        def cell(key):
            return f"{100 * m[key]['mean']:.1f} ± {100 * m[key]['std']:.1f}" if key in m else "–"

        lines.append(f"| {row['setting']} | {row['imbalance_ratio']:g} | {row['variant']} | {cell('accuracy')} | "
                     f"{cell('macro_f1')} | {cell('unseen_accuracy')} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    run = ProtoEvflReproduceArguments(full=ns.full, out=ns.out)
    for key in ("seeds", "imbalance_ratios", "variants", "settings", "rounds", "workers"):
        if getattr(ns, key) is not None:
            setattr(run, key, getattr(ns, key))
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    jobs = [(v, s, seed, r) for s in run.settings for r in run.imbalance_ratios for v in run.variants
            for seed in run.seeds]  # fmt: skip
    keep = next((j for j in jobs if j[0] == "proto_evfl" and j[1] == run.settings[-1]), None)
    done: dict[tuple, dict] = {}
    calls = [(job, run.rounds, str(out) if job == keep else None) for job in jobs]
    # OT fallbacks are counted in the metrics instead of logged by every worker.
    for job, metrics in run_jobs(_run_job, calls, workers=run.workers, desc="proto_evfl reproduce",
                                 quiet_loggers=("hf_ext.proto_evfl.ot_selection",)):
        done[job] = metrics
    rows = []
    for s in run.settings:
        for r in run.imbalance_ratios:
            for v in run.variants:
                per_seed = [done[(v, s, seed, r)] for seed in run.seeds]
                rows.append({"setting": s, "imbalance_ratio": r, "variant": v, "metrics": _summarise(per_seed),
                             "per_seed": per_seed})  # fmt: skip
    results = {
        "method": "proto_evfl", "scale": "full" if run.full else "quick", "arguments": asdict(run),
        "data": ("sklearn digits split into left/right 4-pixel-column halves (2 parties); 10 aligned labelled "
                 "samples per class (none for the unseen class = seed mod 10 in zero_shot); disjoint long-tailed "
                 "unaligned pools with reversed dominant classes; balanced aligned test set, 30 per class"),
        "rows": rows, "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    (out / "results.json").write_text(json.dumps(results, indent=1))
    table = format_table(results)
    print(table)
    print(f"\nwrote {out / 'results.json'}" + (f", {out / 'artifact'} and {out / 'parties'}" if keep else "")
          + f" ({results['seconds']:.0f} s)")  # fmt: skip
    results["table"] = table
    return results


if __name__ == "__main__":
    main()
