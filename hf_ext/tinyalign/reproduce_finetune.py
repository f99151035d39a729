"""`hf-ext reproduce tinyalign --finetune` (also part of `--full`): the paper's data-efficiency claim on its own axis,
the **fine-tuning** data ("baseline-level performance with 40 % of the fine-tuning data").

Frozen EfficientNet-Lite0 + SmolLM2-135M-Instruct on Fashion-MNIST with measured captions (as `--pretrained`). Per
arm (the baseline connector; honest TinyAlign, k = 4) and seed: stage 1 (vision tower and LM frozen; connector,
connector2 and the memory scale trained) once on the whole stage-1 split; then stage 2, LoRA on the LM's attention
(q, v; rank 8) with the connectors still training, on 20 / 40 / 60 / 100 % of a separate fine-tuning split. Every
arm and fraction gets the learning rate of the same small grid with the lowest mean validation CE over seeds (a
validation split disjoint from everything else; chosen values recorded). Seeds are paired: same connector init,
same LoRA init, same batch order per seed.

Stated before running (printed as [`~hf_ext.core.reporting.VerdictRule`]s, paired over seeds, 95 % t-intervals on
test token accuracy): the **premise** — stage 2 on 100 % of the fine-tuning split improves the baseline over its
stage 1 alone — must be confirmed first, else *premise absent*; then "TinyAlign at 40 % reaches the baseline at
100 %" is *confirmed* when TinyAlign(40 %) − baseline(100 %) has its interval above 0, *refuted* when below 0, else
inconclusive; "TinyAlign beats the baseline at 100 %" likewise.

Every finished stage-2 run is appended to `jobs.jsonl` at once, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import copy
import gc
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.devices import add_device_argument, set_device
from hf_ext.core.gc_freeze import gc_frozen
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
from hf_ext.core.run_log import append_record, read_records

from .report import flags_command, references_line, seed_stats, stat_cell

SPLITS = ("memory", "stage1", "finetune", "validation", "test")
LORA_TARGETS = ("q_proj", "v_proj")


@dataclass
class FinetuneRunArguments:
    """Scale of the fine-tuning-axis run (defaults: `--full`; about 1,900 SmolLM2 steps, see the method page)."""

    out: str = str(work_dir("tinyalign", "finetune"))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    fractions: list[float] = field(default_factory=lambda: [0.2, 0.4, 0.6, 1.0])
    learning_rates: list[float] = field(default_factory=lambda: [1e-3, 3e-3])
    variant: str = "k4"
    n_memory: int = 400
    n_stage1: int = 400
    n_finetune: int = 240
    n_validation: int = 80
    n_test: int = 100
    stage1_epochs: float = 1.0
    stage1_lr: float = 3e-3  # the pretrained grid's stage-1 rate (chosen there on the baseline; both arms share it)
    stage2_epochs: float = 2.0
    batch_size: int = 8
    lora_r: int = 8
    lora_alpha: int = 16
    value_num_latents: int = 8
    threads: int = 2


def check_run(run: FinetuneRunArguments) -> None:
    """Refuses, naming the flag, what would crash deep in the run or silently run nothing (before any loading)."""
    from hf_ext.core.validation import check_finite_number, check_positive_int

    from .reproduce_pretrained import variant_kwargs

    for name in ("seeds", "fractions", "learning_rates"):
        if not getattr(run, name):
            raise ValueError(f"--{name.replace('_', '-')} must hold at least one value")
    for seed in run.seeds:
        check_positive_int("--seeds", seed, minimum=0)
    for f in run.fractions:
        check_finite_number("--fractions", f, low=0.0, low_open=True, high=1.0)
    if 1.0 not in run.fractions or 0.4 not in run.fractions:
        raise ValueError(f"--fractions must include 0.4 and 1.0 (the claim compares them), got {run.fractions}")
    for lr in run.learning_rates:
        check_finite_number("--learning-rates", lr, low=0.0, low_open=True, high=1.0)
    for name in ("n_memory", "n_stage1", "n_finetune", "n_validation", "n_test", "batch_size", "lora_r",
                 "lora_alpha", "value_num_latents", "threads"):  # fmt: skip
        check_positive_int(f"--{name.replace('_', '-')}", getattr(run, name))
    check_finite_number("--stage1-epochs", run.stage1_epochs, low=0.0, low_open=True, high=1e4)
    check_finite_number("--stage2-epochs", run.stage2_epochs, low=0.0, low_open=True, high=1e4)
    check_finite_number("--stage1-lr", run.stage1_lr, low=0.0, low_open=True, high=1.0)
    if not variant_kwargs(run.variant, run.value_num_latents)["use_retrieval"] or run.variant.startswith("released"):
        raise ValueError(f"--variant must be an honest TinyAlign variant k<k>, got {run.variant!r}")


def rules(run: FinetuneRunArguments) -> dict[str, VerdictRule]:
    """The rules of the module docstring, printed before the run."""
    premise = "stage 2 on 100 % of the fine-tuning split improves the baseline over stage 1 alone (paired, 95 %)"
    return {
        "finetune_premise": VerdictRule(
            claim="stage 2 (LoRA) on 100 % of the fine-tuning split improves the baseline over its stage 1 alone",
            metric="test token accuracy",
        ),
        "finetune_data_efficiency": VerdictRule(
            claim=f"TinyAlign ({run.variant}) fine-tuned on 40 % of the fine-tuning split reaches the baseline "
            f"fine-tuned on 100 %",
            metric="test token accuracy",
            premise=premise,
        ),
        "finetune_tinyalign_vs_baseline": VerdictRule(
            claim=f"TinyAlign ({run.variant}) beats the baseline after fine-tuning on 100 % of the fine-tuning split",
            metric="test token accuracy",
            premise=premise,
        ),
    }


# ---- data and models ---------------------------------------------------------------------------------------------


def load_splits(run: FinetuneRunArguments, seed: int = 0):
    """Fashion-MNIST split five ways: `memory` (the bank), `stage1`, `finetune`, `validation` (disjoint draws from
    the training file) and `test` (the test file)."""
    from datasets import DatasetDict

    from .fashion import load_fashion_captions

    n_rest = run.n_stage1 + run.n_finetune + run.n_validation
    data = load_fashion_captions(n_memory=run.n_memory, n_train=n_rest, n_test=run.n_test, seed=seed)
    order = np.random.default_rng(seed).permutation(n_rest)
    cuts = np.cumsum([run.n_stage1, run.n_finetune])
    parts = np.split(order, cuts)
    rest = data["train"]
    return DatasetDict(
        {
            "memory": data["memory"],
            **{name: rest.select(np.sort(ids)) for name, ids in zip(("stage1", "finetune", "validation"), parts)},
            "test": data["test"],
        }
    )


def check_bank_is_honest(bank, data) -> None:
    """Raises if the bank holds any row that a model trains or is selected on (stage 1, fine-tuning, validation:
    the splits drawn from the same file as the memory split, so their `index` values are comparable)."""
    if bank.source_ids is None:
        raise RuntimeError("the memory bank does not record its rows (build it from a split with an `index` column)")
    used = {name: set(data[name]["index"]) & set(bank.source_ids) for name in ("stage1", "finetune", "validation")}
    leaks = {name: sorted(ids)[:5] for name, ids in used.items() if ids}
    if leaks:
        raise RuntimeError(f"the honest memory bank shares rows with training/validation splits: {leaks}")


def pretrained_factory(run: FinetuneRunArguments, parts):
    """`factory(variant, private_lm) -> (model, processor)` over the frozen EfficientNet-Lite0 + SmolLM2 `parts`;
    `private_lm=True` gives the model its own copy of the LM (stage 2 adds LoRA to it; the shared one stays as is)."""
    from .pretrained_parts import pretrained_tinyalign
    from .reproduce_pretrained import variant_kwargs

    def factory(variant: str, private_lm: bool):
        tower, lm, tokenizer = parts
        lm = copy.deepcopy(lm) if private_lm else lm
        return pretrained_tinyalign((tower, lm, tokenizer), **variant_kwargs(variant, run.value_num_latents))

    return factory


def add_lora(model, run: FinetuneRunArguments, seed: int) -> int:
    """LoRA (PEFT) on the LM's q/v projections, in place; returns the number of LoRA parameters."""
    from peft import LoraConfig, inject_adapter_in_model

    torch.manual_seed(seed)
    config = LoraConfig(r=run.lora_r, lora_alpha=run.lora_alpha, lora_dropout=0.0, target_modules=list(LORA_TARGETS))
    inject_adapter_in_model(config, model.language_model)
    return sum(p.numel() for n, p in model.language_model.named_parameters() if "lora_" in n)


def _evaluate(model, processor, split, words) -> dict:
    from .evaluation import evaluate_captions

    ev = evaluate_captions(model, processor, split, batch_size=32, class_words=words, generate=False)
    return {"loss": ev["test_loss"], "token_accuracy": ev["token_accuracy"]}


def _train(model, processor, dataset, run, seed, lr, epochs, lora: bool):
    from transformers import PrinterCallback

    from .train import run_arguments
    from .trainer import make_trainer

    args = run_arguments(run.out, epochs, lr, run.batch_size, seed, disable_tqdm=True)
    trainer, curve = make_trainer(model, processor, dataset, args, stage="pretrain")  # LM and tower frozen
    if lora:  # ... except the LoRA matrices (the optimiser is built in train(), after this)
        for name, p in model.language_model.named_parameters():
            p.requires_grad_("lora_" in name)
    trainer.remove_callback(PrinterCallback)
    start = time.perf_counter()
    trainer.train()
    return curve.losses, time.perf_counter() - start


def run_arm(run, data, factory, variant: str, seed: int, words, log: Path | None = None) -> tuple[dict, list[dict]]:
    """Stage 1 once, then stage 2 for every fraction × learning rate; `(stage-1 row, stage-2 rows)`."""
    from .data import memory_source
    from .processing_tinyalign import build_memory_bank

    torch.manual_seed(seed)
    model, processor = factory(variant, False)
    bank = None
    if model.config.use_retrieval:
        source = memory_source(data, variant)
        if "vision_features" in source.column_names:
            source = source.remove_columns("vision_features")
        bank = build_memory_bank(model, processor, source, batch_size=32, progress=False)
        check_bank_is_honest(bank, data)
    losses, seconds = _train(model, processor, data["stage1"], run, seed, run.stage1_lr, run.stage1_epochs, False)
    stage1 = {
        "variant": variant,
        "seed": seed,
        "validation": _evaluate(model, processor, data["validation"], words),
        "test": _evaluate(model, processor, data["test"], words),
        "losses": losses,
        "seconds": seconds,
    }
    if log is not None:  # stage-1 rows too, so a run cut short keeps the premise's reference
        append_record(log, {"stage": 1, **stage1})
    keep = ("language_model.", "vision_tower.")
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if not k.startswith(keep)}
    del model
    rows = []
    for fraction in sorted(run.fractions, reverse=True):
        subset = data["finetune"].shuffle(seed=seed)
        subset = subset.select(range(max(run.batch_size, int(round(fraction * len(subset))))))
        for lr in run.learning_rates:
            tuned, _ = factory(variant, True)
            missing, unexpected = tuned.load_state_dict(state, strict=False)
            if unexpected or any(not k.startswith(keep) for k in missing):
                raise RuntimeError(f"stage-1 state does not fit: missing {missing[:3]}, unexpected {unexpected[:3]}")
            if bank is not None:
                tuned.set_memory_bank(bank)  # keys made with the stage-1 model's snapshot, loaded above
            n_lora = add_lora(tuned, run, seed)
            losses, seconds = _train(tuned, processor, subset, run, seed, lr, run.stage2_epochs, True)
            row = {
                "variant": variant,
                "seed": seed,
                "fraction": fraction,
                "learning_rate": lr,
                "n_finetune_rows": len(subset),
                "lora_parameters": n_lora,
                "validation": _evaluate(tuned, processor, data["validation"], words),
                "test": _evaluate(tuned, processor, data["test"], words),
                "losses": losses,
                "seconds": seconds,
            }
            rows.append(row)
            if log is not None:
                append_record(log, {"stage": 2, **row})
            print(
                f"{variant} seed {seed} {fraction:.0%} lr {lr:g}: val CE {row['validation']['loss']:.3f}, test acc "
                f"{row['test']['token_accuracy']:.3f} ({seconds:.0f} s)",
                flush=True,
            )
            del tuned
            gc.collect()
    return stage1, rows


# ---- selection, verdicts, tables -----------------------------------------------------------------------------------


def choose_learning_rates(rows: list[dict]) -> dict[tuple[str, float], float]:
    """Per (variant, fraction): the grid value with the lowest mean validation CE over seeds (ties: the smaller
    rate). Only validation scores are read, never test."""
    by_cell: dict[tuple[str, float], dict[float, list[float]]] = {}
    for r in rows:
        by_cell.setdefault((r["variant"], r["fraction"]), {}).setdefault(r["learning_rate"], []).append(
            r["validation"]["loss"]
        )
    return {cell: min(sorted(grid), key=lambda lr: float(np.mean(grid[lr]))) for cell, grid in by_cell.items()}


def chosen_rows(rows: list[dict], chosen: dict) -> dict[tuple[str, float], dict[int, dict]]:
    """`{(variant, fraction): {seed: row at the chosen rate}}`."""
    out: dict[tuple[str, float], dict[int, dict]] = {}
    for r in rows:
        if chosen.get((r["variant"], r["fraction"])) == r["learning_rate"]:
            out.setdefault((r["variant"], r["fraction"]), {})[r["seed"]] = r
    return out


def _paired(a: dict[int, dict], b: dict[int, dict], metric: str = "token_accuracy"):
    seeds = sorted(set(a) & set(b))
    return paired_difference([a[s]["test"][metric] for s in seeds], [b[s]["test"][metric] for s in seeds])


def decide(run: FinetuneRunArguments, stage1: list[dict], rows: list[dict]) -> dict:
    """The premise, then the two claims (see [`rules`])."""
    table = rules(run)
    cells = chosen_rows(rows, choose_learning_rates(rows))
    base1 = {r["seed"]: r for r in stage1 if r["variant"] == "baseline"}
    base100, ta40, ta100 = cells[("baseline", 1.0)], cells[(run.variant, 0.4)], cells[(run.variant, 1.0)]
    premise_verdict = table["finetune_premise"].decide(_paired(base100, base1))
    premise = Premise(
        "stage 2 improves over stage 1 alone (baseline, 100 %)",
        premise_verdict.verdict == CONFIRMED,
        premise_verdict.reason,
    )
    return {
        "finetune_premise": premise_verdict,
        "finetune_data_efficiency": table["finetune_data_efficiency"].decide(_paired(ta40, base100), premise),
        "finetune_tinyalign_vs_baseline": table["finetune_tinyalign_vs_baseline"].decide(
            _paired(ta100, base100), premise
        ),
    }


def report_tables(run: FinetuneRunArguments, stage1: list[dict], rows: list[dict]) -> list[dict]:
    """The display tables: test metrics by arm and fine-tuning share at the chosen rate, and the paired gaps."""
    from hf_ext.core.results_schema import table

    chosen = choose_learning_rates(rows)
    cells = chosen_rows(rows, chosen)
    body = []
    for variant in ("baseline", run.variant):
        s1 = [r for r in stage1 if r["variant"] == variant]
        body.append(
            [variant, "stage 1 only", "-"]
            + [
                stat_cell(seed_stats([r[s][m] for r in s1]))
                for s, m in (("validation", "loss"), ("test", "loss"), ("test", "token_accuracy"))
            ]  # fmt: skip
        )
        for f in sorted(run.fractions):
            c = list(cells.get((variant, f), {}).values())
            body.append(
                [variant, f"{f:.0%}", f"{chosen.get((variant, f), float('nan')):g}"]
                + [
                    stat_cell(seed_stats([r[s][m] for r in c]))
                    for s, m in (("validation", "loss"), ("test", "loss"), ("test", "token_accuracy"))
                ]  # fmt: skip
            )
    gaps = []
    for f in sorted(run.fractions):
        if (run.variant, f) in cells and ("baseline", f) in cells:
            d = _paired(cells[(run.variant, f)], cells[("baseline", f)])
            gaps.append([f"{f:.0%}", f"{d.mean:+.3f}", "no interval" if not d.has_interval else
                         f"[{d.ci_low:+.3f}, {d.ci_high:+.3f}]", d.n])  # fmt: skip
    return [
        table(
            "Fine-tuning axis: stage 2 (LoRA on SmolLM2) on a share of the fine-tuning split, learning rate chosen "
            "per arm and share on validation (mean ± sample SD over seeds)",
            ["arm", "fine-tuning share", "chosen lr", "validation CE", "test CE", "test token acc"],
            body,
            note="Stage 1 (LM frozen) ran once per arm and seed on the whole stage-1 split; every stage-2 row starts "
            "from it.",
        ),
        table(
            f"Fine-tuning axis: paired TinyAlign ({run.variant}) − baseline at the same fine-tuning share "
            "(test token accuracy)",
            ["fine-tuning share", "mean", "95 % interval", "pairs"],
            gaps,
        ),
    ]


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="hf-ext reproduce tinyalign --finetune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = FinetuneRunArguments()
    p.add_argument("--finetune", action="store_true", help="(selects this run)")
    p.add_argument("--out", default=d.out)
    add_device_argument(p)
    p.add_argument(
        "--summarise",
        nargs="+",
        metavar="JOBS",
        help="train nothing: build --out/results.json from these jobs.jsonl files (stage-1 and stage-2 rows of runs "
        "with the same settings, e.g. a run cut short plus one that finished its seeds; the first row of a cell wins)",
    )
    p.add_argument(
        "--log-only",
        action="store_true",
        help="train and log jobs.jsonl for the given seeds / fractions / rates only (any fractions), no verdict",
    )
    p.add_argument(
        "--arms",
        nargs="+",
        choices=("baseline", "variant"),
        default=["baseline", "variant"],
        help="with --log-only: train only these arms (`variant` = --variant), e.g. to split one run's cells over "
        "processes; every (arm, seed) cell is seeded on its own, so the split changes no number",
    )
    for name in ("seeds", "fractions", "learning_rates"):
        kind = int if name == "seeds" else float
        p.add_argument(f"--{name.replace('_', '-')}", nargs="+", type=kind, default=getattr(d, name))
    for name in ("n_memory", "n_stage1", "n_finetune", "n_validation", "n_test", "batch_size", "lora_r",
                 "lora_alpha", "value_num_latents", "threads"):  # fmt: skip
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    for name in ("stage1_epochs", "stage1_lr", "stage2_epochs"):
        p.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(d, name))
    p.add_argument("--variant", default=d.variant)
    return p


def summarise(run: FinetuneRunArguments, stage1: list[dict], rows: list[dict], data) -> dict:
    """results.json fields of the fine-tuning axis (schema: `hf_ext.core.results_schema`)."""
    from .fashion import FASHION_WORDS
    from .metrics import constant_references

    decided = decide(run, stage1, rows)
    chosen = choose_learning_rates(rows)
    return {
        "rules": {name: rule.to_dict() for name, rule in rules(run).items()},
        "verdicts": {name: v.to_dict() for name, v in decided.items()},
        "report": report_tables(run, stage1, rows),
        "chosen_learning_rates": [
            {"variant": v, "fraction": f, "learning_rate": lr} for (v, f), lr in sorted(chosen.items())
        ],
        "references": constant_references(data["finetune"]["caption"], data["test"]["caption"], FASHION_WORDS),
        "stage1": stage1,
        "stage2": rows,
    }


def main(argv: list[str] | None = None) -> dict:
    ns = vars(make_parser().parse_args(argv))
    ns.pop("finetune")
    set_device(ns.pop("device"))  # --device cuda without a GPU stops here, before any loading
    summarise_logs, log_only, arms = ns.pop("summarise"), ns.pop("log_only"), ns.pop("arms")
    run = FinetuneRunArguments(**ns)
    if len(arms) < 2 and not log_only:
        raise ValueError("--arms selects arms for --log-only runs only (the verdicts need both)")
    if log_only:
        check_run(FinetuneRunArguments(**{**ns, "fractions": [0.4, 1.0]}))
    else:
        check_run(run)
    print_rules(rules(run))  # stated before anything loads or trains
    if summarise_logs:
        return _from_logs(run, summarise_logs)
    torch.set_num_threads(run.threads)
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    from .fashion import FASHION_WORDS
    from .pretrained_parts import add_vision_features, load_frozen_parts, pretrained_tinyalign

    start = time.perf_counter()
    parts = load_frozen_parts()
    data = load_splits(run)
    probe, processor = pretrained_tinyalign(parts, use_retrieval=False)
    data = {name: add_vision_features(probe, processor, split) for name, split in data.items()}
    del probe
    log = out / "jobs.jsonl"
    log.write_text("")
    factory = pretrained_factory(run, parts)
    stage1, rows = [], []
    with gc_frozen():
        for seed in run.seeds:
            for variant in [v for v, arm in (("baseline", "baseline"), (run.variant, "variant")) if arm in arms]:
                s1, r = run_arm(run, data, factory, variant, seed, FASHION_WORDS, log)
                stage1.append(s1)
                rows += r
    if log_only:
        return {"stage1": stage1, "stage2": rows}
    return _write(run, stage1, rows, data, time.perf_counter() - start)


def _from_logs(run: FinetuneRunArguments, logs: list[str]) -> dict:
    """results.json from jobs.jsonl files: rows without a `stage` key are stage-2 rows (older logs); the first row
    of each (stage, variant, seed, fraction, rate) wins. Only the seeds of `run.seeds` are used."""
    stage1, rows, seen = [], [], set()
    for path in logs:
        for row in read_records(path):  # a torn last line of a killed run is skipped
            stage = row.pop("stage", 2)
            key = (stage, row["variant"], row["seed"], row.get("fraction"), row.get("learning_rate"))
            if key in seen or row["seed"] not in run.seeds:
                continue
            seen.add(key)
            (stage1 if stage == 1 else rows).append(row)
    data = load_splits(run)  # the captions only (references): no model is loaded
    return _write(run, stage1, rows, data, float("nan"), logs=logs)


def subset_of(run: FinetuneRunArguments) -> dict:
    """`{knob: {"full": default, "run": value}}` for every knob that makes `run` smaller than the default grid (the
    page labels such a run a subset); more seeds than the default is no subset, fewer is."""
    default = FinetuneRunArguments()
    out = {}
    for k, v in asdict(run).items():
        if k in ("out", "threads") or v == getattr(default, k):
            continue
        if k == "seeds" and len(v) >= len(default.seeds):
            continue
        out[k] = {"full": getattr(default, k), "run": v}
    return out


def missing_cells(run: FinetuneRunArguments, stage1: list[dict], rows: list[dict]) -> list[str]:
    """The (arm, seed[, share, rate]) cells of `run`'s grid that no row holds, in words (a run stopped early)."""
    have1 = {(r["variant"], r["seed"]) for r in stage1}
    have2 = {(r["variant"], r["seed"], r["fraction"], r["learning_rate"]) for r in rows}
    out = []
    for seed in run.seeds:
        for variant in ("baseline", run.variant):
            if (variant, seed) not in have1:
                out.append(f"{variant} seed {seed} (stage 1)")
            for f in run.fractions:
                lost = [lr for lr in run.learning_rates if (variant, seed, f, lr) not in have2]
                if lost:
                    out.append(f"{variant} seed {seed} at {f:.0%} (rate {', '.join(f'{lr:g}' for lr in lost)})")
    return out


def _write(run, stage1, rows, data, seconds: float, logs: list[str] | None = None) -> dict:
    import os

    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {
        "method": "tinyalign",
        # its own scale (docs/results/tinyalign/finetune/): `--full` merges these fields into the full results
        "scale": "finetune",
        "command": flags_command("hf-ext reproduce tinyalign --finetune", run)
        + (" (cells logged by --log-only runs, summarised with --summarise)" if logs else ""),
        "settings": asdict(run),
        "data": {
            "source": "Fashion-MNIST (Debian dataset-fashion-mnist), captions = class + measured brightness, width, "
            "area terciles; frozen EfficientNet-Lite0 (64 px) + SmolLM2-135M-Instruct",
            **{k: len(v) for k, v in data.items()},
        },
        **summarise(run, stage1, rows, data),
        "environment": environment(),
        "seconds": round(seconds, 1) if seconds == seconds else None,
        "summarised_from": logs,
        "load_average_at_end": list(os.getloadavg()),
        "schema_version": RESULTS_SCHEMA_VERSION,
    }
    if subset_of(run):  # the page's label: which knobs the run shrank, against the default grid
        results["subset"] = subset_of(run)
    missing = missing_cells(run, stage1, rows)
    if missing:  # a run cut short: what it did not finish
        results["partial"] = {"note": "cells not run: " + "; ".join(missing)}
    write_results(out / "results.json", results)
    for name, v in results["verdicts"].items():
        print(f"{name}: {v['verdict'].upper()} ({v['reason']})")
    print(references_line(results["references"]))
    print(f"wrote {out / 'results.json'}")
    return results


if __name__ == "__main__":
    main()
