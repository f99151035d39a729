"""`hf-ext reproduce proto_evfl`: vanilla VFL, local-only, VFL + confidence-threshold pseudo-labels, Proto-EVFL and
its ablations (no OT, no gate, no mixed prior) on vertical splits (left/right image halves) of sklearn digits and
Fashion-MNIST with few aligned labels (0.95 % on Fashion-MNIST) and long-tailed unaligned pools whose dominant
classes differ by party, in a long-tail setting and a zero-shot one (one class never labelled). Every federated run
goes through the Flower protocol in-process. Reports paired differences to vanilla VFL, the unseen-class accuracy
against chance and against the oracle-P_u ceiling, and the label-leakage attack's accuracy. Prints the table,
writes `results.json` and the trained artifact (top model and, in `parties/party-<k>/`, the party encoders of one
Proto-EVFL run)."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.parallel import run_jobs
from hf_ext.core.reporting import (
    RESULTS_SCHEMA_VERSION,
    Premise,
    VerdictRule,
    environment,
    paired_difference,
    print_rules,
    summarize,
    write_results,
)
from hf_ext.core.results_render import markdown_tables

from .reproduce_controls import (
    POSITIVE_CONTROL,
    UNSEEN_SWEEP_RULE,
    ZERO_SHOT_CONTROL,
    combine,
    decide_unseen_sweep,
    format_unseen_sweep,
    long_tail_control,
    unseen_class_stats,
    zero_shot_control,
)

# Each variant: overrides of the run settings' model fields and of the training arguments. `local_only` is not a
# federation (see `baselines.py`).
VARIANTS: dict[str, dict[str, dict]] = {
    "vanilla_vfl": {"model": {"aggregation": "concat", "classifier": "linear", "local_loss_weight": 0.0},
                    "train": {"selection": "none"}},
    "local_only": {"model": {}, "train": {}},
    "vfl_pseudo_label": {"model": {"aggregation": "concat", "classifier": "linear"},
                         "train": {"selection": "threshold", "prototype_ema": False, "discover_unseen": False}},
    "proto_evfl": {"model": {}, "train": {}},
    "ablation_no_ot": {"model": {}, "train": {"selection": "threshold"}},
    "ablation_no_gate": {"model": {"aggregation": "concat"}, "train": {}},
    "ablation_no_mixed_prior": {"model": {}, "train": {"prior": "local"}},
    # the positive control (true labels on the unaligned pool) and the label-leak fix (no local prototype loss)
    "oracle_lower": {"model": {}, "train": {"selection": "oracle"}},
    "no_local_loss": {"model": {"local_loss_weight": 0.0}, "train": {}},
}  # fmt: skip
LONG_TAIL_ONLY = ("oracle_lower", "no_local_loss")  # the zero-shot claim has its own control (the oracle prototype)
SETTINGS = ("long_tail", "zero_shot")
DATASETS = ("digits", "fashion_mnist")
REPORTED = ("accuracy", "macro_f1", "unseen_accuracy", "seen_accuracy", "oracle_accuracy", "oracle_unseen_accuracy",
            "label_leak_accuracy")  # fmt: skip
# Per data set: the split's sizes and the default head/tail ratio. Fashion-MNIST: 100 aligned (90 in zero-shot) of
# 10,522 training entities, i.e. 0.95 % aligned; digits is the small, fast case (13 % aligned).
DATA_SCALE = {
    "digits": {"aligned_per_class": 10, "test_per_class": 30, "max_unaligned_per_class": 120, "ratio": 50.0},
    "fashion_mnist": {"aligned_per_class": 10, "test_per_class": 100, "max_unaligned_per_class": 2100,
                      "ratio": 100.0},
}  # fmt: skip
CHANCE_UNSEEN = 0.1  # 1/C on the 10-class data sets
# Stated before the runs (README and model card) and printed before they start: what confirms or refutes the paper's
# claims here. Each comparison is paired by seed (same split, same initial encoders); a rule is decided on the 95 %
# Student-t interval of the per-seed differences (`hf_ext.core.reporting`). The earlier wording ("by more than its
# spread") is now "the 95 % interval excludes 0".
BASELINE_PREMISE = "vanilla VFL beats the majority-class rate (10 %) by > 20 points and local-only on accuracy"
RULES = {
    "long_tail": VerdictRule(
        claim="Proto-EVFL beats vanilla VFL on accuracy (long tail)",
        metric="accuracy, Proto-EVFL − vanilla VFL",
        premise=f"{BASELINE_PREMISE}; {POSITIVE_CONTROL}",
    ),
    "zero_shot": VerdictRule(
        claim="Proto-EVFL recognises the never-labelled class above chance (zero shot)",
        metric=f"unseen-class accuracy − chance ({CHANCE_UNSEEN:.0%})",
        premise=f"{BASELINE_PREMISE}; {ZERO_SHOT_CONTROL}",
    ),
}
ABLATIONS = {"ablation_no_ot": "the OT selection", "ablation_no_gate": "the gate",
             "ablation_no_mixed_prior": "the mixed prior",
             "no_local_loss": "the local prototype loss (the label-leak source; 0 is the fix)"}  # fmt: skip


def runs_in(variant: str, setting: str) -> bool:
    """Whether `variant` runs in `setting` (the control and the leak fix run in the long tail only)."""
    return setting == "long_tail" or variant not in LONG_TAIL_ONLY


def ablation_rule(variant: str, metric: str = "accuracy") -> VerdictRule:
    """ "A component matters": removing it lowers the paired `metric` (Proto-EVFL − ablation > 0)."""
    return VerdictRule(claim=f"{ABLATIONS[variant]} matters ({metric})", metric=f"{metric}, Proto-EVFL − {variant}")


@dataclass
class ProtoEvflReproduceArguments:
    """Scale of `hf-ext reproduce proto_evfl`. Quick: digits, 3 seeds, IR 50. `--full`: digits (5 seeds, IR 50 and
    100) and Fashion-MNIST (3 seeds, IR 100, 0.95 % aligned).

    In the zero-shot setting the unseen class is `seed mod 10`, so the seeds also vary which class is unseen.
    Every variant of one seed sees the same split and the same initial party encoders (paired comparisons).
    """

    full: bool = False
    out: str | None = None
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    imbalance_ratios: list[float] | None = None
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    settings: list[str] = field(default_factory=lambda: list(SETTINGS))
    datasets: list[str] = field(default_factory=lambda: ["digits"])
    fashion_seeds: list[int] | None = None
    unseen_classes: list[int] | None = None
    rounds: int = 40
    workers: int = 2

    def __post_init__(self):
        if self.full:
            self.seeds, self.datasets = [0, 1, 2, 3, 4], list(DATASETS)
            self.fashion_seeds = self.fashion_seeds or [0, 1, 2]
            self.unseen_classes = self.unseen_classes if self.unseen_classes is not None else list(range(10))
        if self.out is None:
            from hf_ext.core.paths import work_dir

            self.out = str(work_dir("proto_evfl"))
        self.validate()

    def validate(self):
        for name in self.variants:
            if name not in VARIANTS:
                raise ValueError(f"unknown variant {name!r}; choose from {list(VARIANTS)}")
        for name in self.datasets:
            if name not in DATASETS:
                raise ValueError(f"unknown dataset {name!r}; choose from {list(DATASETS)}")
        for c in self.unseen_classes or []:
            if not 0 <= c < 10:
                raise ValueError(f"--unseen_classes must be classes in [0, 10), got {c}")
        if self.rounds < 1 or self.workers < 1 or not self.seeds:
            raise ValueError(f"need rounds >= 1, workers >= 1 and at least one seed, got {self.rounds}, "
                             f"{self.workers}, {self.seeds}")  # fmt: skip

    def ratios(self, dataset: str) -> list[float]:
        return list(self.imbalance_ratios or ([50.0, 100.0] if self.full and dataset == "digits"
                                              else [DATA_SCALE[dataset]["ratio"]]))  # fmt: skip

    def seeds_for(self, dataset: str) -> list[int]:
        return list(self.fashion_seeds or self.seeds) if dataset == "fashion_mnist" else list(self.seeds)


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hf-ext reproduce proto_evfl", description=__doc__)
    p.add_argument(
        "--full",
        action="store_true",
        help="digits (5 seeds, IR 50 and 100) and Fashion-MNIST (3 seeds, IR 100); quick: digits, 3 seeds",
    )
    p.add_argument("--out", default=None, help="output folder (default $HF_EXT_HOME/proto_evfl, i.e. runs/proto_evfl)")
    p.add_argument("--seeds", nargs="+", type=int, help="seeds (default 0 1 2; --full: 0..4)")
    p.add_argument("--fashion-seeds", nargs="+", type=int, help="seeds of the Fashion-MNIST runs (--full: 0 1 2)")
    p.add_argument("--datasets", nargs="+", choices=list(DATASETS), help="digits and/or fashion_mnist")
    p.add_argument("--imbalance-ratios", nargs="+", type=float, help="head/tail ratios of the unaligned pools")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="subset of the compared methods")
    p.add_argument("--settings", nargs="+", choices=list(SETTINGS), help="long_tail and/or zero_shot")
    p.add_argument(
        "--unseen-classes",
        nargs="+",
        type=int,
        help="zero shot with each of these classes unseen in "
        "turn × the seeds, on the first data set (--full: 0..9); a binomial test against chance",
    )
    p.add_argument("--rounds", type=int, help="bi-level rounds per run (default 40)")
    p.add_argument("--workers", type=int, help="parallel training processes (default 2; 1 runs in this process)")
    return p


def run_settings(variant: str, setting: str, seed: int, imbalance_ratio: float, rounds: int,
                 dataset: str = "digits", unseen_class: int | None = None):  # fmt: skip
    """The [`ProtoEvflRunConfig`] of one run."""
    from .data import VerticalDataConfig
    from .task import ProtoEvflRunConfig
    from .training import ProtoEvflTrainingArguments

    spec = VARIANTS[variant]
    unseen = (seed % 10 if unseen_class is None else unseen_class) if setting == "zero_shot" else None
    scale = {k: v for k, v in DATA_SCALE[dataset].items() if k != "ratio"}
    data = VerticalDataConfig(dataset=dataset, unseen_class=unseen, imbalance_ratio=imbalance_ratio, seed=seed,
                              **scale)  # fmt: skip
    warmup = min(ProtoEvflTrainingArguments.warmup_rounds, rounds // 2)
    training = ProtoEvflTrainingArguments(rounds=rounds, warmup_rounds=warmup, seed=seed, **spec["train"])
    return ProtoEvflRunConfig(data=data, training=training, **spec["model"])


def _run_job(job: tuple, rounds: int, out: str | None):
    dataset, variant, setting, seed, ratio = job
    settings = run_settings(variant, setting, seed, ratio, rounds, dataset)
    if variant == "local_only":
        from .baselines import run_local_only

        metrics = run_local_only(settings)
        return job, {k: v for k, v in metrics.items() if k in REPORTED or k.startswith("acc_class")}
    from .baselines import oracle_unseen_metrics
    from .training import run_federation

    result = run_federation(settings)
    if out is not None:  # keep one Proto-EVFL federation as the published artifact (top model + party encoders)
        from . import SPEC
        from .inference import save_federation

        save_federation(result.top_model, result.party_models, Path(out) / "artifact", SPEC)
        _save_record(Path(out) / "artifact", job, result.metrics)
    metrics = dict(result.metrics)
    if settings.data.unseen_class is not None and settings.classifier == "prototype":
        metrics.update(oracle_unseen_metrics(result.predictions, settings.data.unseen_class, settings.temperature))
    return job, {k: v for k, v in metrics.items() if k in REPORTED or k.startswith("acc_class")}


def _run_unseen_job(job: tuple, rounds: int) -> tuple[tuple, dict]:
    """One zero-shot Proto-EVFL run with class `unseen` never labelled: its unseen-class recall and precision."""
    from .baselines import oracle_unseen_metrics
    from .training import run_federation

    dataset, seed, ratio, unseen = job
    settings = run_settings("proto_evfl", "zero_shot", seed, ratio, rounds, dataset, unseen_class=unseen)
    result = run_federation(settings)
    stats = unseen_class_stats(result.predictions["labels"], result.predictions["predictions"], unseen)
    stats.update(oracle_unseen_metrics(result.predictions, unseen, settings.temperature))
    return job, {**stats, "seed": seed, "accuracy": float(result.metrics["accuracy"])}


def _save_record(artifact: Path, job: tuple, measured: dict) -> None:
    """The top model's training record (what `hf-ext push proto_evfl` renders the card from): its own test numbers."""
    from hf_ext.core.records import metric, save_training_record

    dataset, variant, setting, seed, ratio = job
    names = {"accuracy": ("accuracy", "accuracy"), "macro_f1": ("macro-F1", "f1"),
             "unseen_accuracy": ("unseen-class accuracy", "accuracy")}  # fmt: skip
    save_training_record(
        artifact,
        method="proto_evfl",
        command="hf-ext reproduce proto_evfl",
        datasets=[{"name": dataset, "hub_id": None, "description": f"{dataset}, vertically split, {setting} setting"}],
        metrics=[
            metric(label, kind, measured[key], dataset=dataset, higher_is_better=True)
            for key, (label, kind) in names.items()
            if key in measured
        ],
        config={"dataset": dataset, "variant": variant, "setting": setting, "seed": seed, "imbalance_ratio": ratio},
        notes=f"Proto-EVFL top model, {setting} setting on {dataset}, seed {seed}",
        skip_nonfinite=True,
    )


def _finite(values) -> bool:
    return all(isinstance(v, int | float) and v == v and abs(v) != float("inf") for v in values)


def _summarise(per_seed: list[dict[str, float]]) -> dict[str, dict]:
    """Per metric: mean ± sample SD over the seeds ([`~hf_ext.core.reporting.summarize`]); a metric with a
    non-finite value at some seed is kept per seed only."""
    keys = [k for k in per_seed[0] if k != "seconds"]
    return {k: summarize(v).to_dict() for k in keys if _finite(v := [m[k] for m in per_seed])}


def _cell_key(row: dict) -> tuple:
    return row["dataset"], row["setting"], row["imbalance_ratio"]


def _cell_rows(rows: list[dict], key: tuple) -> dict[str, dict]:
    """The rows of one (dataset, setting, IR) cell, by variant."""
    return {r["variant"]: r for r in rows if _cell_key(r) == key}


def _same_cell(a: dict, b: dict) -> bool:
    return _cell_key(a) == _cell_key(b)


def _paired(rows: list[dict], reference: str = "vanilla_vfl") -> list[dict]:
    """Per (dataset, setting, IR): each variant minus the reference, seed by seed (same split and init), as
    [`~hf_ext.core.reporting.paired_difference`] (mean, sample SD, 95 % t interval, `per_pair`)."""
    out = []
    for row in rows:
        ref = next((r for r in rows if r["variant"] == reference and _same_cell(r, row)), None)
        if ref is None or row["variant"] == reference:
            continue
        diffs = {}
        for key in ("accuracy", "unseen_accuracy"):
            if key in row["per_seed"][0] and key in ref["per_seed"][0]:
                a, b = [m[key] for m in row["per_seed"]], [m[key] for m in ref["per_seed"]]
                if _finite(a + b):
                    diffs[key] = paired_difference(a, b).to_dict()
        out.append({k: row[k] for k in ("dataset", "setting", "imbalance_ratio", "variant")} | {"minus_" + reference:
                    diffs})  # fmt: skip
    return out


def _baseline_premise(rows: list[dict], dataset: str, setting: str, ratio: float) -> Premise:
    """The positive control: vanilla VFL > 30 % accuracy (majority rate + 20 points) and > local-only, per seed mean."""
    cell = _cell_rows(rows, (dataset, setting, ratio))
    if "vanilla_vfl" not in cell or "local_only" not in cell:
        return Premise(BASELINE_PREMISE, False, "vanilla_vfl or local_only was not run")
    vfl = cell["vanilla_vfl"]["metrics"]["accuracy"]["mean"]
    local = cell["local_only"]["metrics"]["accuracy"]["mean"]
    ok = vfl > 0.1 + 0.2 and vfl > local
    return Premise(BASELINE_PREMISE, ok, f"vanilla VFL {100 * vfl:.1f} %, local-only {100 * local:.1f} %")


def decide_verdicts(rows: list[dict]) -> list:
    """The stated rules, decided per (dataset, setting, IR) on the paired per-seed differences."""
    verdicts = []
    for dataset, setting, ratio in dict.fromkeys(_cell_key(r) for r in rows):  # in table order
        cell = _cell_rows(rows, (dataset, setting, ratio))
        where = f" [{dataset}, IR {ratio:g}]"
        proto = cell.get("proto_evfl")
        if proto is None:
            continue
        premise = _baseline_premise(rows, dataset, setting, ratio)
        if setting == "long_tail":
            premise = combine(premise, long_tail_control(cell))
        else:
            premise = combine(premise, zero_shot_control(proto, CHANCE_UNSEEN))

        def seeds(variant, key):
            return [m[key] for m in cell[variant]["per_seed"]]

        rule = RULES[setting]
        if setting == "long_tail" and "vanilla_vfl" in cell:
            d = paired_difference(seeds("proto_evfl", "accuracy"), seeds("vanilla_vfl", "accuracy"))
            verdicts.append(_tagged(rule.decide(d, premise), where))
        if setting == "zero_shot" and "unseen_accuracy" in proto["per_seed"][0]:
            unseen = seeds("proto_evfl", "unseen_accuracy")
            d = paired_difference(unseen, [CHANCE_UNSEEN] * len(unseen))
            verdicts.append(_tagged(rule.decide(d, premise), where))
        key = "unseen_accuracy" if setting == "zero_shot" else "accuracy"
        for variant in ABLATIONS:
            if variant in cell and key in cell[variant]["per_seed"][0] and key in proto["per_seed"][0]:
                d = paired_difference(seeds("proto_evfl", key), seeds(variant, key))
                verdicts.append(_tagged(ablation_rule(variant, key).decide(d), where))
    return verdicts


def _unseen_sweep(run: ProtoEvflReproduceArguments, rows: list[dict]) -> dict:
    """Zero shot with each of `run.unseen_classes` unseen in turn × the seeds, on the first data set; the verdict
    by [`UNSEEN_SWEEP_RULE`] with the pooled binomial test, after its positive control (the oracle prototype)."""
    dataset = run.datasets[0]
    ratio = run.ratios(dataset)[0]
    jobs = [((dataset, seed, ratio, c), run.rounds) for c in run.unseen_classes for seed in run.seeds_for(dataset)]
    runs = [m for _, m in run_jobs(_run_unseen_job, jobs, workers=run.workers, desc="proto_evfl unseen classes",
                                   quiet_loggers=("hf_ext.proto_evfl.ot_selection",))]  # fmt: skip
    control = zero_shot_control({"per_seed": runs}, CHANCE_UNSEEN)
    premise = _baseline_premise(rows, dataset, "zero_shot", ratio) if "zero_shot" in run.settings else None
    sweep = decide_unseen_sweep(runs, CHANCE_UNSEEN, combine(premise, control) if premise else control)
    sweep.update(dataset=dataset, imbalance_ratio=ratio, runs=runs)
    return sweep


def _tagged(verdict, where: str):
    from dataclasses import replace

    return replace(verdict, claim=verdict.claim + where)


def format_table(results: dict) -> str:
    head = ["data", "setting", "IR", "variant", "accuracy", "macro-F1", "unseen acc",
            "Δacc vs vanilla (paired, 95 % CI)", "oracle-P_u unseen", "label leak"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    paired = {(p["dataset"], p["setting"], p["imbalance_ratio"], p["variant"]): p["minus_vanilla_vfl"]
              for p in results["paired"]}  # fmt: skip
    for row in results["rows"]:
        m = row["metrics"]

        def cell(key):  # in percent: the summary of the per-seed values × 100
            return summarize([100 * v for v in m[key]["values"]]).cell(1) if key in m else "–"

        diff = paired.get((row["dataset"], row["setting"], row["imbalance_ratio"], row["variant"]), {})
        acc = diff.get("accuracy")
        delta = "–" if acc is None else paired_difference([100 * v for v in acc["per_pair"]], [0.0] * acc["n"]).cell(1)
        lines.append(f"| {row['dataset']} | {row['setting']} | {row['imbalance_ratio']:g} | {row['variant']} | "
                     f"{cell('accuracy')} | {cell('macro_f1')} | {cell('unseen_accuracy')} | "
                     f"{delta} | {cell('oracle_unseen_accuracy')} | "
                     f"{cell('label_leak_accuracy')} |")  # fmt: skip
    lines.append("")
    lines.append(
        "cells: mean ± sample SD over seeds, in %; Δacc: paired per-seed difference, mean ± SD [95 % t interval]"
    )
    lines.extend(
        v["claim"] + ": " + v["verdict"].upper() + " (" + v["reason"] + ")" for v in results.get("verdicts", [])
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    kwargs = {
        k: getattr(ns, k)
        for k in (
            "seeds",
            "fashion_seeds",
            "imbalance_ratios",
            "variants",
            "settings",
            "datasets",
            "rounds",
            "workers",
            "unseen_classes",
            "out",
        )
        if getattr(ns, k) is not None
    }
    # Explicit arguments win over the --full scale's defaults.
    run = ProtoEvflReproduceArguments(full=ns.full, out=kwargs.pop("out", None))
    for key, value in kwargs.items():
        setattr(run, key, value)
    run.validate()
    if "fashion_mnist" in run.datasets:
        from .data import fashion_mnist_dir

        fashion_mnist_dir()  # fail now, naming the Debian package, not inside a worker
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    rules = [RULES[s] for s in run.settings] + [
        ablation_rule(v, "unseen_accuracy" if s == "zero_shot" else "accuracy")
        for s in run.settings
        for v in ABLATIONS
        if v in run.variants and runs_in(v, s)
    ]
    if run.unseen_classes:
        rules.append(UNSEEN_SWEEP_RULE)
    print_rules(rules)  # the criteria, stated before any run starts
    start = time.perf_counter()
    jobs = [(d, v, s, seed, r) for d in run.datasets for s in run.settings for r in run.ratios(d)
            for v in run.variants for seed in run.seeds_for(d) if runs_in(v, s)]  # fmt: skip
    keep = next((j for j in jobs if j[0] == run.datasets[0] and j[1] == "proto_evfl" and j[2] == run.settings[-1]),
                None)  # fmt: skip
    done: dict[tuple, dict] = {}
    # Slow jobs first, so the two workers finish together.
    calls = sorted([(job, run.rounds, str(out) if job == keep else None) for job in jobs],
                   key=lambda c: c[0][0] != "fashion_mnist")  # fmt: skip
    # OT fallbacks are counted in the metrics instead of logged by every worker.
    for job, metrics in run_jobs(
        _run_job,
        calls,
        workers=run.workers,
        desc="proto_evfl reproduce",
        quiet_loggers=("hf_ext.proto_evfl.ot_selection",),
    ):
        done[job] = metrics
    rows = []
    for d in run.datasets:
        for s in run.settings:
            for r in run.ratios(d):
                for v in (v for v in run.variants if runs_in(v, s)):
                    per_seed = [done[(d, v, s, seed, r)] for seed in run.seeds_for(d)]
                    rows.append({"dataset": d, "setting": s, "imbalance_ratio": r, "variant": v,
                                 "seeds": run.seeds_for(d), "metrics": _summarise(per_seed),
                                 "per_seed": per_seed})  # fmt: skip
    results = {
        "method": "proto_evfl", "scale": "full" if run.full else "quick", "arguments": asdict(run),
        "rules": [r.to_dict() for r in rules], "chance_unseen_accuracy": CHANCE_UNSEEN,
        "data": {
            "digits": "sklearn digits, left/right 4-pixel-column halves (2 parties); 10 aligned labelled samples per "
                      "class (none for the unseen class = seed mod 10 in zero_shot); disjoint long-tailed unaligned "
                      "pools with rotated dominant classes (~337 per party at IR 50); balanced test set, 30 per class",
            "fashion_mnist": "Debian dataset-fashion-mnist (train + t10k pooled), left/right 14-pixel-column halves; "
                             "10 aligned labelled per class (0.95 % of the training entities), ~5,200 unaligned per "
                             "party (head 2,100, IR 100, rotated dominant classes); balanced test set, 100 per class",
        },
        "rows": rows, "paired": [], "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    if "vanilla_vfl" in run.variants:
        results["paired"] = _paired(rows)
    results["verdicts"] = [v.to_dict() for v in decide_verdicts(rows)]
    if run.unseen_classes:
        results["unseen_sweep"] = _unseen_sweep(run, rows)
    results["environment"] = environment()
    results["schema_version"] = RESULTS_SCHEMA_VERSION
    table = format_table(results)
    # the display table the docs renderer reads (hf_ext.core.results_render): the printed table itself
    results["report"] = markdown_tables("Accuracy by data set, setting, imbalance ratio and variant", table)
    results["report"][0]["note"] = (
        "Cells: mean ± sample SD over seeds, in %; Δacc: paired per-seed difference, mean ± SD [95 % t interval]."
    )
    if "unseen_sweep" in results:
        sweep = format_unseen_sweep(results["unseen_sweep"], CHANCE_UNSEEN)
        results["report"] += markdown_tables("Zero shot, every class unseen in turn (Proto-EVFL)", sweep)
        table += "\n\nZero shot, every class unseen in turn (Proto-EVFL):\n" + sweep
    write_results(out / "results.json", results)
    print(table)
    print(f"\nwrote {out / 'results.json'}" + (f" and {out / 'artifact'} (party encoders in parties/)" if keep else "")
          + f" ({results['seconds']:.0f} s)")  # fmt: skip
    results["table"] = table
    return results


if __name__ == "__main__":
    main()
