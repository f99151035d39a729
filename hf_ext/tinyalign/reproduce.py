"""`hf-ext reproduce tinyalign`: the baseline connector vs TinyAlign (k ∈ {1, 4}) on real handwritten digits with
measured-attribute captions, for a small and a larger frozen LM, over seeds; loss curves, steps to a loss threshold,
test token accuracy, class-word accuracy, BLEU, data efficiency over train fractions, and the released code's leaky
retrieval as a named ablation. Prints the table and writes `results.json`, `loss_curves.png` and `artifact/`."""

from __future__ import annotations

import argparse
import functools
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.parallel import run_jobs
from hf_ext.core.paths import work_dir
from hf_ext.core.reporting import (
    CONFIRMED,
    RESULTS_SCHEMA_VERSION,
    Premise,
    VerdictRule,
    environment,
    paired_difference,
    print_rules,
    write_results,
)

from .components import LM_CONFIGS, VISION_CONFIG, pretrain_lm, pretrain_vision_encoder
from .configuration_tinyalign import TinyAlignConfig
from .data import DIGIT_WORDS, load_digit_captions, memory_source
from .evaluation import evaluate_captions
from .metrics import class_word, constant_references, majority_hits, steps_to_threshold
from .modeling_tinyalign import TinyAlignForConditionalGeneration
from .processing_tinyalign import TinyAlignProcessor, build_memory_bank, build_tokenizer
from .report import METRICS, format_table, plot_curves, report_fields, seed_stats
from .train import run_arguments
from .trainer import make_trainer


@dataclass
class TinyAlignReproduceArguments:
    """Scale of `hf-ext reproduce tinyalign`. Quick by default; `--full` gives 3 seeds, k in {1, 4}, every fraction on
    both LMs and the released-retrieval ablation."""

    full: bool = False
    out: str = str(work_dir("tinyalign"))
    lm_sizes: list[str] = field(default_factory=lambda: ["small", "large"])
    seeds: list[int] = field(default_factory=lambda: [0])
    ks: list[int] = field(default_factory=lambda: [4])
    fractions: list[float] = field(default_factory=lambda: [0.4, 1.0])
    efficiency_lms: list[str] = field(default_factory=lambda: ["small"])
    efficiency_k: int = 4
    epochs: float = 2.0
    stage2_epochs: float = 3.0
    stage2_lr: float = 1e-3
    batch_size: int = 32
    leakage_ablation: bool = False
    workers: int = 2

    def __post_init__(self):
        if self.full:
            self.seeds, self.ks, self.fractions = [0, 1, 2], [1, 4], [0.2, 0.4, 0.6, 0.8, 1.0]
            self.efficiency_lms, self.leakage_ablation = list(self.lm_sizes), True


def validate_run(run: TinyAlignReproduceArguments) -> None:
    """Refuses settings that would crash deep in a worker or silently run nothing (before any training)."""
    for name in ("seeds", "ks", "fractions", "lm_sizes"):
        if not getattr(run, name):
            raise ValueError(f"--{name.replace('_', '-')} must hold at least one value")
    if any(isinstance(k, bool) or k < 1 for k in run.ks) or run.efficiency_k < 1:
        raise ValueError(f"--ks must be top-k values >= 1, got {run.ks}")
    if any(not (0.0 < f <= 1.0) for f in run.fractions):  # also refuses NaN
        raise ValueError(f"--fractions must lie in (0, 1], got {run.fractions}")
    if not run.epochs > 0 or not (run.stage2_epochs >= 0) or not math.isfinite(run.epochs + run.stage2_epochs):
        raise ValueError(
            f"--epochs must be > 0 and --stage2-epochs >= 0 (finite), got {run.epochs} and {run.stage2_epochs}"
        )
    if run.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {run.workers}")
    if any(s < 0 for s in run.seeds):
        raise ValueError(f"--seeds must be >= 0, got {run.seeds}")


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hf-ext reproduce tinyalign", description=__doc__)
    p.add_argument(
        "--full",
        action="store_true",
        help="3 seeds, k in {1, 4}, fractions 20..100 %% on both LMs, and the released-retrieval ablation",
    )
    p.add_argument(
        "--pretrained",
        action="store_true",
        help="the paper's setting instead: frozen EfficientNet-Lite0 + SmolLM2-135M on Fashion-MNIST "
        "(its own flags: hf-ext reproduce tinyalign --pretrained --help)",
    )
    p.add_argument(
        "--finetune",
        action="store_true",
        help="only the fine-tuning axis of --full: stage 2 (LoRA on SmolLM2) on 20..100 %% of a fine-tuning split, "
        "baseline vs TinyAlign, 3 paired seeds (its own flags: hf-ext reproduce tinyalign --finetune --help)",
    )
    p.add_argument(
        "--digits-only",
        action="store_true",
        help="with --full: the digits sweep alone, without the fine-tuning axis (its own run, --finetune, and its "
        "own report)",
    )
    p.add_argument(
        "--out", default=str(work_dir("tinyalign")), help="output folder (results.json, loss_curves.png, artifact/)"
    )
    from hf_ext.core.devices import add_device_argument

    add_device_argument(p)
    p.add_argument("--lm-sizes", nargs="+", choices=sorted(LM_CONFIGS))
    p.add_argument("--seeds", nargs="+", type=int)
    p.add_argument("--ks", nargs="+", type=int, help="top-k values of TinyAlign")
    p.add_argument("--fractions", nargs="+", type=float, help="train-split fractions for data efficiency")
    p.add_argument("--epochs", type=float, help="stage-1 epochs (LM frozen)")
    p.add_argument("--stage2-epochs", type=float, help="stage-2 epochs (LM trained); 0 = stage 1 only")
    p.add_argument("--workers", type=int, help="parallel training processes (default 2)")
    p.add_argument(
        "--leakage-ablation",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run the released (leaky) retrieval as `released-k4` (default: only with --full)",
    )
    return p


class FrozenLMs(dict):
    """`{size: (state dict, info)}` of the frozen LMs, each pretrained (or loaded from the disk cache) on first use:
    a run on the small LM alone (the Space's fallback, `hf-ext train tinyalign --setting tiny`) does not pretrain
    the large one. `pretrain_lm` seeds itself, so the order in which sizes are pretrained changes nothing."""

    def __init__(self, tokenizer, captions):
        super().__init__()
        self._tokenizer, self._captions = tokenizer, captions

    def __missing__(self, size: str):
        if size not in LM_CONFIGS:
            raise KeyError(f"no LM size {size!r}; choose from {sorted(LM_CONFIGS)}")
        self[size] = pretrain_lm(size, self._tokenizer, self._captions)
        return self[size]


@functools.lru_cache(maxsize=1)
def setup():
    """Data, tokenizer and the pretrained frozen parts (cached on disk and per process; the LMs on first use)."""
    data = load_digit_captions(seed=0)
    tokenizer = build_tokenizer(data["memory"]["caption"])
    vision_state, vision_info = pretrain_vision_encoder(data["memory"])
    return data, tokenizer, vision_state, vision_info, FrozenLMs(tokenizer, data["memory"]["caption"])


def variant_config(variant: str) -> dict:
    """`baseline`, `k<k>` (honest TinyAlign) or `released-k<k>` (leaky query + bank containing the train split).

    The digits setting keeps the released memory tokens (`memory_token_norm=False`, connector2's output as is): its
    tables were measured that way and a rerun of the full grid with the norm did not fit this session; the pretrained
    setting (`reproduce_pretrained`), where connector2's output sits at 1/25 of SmolLM2's embedding norm, uses it."""
    if variant == "baseline":
        return {"use_retrieval": False}
    k = int(variant.rsplit("k", 1)[1])
    return {
        "use_retrieval": True,
        "memory_top_k": k,
        "query_includes_answer": variant.startswith("released"),
        "memory_token_norm": False,
    }


def build_model(lm: str, variant: str, seed: int):
    """A fresh model with the pretrained vision encoder and LM, and (for retrieval variants) its memory bank."""
    data, tokenizer, vision_state, _, lms = setup()
    lm_state, lm_info = lms[lm]
    config = TinyAlignConfig(
        vision_config=dict(VISION_CONFIG), text_config=dict(lm_info["text_config"]), **variant_config(variant)
    )
    torch.manual_seed(seed)
    model = TinyAlignForConditionalGeneration(config)
    model.load_components(vision_state, lm_state)
    processor = TinyAlignProcessor(tokenizer, config)
    if config.use_retrieval:
        build_memory_bank(model, processor, memory_source(data, variant), progress=False)
    return model, processor


def run_one(
    run: TinyAlignReproduceArguments,
    lm: str,
    variant: str,
    seed: int,
    fraction: float,
    save_to: str = "",
    evaluate: bool = True,
):
    """Stage 1 (LM frozen) then stage 2 (LM trained) on `fraction` of the train split; metrics after each stage.
    `evaluate=False` (the Space's fallback, which only needs the saved model) skips the test-split scoring after each
    stage; the trained weights are the same (each `Trainer` reseeds, and scoring changes no weight)."""
    from transformers import PrinterCallback

    data = setup()[0]
    model, processor = build_model(lm, variant, seed)
    train = data["train"].shuffle(seed=seed)
    train = train.select(range(max(run.batch_size, int(round(fraction * len(train))))))
    losses, seconds, stages = [], 0.0, {}
    for stage, epochs, lr in (("pretrain", run.epochs, 1e-3), ("finetune", run.stage2_epochs, run.stage2_lr)):
        if epochs <= 0:
            continue
        args = run_arguments(run.out, epochs, lr, run.batch_size, seed)
        trainer, curve = make_trainer(model, processor, train, args, stage=stage)
        trainer.remove_callback(PrinterCallback)
        start = time.perf_counter()
        trainer.train()
        seconds += time.perf_counter() - start
        losses += curve.losses
        if not evaluate:
            stages[stage] = {"final_train_loss": float(np.mean(curve.losses[-5:]))}
            continue
        ev = evaluate_captions(model, processor, data["test"])
        metrics = {k: ev[k] for k in ("test_loss", "token_accuracy", "class_word_accuracy", "bleu", "class_word_hits")}
        metrics["final_train_loss"] = float(np.mean(curve.losses[-5:]))
        metrics["neighbour_class_match"] = float("nan")
        if ev["neighbours"]:
            bank_words = [class_word(c) for c in model.memory_bank.captions]
            hits = [
                bank_words[j] == class_word(ref)
                for ids, ref in zip(ev["neighbours"], data["test"]["caption"])
                for j in ids
            ]
            metrics["neighbour_class_match"] = float(np.mean(hits))
        stages[stage] = metrics
    if save_to:  # a candidate for the published artifact: saved with its validation score (select_artifact)
        from hf_ext.core.hub import save_artifact

        from . import SPEC

        val = evaluate_captions(model, processor, data["validation"], generate=False)
        stages["validation"] = {"loss": val["test_loss"], "token_accuracy": val["token_accuracy"]}
        save_artifact(model, save_to, SPEC)
        processor.save_pretrained(save_to)  # AutoProcessor / AutoImageProcessor / AutoTokenizer load it back
    return (lm, variant, seed, fraction), stages, losses, seconds, ev["examples"] if evaluate else []


def artifact_candidates(run: TinyAlignReproduceArguments) -> list[tuple]:
    """The cells whose model may become the published artifact: honest TinyAlign (every k, LM and seed) trained on
    the whole train split. The baseline (no memory) and the released leaky retrieval are not TinyAlign artifacts."""
    return [(lm, f"k{k}", s, 1.0) for lm in run.lm_sizes for k in run.ks for s in run.seeds]


def select_artifact(validation: dict[tuple, dict]) -> tuple:
    """The candidate cell with the lowest validation caption CE (ties: the higher validation token accuracy, then
    the first cell in sorted order). `validation` maps a cell to `{"loss", "token_accuracy"}` measured on the
    validation split, never on test."""
    if not validation:
        raise ValueError("select_artifact needs at least one candidate cell with a validation score")
    return min(sorted(validation), key=lambda c: (validation[c]["loss"], -validation[c]["token_accuracy"]))


PREMISE = (
    "the baseline learns the task: its class-word accuracy (100 % of the train split) above the training-majority "
    "class's"
)


def rules(run: TinyAlignReproduceArguments) -> dict[str, VerdictRule]:
    """The verdict rules, printed before the run ([`~hf_ext.core.reporting.VerdictRule`]), paired over seeds.

    The **premise**, checked first: the baseline connector learns the task at all, its test class-word accuracy
    above the image-blind training-majority class's. Its unit is the test digit (the baseline's hit rate over the
    seeds minus the majority class's hit, paired over digits), so that it has an interval with one seed; if it fails,
    both claims read *premise absent*.

    `data_efficiency` restates the old criterion ("mean token accuracy of TinyAlign at a fraction >= the baseline's
    at 100 %") as a paired comparison with a 95 % interval: *confirmed* only when TinyAlign at the smallest fraction
    (0.4 when run, the paper's) is better with confidence, *refuted* when it is worse with confidence; the smallest
    fraction whose mean matches is still printed as before."""
    k, f = run.efficiency_k, _efficiency_fraction(run)
    return {
        "premise": VerdictRule(
            claim=PREMISE,
            metric="test class-word accuracy, per test digit (baseline's mean over seeds − the majority class's hit)",
            margin=0.0,
        ),
        "tinyalign_vs_baseline": VerdictRule(
            claim=f"TinyAlign (k = {k}) beats the baseline connector at 100 % of the train split",
            metric="test token accuracy",
            margin=0.0,
            premise=PREMISE,
        ),
        "data_efficiency": VerdictRule(
            claim=f"TinyAlign (k = {k}) trained on {f:.0%} of the train split reaches the baseline trained on 100 %",
            metric="test token accuracy",
            margin=0.0,
            premise=PREMISE,
        ),
    }


def _efficiency_fraction(run: TinyAlignReproduceArguments) -> float:
    below = sorted(f for f in run.fractions if f < 1.0)
    return 0.4 if 0.4 in below else (below[0] if below else 1.0)


def verdicts(run: TinyAlignReproduceArguments, done: dict, reference_hits: list[int]) -> dict:
    """Each rule's verdict per LM: the premise first (per test digit, against `reference_hits`, the training-majority
    class's per-digit hits from [`~hf_ext.tinyalign.metrics.majority_hits`]), then the claims (paired over the seeds
    both arms finished)."""
    k, f = f"k{run.efficiency_k}", _efficiency_fraction(run)
    decided, table = {}, rules(run)
    for lm in run.lm_sizes:
        base = [done[(lm, "baseline", s, 1.0)]["metrics"]["class_word_hits"] for s in run.seeds
                if (lm, "baseline", s, 1.0) in done]  # fmt: skip
        if not base:
            continue
        if any(len(h) != len(reference_hits) for h in base):
            raise ValueError(f"{lm} LM: the baseline's class-word hits and the reference's cover different test sets")
        premise_verdict = table["premise"].decide(paired_difference(np.mean(base, axis=0).tolist(), reference_hits))
        premise = Premise(PREMISE, premise_verdict.verdict == CONFIRMED, premise_verdict.reason)
        decided[f"premise ({lm} LM)"] = premise_verdict
        pairs = {
            "tinyalign_vs_baseline": ((lm, k, 1.0), (lm, "baseline", 1.0)),
            "data_efficiency": ((lm, k, f), (lm, "baseline", 1.0)),
        }
        for name, (a, b) in pairs.items():
            seeds = [s for s in run.seeds if (*a[:2], s, a[2]) in done and (*b[:2], s, b[2]) in done]
            if not seeds or (name == "data_efficiency" and (lm not in run.efficiency_lms or f == 1.0)):
                continue
            diff = paired_difference(
                [done[(*a[:2], s, a[2])]["metrics"]["token_accuracy"] for s in seeds],
                [done[(*b[:2], s, b[2])]["metrics"]["token_accuracy"] for s in seeds],
            )
            decided[f"{name} ({lm} LM)"] = table[name].decide(diff, premise)
    return decided


def summarise(run: TinyAlignReproduceArguments, done: dict) -> dict:
    variants = (
        ["baseline"] + [f"k{k}" for k in run.ks] + ([f"released-k{run.efficiency_k}"] if run.leakage_ablation else [])
    )
    rows, curves, efficiency = [], {}, {}
    for lm in run.lm_sizes:
        base_final = np.mean([done[(lm, "baseline", s, 1.0)]["metrics"]["final_train_loss"] for s in run.seeds])
        for v in variants:
            cells = [done[(lm, v, s, 1.0)] for s in run.seeds if (lm, v, s, 1.0) in done]
            if not cells:
                continue
            steps = [steps_to_threshold(c["losses"], base_final) for c in cells]
            row = {
                "lm": lm,
                "variant": v,
                "metrics": {k: seed_stats([c["metrics"][k] for c in cells]) for k in METRICS},
                "steps_to_baseline_final_loss": steps,
                "train_seconds": seed_stats([c["seconds"] for c in cells]),
                "stage1_metrics": {k: seed_stats([c["stage1"][k] for c in cells]) for k in METRICS},
                "per_seed": [{k: v for k, v in c["metrics"].items() if k != "class_word_hits"} for c in cells],
                "examples": cells[0]["examples"],
            }
            rows.append(row)
            n = min(len(c["losses"]) for c in cells)
            curves[f"{lm} {v}"] = np.mean([c["losses"][:n] for c in cells], axis=0).tolist()
        if lm in run.efficiency_lms:
            eff = {}
            for v in ("baseline", f"k{run.efficiency_k}"):
                eff[v] = {
                    str(f): {
                        k: seed_stats([done[(lm, v, s, f)]["metrics"][k] for s in run.seeds])
                        for k in ("token_accuracy", "class_word_accuracy", "bleu", "test_loss")
                    }
                    for f in run.fractions
                }
            target = eff["baseline"]["1.0"]["token_accuracy"]["mean"]
            match = [
                f for f in run.fractions if eff[f"k{run.efficiency_k}"][str(f)]["token_accuracy"]["mean"] >= target
            ]
            eff["smallest_fraction_matching_baseline_100"] = min(match) if match else None
            eff["criterion"] = "mean test token accuracy of TinyAlign >= baseline at 100 % of the train split"
            efficiency[lm] = eff
    return {"rows": rows, "curves": curves, "data_efficiency": efficiency}


def main(argv: list[str] | None = None) -> dict:
    import sys

    if "--pretrained" in (sys.argv[1:] if argv is None else argv):  # the paper's setting: its own run and flags
        from .reproduce_pretrained import main as pretrained_main

        return pretrained_main(sys.argv[1:] if argv is None else argv)
    if "--finetune" in (sys.argv[1:] if argv is None else argv):  # the fine-tuning axis alone: its own flags
        from .reproduce_finetune import main as finetune_main

        return finetune_main(sys.argv[1:] if argv is None else argv)
    ns = make_parser().parse_args(argv)
    from hf_ext.core.devices import set_device

    set_device(ns.device)
    run = TinyAlignReproduceArguments(full=ns.full, out=ns.out)
    for key in ("lm_sizes", "seeds", "ks", "fractions", "epochs", "stage2_epochs", "workers"):
        if getattr(ns, key) is not None:
            setattr(run, key, getattr(ns, key))
    if ns.leakage_ablation is not None:
        run.leakage_ablation = ns.leakage_ablation
    validate_run(run)
    if ns.digits_only and not run.full:
        raise ValueError("--digits-only leaves the fine-tuning axis out of --full; without --full there is none")
    with_finetune_axis = run.full and not ns.digits_only
    run.efficiency_lms = [lm for lm in run.efficiency_lms if lm in run.lm_sizes]
    if 1.0 not in run.fractions:
        run.fractions.append(1.0)
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    print_rules(rules(run))  # stated before anything trains
    if with_finetune_axis:  # the fine-tuning axis runs after the digits sweep; its rules are stated now, with these
        from .reproduce_finetune import FinetuneRunArguments
        from .reproduce_finetune import rules as finetune_rules

        finetune_run = FinetuneRunArguments(out=str(out / "finetune"))
        print_rules(finetune_rules(finetune_run))
    start = time.perf_counter()
    lms = setup()[-1]  # pretrain (or load) the frozen parts once, before the workers start
    for size in LM_CONFIGS:  # every size, as results.json records each LM's pretraining
        lms[size]
    variants = ["baseline"] + [f"k{k}" for k in run.ks]
    jobs = [(lm, v, s, 1.0) for lm in run.lm_sizes for v in variants for s in run.seeds]
    if run.leakage_ablation:
        jobs += [(lm, f"released-k{run.efficiency_k}", s, 1.0) for lm in run.lm_sizes for s in run.seeds]
    jobs += [
        (lm, v, s, f)
        for lm in run.efficiency_lms
        for v in ("baseline", f"k{run.efficiency_k}")
        for s in run.seeds
        for f in run.fractions
        if f != 1.0
    ]
    if f"k{run.efficiency_k}" not in variants:
        jobs += [(lm, f"k{run.efficiency_k}", s, 1.0) for lm in run.efficiency_lms for s in run.seeds]
    candidates = artifact_candidates(run)
    jobs.sort(key=lambda j: (j[0] != "large", -j[3], j[1] == "baseline"))  # longest first, for the worker pool
    done = {}
    staging = out / "artifact_candidates"
    calls = [(run, *j, str(staging / "-".join(map(str, j[:3]))) if j in candidates else "") for j in jobs]
    log = out / "jobs.jsonl"  # one line per finished job, so an interrupted sweep keeps what it measured
    log.write_text("")
    for key, stages, losses, seconds, examples in run_jobs(
        run_one, calls, workers=run.workers, desc="tinyalign reproduce"
    ):
        final = stages.get("finetune", stages["pretrain"])
        done[key] = {
            "metrics": final,
            "stage1": stages["pretrain"],
            "losses": losses,
            "seconds": seconds,
            "examples": examples,
            "validation": stages.get("validation"),
        }
        with log.open("a") as f:
            f.write(json.dumps({"job": key, **done[key]}) + "\n")
    summary = summarise(run, done)
    data, _, _, vision_info, lms = setup()
    references = constant_references(data["train"]["caption"], data["test"]["caption"], DIGIT_WORDS)
    decided = verdicts(run, done, majority_hits(data["test"]["caption"], references["majority_class"]))
    scored = {c: done[c]["validation"] for c in candidates if c in done and done[c]["validation"]}
    artifact_job = select_artifact(scored) if scored else None
    if artifact_job is not None:  # the best cell by validation becomes `artifact/`; the other candidates go
        shutil.rmtree(out / "artifact", ignore_errors=True)
        (staging / "-".join(map(str, artifact_job[:3]))).rename(out / "artifact")
    shutil.rmtree(staging, ignore_errors=True)
    results = {
        "method": "tinyalign",
        "scale": "full" if run.full else "quick",
        "settings": asdict(run),
        "data": {
            "source": "sklearn load_digits (real 8x8 handwritten digits), captions = class + measured thickness, "
            "width, slant terciles",
            **{k: len(v) for k, v in data.items()},
        },
        "frozen_parts": {
            "vision_encoder": vision_info,
            "lms": {k: {kk: vv for kk, vv in v[1].items() if kk != "text_config"} for k, v in lms.items()},
        },
        **summary,
        "references": references,
        "artifact": {
            "cell": None if artifact_job is None else dict(zip(("lm", "variant", "seed", "fraction"), artifact_job)),
            "selected_by": "lowest validation caption CE among honest TinyAlign cells at 100 % of the train split "
            "(validation split: 120 digits carved from the test part, never scored as test)",
            "validation": [
                {**dict(zip(("lm", "variant", "seed", "fraction"), c)), **v} for c, v in sorted(scored.items())
            ],
        },
        "rules": {name: rule.to_dict() for name, rule in rules(run).items()},
        "verdicts": {name: v.to_dict() for name, v in decided.items()},
        "environment": environment(),
        "seconds": round(time.perf_counter() - start, 1),
    }
    results["schema_version"] = RESULTS_SCHEMA_VERSION
    results.update(report_fields(results, format_table({**results, "verdict_objects": decided})))
    if ns.digits_only:
        results["command"] = "hf-ext reproduce tinyalign --full --digits-only"
    if with_finetune_axis:  # the paper's data-efficiency claim on its own axis (reproduce_finetune), merged in
        from .reproduce_finetune import main as finetune_main

        tuned = finetune_main(["--out", finetune_run.out])
        results["rules"].update(tuned["rules"])
        results["verdicts"].update(tuned["verdicts"])
        results["report"] += tuned["report"]
        results["finetune_axis"] = {k: v for k, v in tuned.items() if k not in ("rules", "verdicts", "report")}
        results["seconds"] = round(time.perf_counter() - start, 1)
    write_results(out / "results.json", results)
    if artifact_job is not None and (out / "artifact").is_dir():  # what `hf-ext push tinyalign` renders the card from
        from hf_ext.core.records import metric, save_training_record

        m = done[artifact_job]["metrics"]
        lm, variant, seed, _ = artifact_job
        save_training_record(
            out / "artifact",
            method="tinyalign",
            command="hf-ext reproduce tinyalign" + (" --full" if run.full else ""),
            datasets=[
                {
                    "name": "sklearn-digits-captions",
                    "hub_id": None,
                    "description": "sklearn load_digits images with generated class + style captions",
                }
            ],
            metrics=[
                metric(
                    "token acc",
                    "accuracy",
                    m["token_accuracy"],
                    dataset="sklearn-digits-captions",
                    higher_is_better=True,
                ),
                metric(
                    "class-word acc",
                    "accuracy",
                    m["class_word_accuracy"],
                    dataset="sklearn-digits-captions",
                    higher_is_better=True,
                ),
                metric("BLEU", "bleu", m["bleu"], dataset="sklearn-digits-captions", higher_is_better=True),
                metric("test CE", "loss", m["test_loss"], dataset="sklearn-digits-captions", higher_is_better=False),
            ],
            config={
                "lm": lm,
                "variant": variant,
                "seed": seed,
                **{k: v for k, v in asdict(run).items() if k in ("epochs", "stage2_epochs", "full")},
            },
            notes=f"TinyAlign {variant} on the {lm} LM, seed {seed}: of the sweep's honest TinyAlign cells, the one "
            f"with the lowest validation caption CE ({done[artifact_job]['validation']['loss']:.3f})",
            skip_nonfinite=True,
        )
    plot_curves(summary["curves"], out / "loss_curves.png")
    table = format_table({**results, "verdict_objects": decided})
    print(table)
    print(
        f"\nwrote {out / 'results.json'}, {out / 'loss_curves.png'} and {out / 'artifact'} ({results['seconds']:.0f} s)"
    )
    results["table"] = table
    return results


if __name__ == "__main__":
    main()
