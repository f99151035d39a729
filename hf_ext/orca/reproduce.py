"""`hf-ext reproduce orca`: does ORCA remove a spurious CTR → DT shortcut, and does its gain grow with the shortcut?

On the spurious-shortcut generator ([`~hf_ext.orca.spurious_generator.SpuriousOrcaConfig`]: hidden clickbait seen
through a noisy proxy, impulse noise shared by click and dwell, no item ids) at shortcut strengths `s`, every table has
the same rows: the exact posterior (**oracle**), the training posterior applied to the test (`oracle@train`), the class
prior (**trivial**), a **single-task** DT model, the MTL **baseline**, **ORCA** and ORCA's own **raw head**. Models of
one seed share the training data and the initialisation of every shared module (paired), and are scored on two fixed
test sets of >= 5,000 clicked rows: an i.i.d. one (same `s`) and a shifted one (the shortcut at `--test-strength`, 0 by
default). Prints the verdict rules ([`hf_ext.core.reporting`]) before the run, the tables, the paired differences and
the verdict; writes `results.json`, the CTR × DT heatmaps and the ORCA artifact that `hf-ext push orca` uploads. `--data
ml-100k` runs the real-data check instead (see [`~hf_ext.orca.movielens`])."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.parallel import run_jobs
from hf_ext.core.paths import work_dir
from hf_ext.core.progress import set_quiet, trainer_progress
from hf_ext.core.reporting import Results, Verdict, reproduce_command, write_results
from hf_ext.core.results_render import markdown_tables

from .causal_generator import POST_CLICK_FIELDS
from .configuration_orca import OrcaConfig
from .data import numpy_columns
from .families import FAMILIES, get_family
from .metrics import ctr_dt_heatmap
from .modeling_orca import OrcaModel
from .report import (
    paired_differences,
    paired_table,
    plot_heatmaps,
    print_criteria,
    reference_table,
    rules,
    score,
    verdict,
)
from .reproduce_data import IID_TEST_SEED, SHIFT_TEST_SEED, _columns, _configs, _frame, references_alongside
from .reproduce_io import copy_joined_heatmaps, full_subset, load_joined, save_record
from .train import OrcaTrainingArguments
from .trainer import (
    EVAL_COLUMNS,
    MODEL_COLUMNS,
    BestStateCallback,
    OrcaEarlyStoppingCallback,
    OrcaTrainer,
    TensorRows,
    stacked_collator,
)

VARIANTS = {
    "single-task": {"use_orca": False, "ctr_loss_weight": 0.0},
    "baseline": {"use_orca": False},
    "orca": {"use_orca": True},
}
ABLATIONS = {
    "orca-no-mask": {"use_orca": True, "_use_mask_fea": False},
    "orca-no-inter": {"use_orca": True, "use_inter": False},
    "orca-no-inst": {"use_orca": True, "use_inst": False},
}
# `--arms`: ORCA as the released code trains it (the NDE loss also trains the shared network through h_T), and the
# baselines of issue 39 (`modeling_orca_baselines.py`): a single-task factorization machine, an ESMM-style
# entire-space model and the PLE multi-task baseline.
ARMS = {
    "orca-code": {"use_orca": True, "detach_nde_input": False},
    "fm": {"_model": "fm", "use_orca": False, "ctr_loss_weight": 0.0},
    "esmm": {"_model": "esmm", "use_orca": False},
    "ple": {"use_orca": False, "backbone": "ple"},
}
# Arms without a click head: trained on the clicked rows only, for as many optimiser steps as the MTL models.
DT_ONLY = ("single-task", "fm")


@dataclass
class OrcaReproduceArguments:
    """Scale of `hf-ext reproduce orca`. Quick scale by default; `--full` gives the complete sweep."""

    full: bool = False
    out: str = field(default_factory=lambda: str(work_dir("orca")))
    backbones: list[str] = field(default_factory=lambda: ["mmoe"])
    strengths: list[float] = field(default_factory=lambda: [0.0, 1.0, 2.0, 3.0])
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    num_impressions: int = 48_000
    num_users: int = 1_000
    num_items: int = 300
    family: str = "spurious"
    test_impressions: int = 30_000
    test_strength: float = 0.0
    epochs: float = 6.0
    batch_size: int = 512
    ablations: bool = False
    arms: list[str] = field(default_factory=list)
    grid_lr: list[float] = field(default_factory=lambda: [1e-3])
    ctr_own_stopping: bool = False
    only_arms: bool = False
    join_only: bool = False
    workers: int = 2
    device: str = "auto"

    def __post_init__(self):
        if self.full:
            # The premise family, the two ends of the sweep, 5 paired seeds, ORCA also as released (h_T not
            # detached), the baselines of issue 39 and the three ablations, every arm tuned on the same
            # learning-rate grid (validation DT CE), CTR read at its own best validation AUC.
            # 10 arms x 2 s x 5 seeds x 2 lr = 200 trainings at the quick size.
            self.family, self.strengths, self.seeds = "reliance", [0.0, 3.0], [0, 1, 2, 3, 4]
            self.arms, self.grid_lr, self.ctr_own_stopping = ["orca-code", "fm", "esmm", "ple"], [1e-3, 3e-3], True
            self.ablations = True


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hf-ext reproduce orca", description=__doc__.splitlines()[0])
    p.add_argument(
        "--full",
        action="store_true",
        help="reliance family, s in {0, 3}, 5 seeds, + ORCA as released, FM, ESMM, PLE and the ablations, lr grid "
        "{1e-3, 3e-3}, CTR on its own stopping",
    )
    p.add_argument(
        "--arms",
        nargs="*",
        choices=list(ARMS),
        help="extra arms: orca-code (h_T not detached), fm (single-task FM), esmm (ESMM-style), ple (PLE baseline)",
    )
    p.add_argument(
        "--join",
        nargs="+",
        metavar="RESULTS_JSON",
        help="rows of earlier runs with the same settings (paired by seed); only the missing rows are trained",
    )
    p.add_argument("--only-arms", action="store_true", help="train the --arms (and --ablations) only (others: --join)")
    p.add_argument(
        "--join-only", action="store_true", help="train nothing: report the --join rows (pairs on the seeds they share)"
    )
    p.add_argument("--grid-lr", nargs="+", type=float, help="learning rates tried by every arm (validation DT CE)")
    p.add_argument("--ctr-own-stopping", action="store_true", help="CTR AUC at each model's best validation AUC")
    p.add_argument("--out", default=None, help="output folder (default: work_dir('orca'))")
    p.add_argument("--data", choices=["synthetic", "ml-100k"], default="synthetic")
    p.add_argument(
        "--family",
        choices=list(FAMILIES),
        help="synthetic generator family: spurious (the control without the premise, quick default) or reliance "
        "(the paper's premise built in)",
    )
    p.add_argument("--num-items", type=int, help="items of the reliance family (default 300)")
    p.add_argument("--ml100k-dir", default=None, help="folder with ml-100k.inter/.user/.item, or the recbole wheel")
    p.add_argument("--backbones", nargs="+", choices=["mmoe", "ple"])
    p.add_argument("--strengths", nargs="+", type=float, help="training shortcut strengths s")
    p.add_argument("--test-strength", type=float, help="shortcut strength of the shifted test set (default 0)")
    p.add_argument("--seeds", nargs="+", type=int)
    p.add_argument("--num-impressions", type=int)
    p.add_argument("--test-impressions", type=int)
    p.add_argument("--epochs", type=float, help="maximum epochs (early stopping on the validation DT CE)")
    p.add_argument("--ablations", action="store_true", help="also train ORCA without mask / interaction / weights")
    p.add_argument("--workers", type=int, help="parallel training processes (default 2)")
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="auto: whatever Accelerate picks (the GPU when there is one)",
    )
    p.add_argument(
        "--quiet", action="store_true", help="no progress bars (also when CI is set or stderr is no terminal)"
    )
    return p


def train_one(splits, names, sizes, backbone: str, seed: int, run: OrcaReproduceArguments, **overrides) -> OrcaModel:
    """Trains one model with `OrcaTrainer` (early stopping on the validation DT CE when `splits` has a
    `validation` split); `overrides` go to `OrcaConfig` (plus `_use_mask_fea` and `post_click_fields`)."""
    use_mask = overrides.pop("_use_mask_fea", True)
    post_click = overrides.pop("post_click_fields", list(POST_CLICK_FIELDS))
    clicked_only = overrides.pop("_clicked_only", False)
    lr = overrides.pop("_lr", None)
    ctr_snapshot = overrides.pop("_ctr_snapshot", False)
    model_class = _model_class(overrides.pop("_model", "orca"))
    config = OrcaConfig(
        field_names=names, field_vocab_sizes=sizes, post_click_fields=post_click, backbone=backbone, **overrides
    )
    torch.manual_seed(seed)
    model = model_class(config)
    train = splits["train"]
    epochs = run.epochs
    if clicked_only:  # the single-task reference sees the DT loss only, i.e. the clicked rows ...
        full = len(train)
        train = train.filter(lambda c: [x > 0.5 for x in c], input_columns="click_labels", batched=True)
        epochs = run.epochs * full / max(len(train), 1)  # ... for as many optimiser steps as the MTL models
    val = splits.get("validation")
    device = getattr(run, "device", "auto")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is visible")
    args = OrcaTrainingArguments(
        output_dir=str(Path(run.out) / "trainer"),
        num_train_epochs=epochs,
        seed=seed,
        data_seed=seed,
        per_device_train_batch_size=run.batch_size,
        logging_strategy="no",
        use_mask_fea=use_mask,
        eval_strategy="epoch" if val is not None else "no",
        disable_tqdm=True,
        report_to="none",
        use_cpu=device == "cpu",
        dataloader_pin_memory=device != "cpu" and torch.cuda.is_available(),
        remove_unused_columns=False,
        **({"learning_rate": lr} if lr is not None else {}),
    )
    # In-memory tensor batches: the same rows and values as the Arrow rows through the default collator, without
    # formatting every row (a third of a quick run's training time went there).
    trainer = OrcaTrainer(
        model=model,
        args=args,
        data_collator=stacked_collator,
        train_dataset=TensorRows(train, MODEL_COLUMNS),
        eval_dataset=None if val is None else TensorRows(val, EVAL_COLUMNS),
    )
    snapshot = BestStateCallback() if ctr_snapshot and val is not None else None
    if snapshot is not None:
        trainer.add_callback(snapshot)
    trainer_progress(trainer)  # the step bar on stderr (not in parallel workers), no log lines on stdout
    trainer.train()
    stopper = [c for c in trainer.callback_handler.callbacks if isinstance(c, OrcaEarlyStoppingCallback)]
    # What the tuning grid reads: the best validation DT CE of the run (its early-stopping criterion).
    model.val_dt_ce = stopper[0].best if stopper and stopper[0].best is not None else float("nan")
    model.ctr_snapshot = snapshot.state if snapshot is not None else None
    return model.eval()


def _model_class(name: str):
    """The model class of an arm: ORCA's (also the MTL and PLE baselines) or a baseline of
    `modeling_orca_baselines.py`."""
    if name == "orca":
        return OrcaModel
    from .modeling_orca_baselines import OrcaESMMModel, OrcaFMModel

    return {"fm": OrcaFMModel, "esmm": OrcaESMMModel}[name]


@torch.no_grad()
def predict(model: OrcaModel, dataset, batch_size: int = 8192) -> dict[str, np.ndarray]:
    """Click probabilities and DT bin probabilities (prediction head and raw head) on a model-features dataset."""
    model.eval()
    ids = torch.as_tensor(np.asarray(numpy_columns(dataset, ["input_ids"])["input_ids"], dtype=np.int64))
    out = {"click_probs": [], "dt_probs": [], "dt_probs_raw": []}
    for start in range(0, len(ids), batch_size):
        o = model(input_ids=ids[start : start + batch_size].to(model.device))
        out["click_probs"].append(o.click_probs.float().cpu())
        out["dt_probs"].append(o.dt_logits.float().softmax(-1).cpu())
        out["dt_probs_raw"].append(o.dt_logits_raw.float().softmax(-1).cpu())
    return {k: torch.cat(v).numpy() for k, v in out.items()}


def evaluate(model: OrcaModel, test) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Table metrics of a model on a model-features test set (as the demo uses it)."""
    pred = predict(model, test)
    frame = {
        "click": np.asarray(test["click_labels"]),
        "dwell_bin": np.asarray(test["dwell_labels"]),
        "dwell_seconds": np.asarray(test["dwell_seconds"]),
    }
    users = np.asarray(test["user_ids"]) if "user_ids" in test.column_names else None
    metrics = score(frame, pred["click_probs"], pred["dt_probs"], model.config.bin_seconds, user_ids=users)
    if model.config.use_orca:
        raw = score(frame, pred["click_probs"], pred["dt_probs_raw"], model.config.bin_seconds, user_ids=users)
        metrics.update({f"raw_{k}": v for k, v in raw.items()})
    return metrics, pred


# ----------------------------------------------------------------------------------------------------------------
# Synthetic sweep
# ----------------------------------------------------------------------------------------------------------------


def _run_job(run: OrcaReproduceArguments, strength: float, seed: int, backbone: str, variant: str, keep: bool):
    """Trains one (s, seed, backbone, variant) and scores it on the i.i.d. and shifted tests."""
    fam = get_family(run.family)
    train_cfg, val_cfg, iid_cfg, shift_cfg = _configs(run, strength, seed)
    splits = {"train": _frame(train_cfg)[1], "validation": _frame(val_cfg)[1]}
    overrides = dict({**VARIANTS, **ABLATIONS, **ARMS}[variant], post_click_fields=list(fam.post_click_fields))
    if variant in DT_ONLY:
        overrides["_clicked_only"] = True
    arch = overrides.pop("backbone", backbone)  # the ple arm: the MTL baseline on PLE, in the mmoe tables
    model, chosen, grid = None, None, []
    for lr in run.grid_lr:  # every arm gets the same grid, chosen on the validation DT CE (never on a test set)
        candidate = train_one(
            splits,
            list(fam.field_names),
            fam.vocab_sizes(train_cfg),
            arch,
            seed,
            run,
            _lr=lr,
            _ctr_snapshot=run.ctr_own_stopping and variant not in DT_ONLY,
            **overrides,
        )
        grid.append([lr, candidate.val_dt_ce])
        if model is None or candidate.val_dt_ce < model.val_dt_ce:
            model, chosen = candidate, lr
    tuned = {"chosen_lr": chosen, "val_dt_ce": model.val_dt_ce, "grid_val_dt_ce": grid} if len(grid) > 1 else {}
    scores, maps = {}, {}
    for name, cfg in (("iid", iid_cfg), ("shifted", shift_cfg)):
        raw_ds, features = _frame(cfg)
        test = _columns(raw_ds)
        pred = predict(model, features)
        click = None if variant in DT_ONLY else pred["click_probs"]
        scores[(variant, name)] = {**score(test, click, pred["dt_probs"], model.config.bin_seconds), **tuned}
        if model.ctr_snapshot is not None:  # CTR judged with the weights of its own best validation AUC
            scores[(variant, name)]["ctr_auc_own_stop"] = _ctr_auc_at(model, model.ctr_snapshot, features, test)
        if model.config.use_orca and variant == "orca":
            scores[("orca-raw", name)] = score(test, click, pred["dt_probs_raw"], model.config.bin_seconds)
        if keep and name == "shifted":
            clicked = test["click"] == 1
            maps[f"{backbone} {variant}"] = ctr_dt_heatmap(
                pred["click_probs"][clicked], pred["dt_probs"][clicked].argmax(-1)
            )
    if keep and variant == "orca":
        from hf_ext.core.hub import save_artifact

        from . import SPEC

        save_artifact(model.cpu(), Path(run.out) / "artifact", SPEC)
        save_record(run, strength, seed, backbone, scores)
    return (strength, seed, backbone), scores, maps


def _ctr_auc_at(model: OrcaModel, state: dict, features, test: dict) -> float:
    """CTR AUC of `model` with the weights `state` (restored afterwards)."""
    from .metrics import ctr_metrics

    current = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    click = predict(model, features)["click_probs"]
    model.load_state_dict(current)
    return ctr_metrics(test["click"], click)["ctr_auc"]


def run_synthetic(run: OrcaReproduceArguments, joined: dict | None = None) -> dict:
    """Trains every (s, seed, backbone, variant) not already in `joined` (cells of earlier runs with the same
    settings, [`load_joined`]) and returns the cells of both, with the reference rows and the heatmaps."""
    # --only-arms: the extra arms alone, and the ablations with --ablations (added to earlier rows through --join).
    core = ([] if run.only_arms else list(VARIANTS)) + (list(ABLATIONS) if run.ablations else [])
    variants = core + [a for a in run.arms if a not in core]
    top = max(run.strengths)
    joined = joined or {}
    jobs = [
        (run, s, seed, b, v, s == top and seed == run.seeds[0] and b == run.backbones[0])
        for s in run.strengths
        for seed in run.seeds
        for b in run.backbones
        for v in variants
        if (s, seed, v) not in joined.get(b, {}) and not run.join_only
    ]
    cells: dict = {b: dict(joined.get(b, {})) for b in run.backbones}
    heatmaps: dict = {}
    references = references_alongside(run)  # while the workers train
    # In job order: the cells (and so results.json) list the rows the same way on every rerun.
    results = list(run_jobs(_run_job, jobs, workers=run.workers, desc="orca reproduce", ordered=True))
    for (s, seed), refs in references.result().items():  # the reference rows first, as always
        if "heatmap" in refs:
            heatmaps["oracle (test posterior)"] = refs.pop("heatmap")
        for b in run.backbones:
            for (row, name), m in refs.items():
                cells[b].setdefault((s, seed, row), {})[name] = m
    for (s, seed, b), scores, maps in results:
        for (row, name), m in scores.items():
            cells[b].setdefault((s, seed, row), {})[name] = m
        heatmaps.update(maps)
    return {"cells": cells, "heatmaps": heatmaps}


def check_arguments(ns: argparse.Namespace) -> None:
    """Every number of `hf-ext reproduce orca` by range, before any work; a `ValueError` names the flag."""
    import math

    def bad(flag: str, rule: str, value) -> ValueError:
        return ValueError(f"{flag} must be {rule}, got {value!r}")

    for seed in ns.seeds or []:
        if not 0 <= seed < 2**32:
            raise bad("--seeds", "integers in [0, 2**32)", seed)
    if ns.seeds is not None and len(set(ns.seeds)) != len(ns.seeds):
        raise bad("--seeds", "distinct (paired differences need one run per seed)", ns.seeds)
    for s in ns.strengths or []:
        if not math.isfinite(s) or s < 0:
            raise bad("--strengths", "finite numbers >= 0", s)
    if ns.test_strength is not None and (not math.isfinite(ns.test_strength) or ns.test_strength < 0):
        raise bad("--test-strength", "a finite number >= 0", ns.test_strength)
    for flag, value in (("--num-impressions", ns.num_impressions), ("--test-impressions", ns.test_impressions)):
        if value is not None and value < 1_000:
            raise bad(flag, ">= 1000 (smaller logs leave too few clicked rows to score)", value)
    if ns.epochs is not None and (not math.isfinite(ns.epochs) or ns.epochs <= 0):
        raise bad("--epochs", "a finite number > 0", ns.epochs)
    if ns.num_items is not None and ns.num_items < 2:
        raise bad("--num-items", ">= 2", ns.num_items)
    for lr in ns.grid_lr or []:
        if not math.isfinite(lr) or lr <= 0:
            raise bad("--grid-lr", "finite numbers > 0", lr)
    if ns.workers is not None and ns.workers < 1:
        raise bad("--workers", ">= 1", ns.workers)


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    check_arguments(ns)
    set_quiet(ns.quiet)
    run = OrcaReproduceArguments(full=ns.full, **({"out": ns.out} if ns.out else {}))
    for key in (
        "backbones",
        "strengths",
        "seeds",
        "num_impressions",
        "test_impressions",
        "test_strength",
        "epochs",
        "workers",
        "family",
        "num_items",
        "arms",
        "grid_lr",
    ):
        if getattr(ns, key) is not None:
            setattr(run, key, getattr(ns, key))
    run.ablations = run.ablations or ns.ablations
    run.only_arms, run.join_only = ns.only_arms, ns.join_only
    run.ctr_own_stopping = run.ctr_own_stopping or ns.ctr_own_stopping
    run.device = ns.device
    if run.device != "cpu" and torch.cuda.is_available() and run.workers > 1:
        run.workers = 1  # one GPU: one training process at a time
    if ns.data == "ml-100k":
        from .movielens import run_movielens

        return run_movielens(run, ns.ml100k_dir)
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    fam = get_family(run.family)
    joined = load_joined(ns.join, run) if ns.join else None
    print_criteria(test=fam.verdict_test, arms=run.arms)
    print(flush=True)
    start = time.perf_counter()
    result = run_synthetic(run, joined)
    cells = result["cells"]
    all_verdicts: list[Verdict] = []
    report: list[dict] = []  # the display tables the docs renderer reads (hf_ext.core.results_render)
    text, record = (
        [],
        {
            "method": "orca",
            "scale": "full" if run.full else "quick",
            "settings": asdict(run),
            "data": f"{fam.description}; train seed = model seed; "
            f"fixed test sets (seeds {IID_TEST_SEED}, {SHIFT_TEST_SEED})",
            "backbones": {},
        },
    )
    for b in run.backbones:
        diffs = paired_differences(cells[b], run.strengths, run.seeds, "shifted")
        diffs_iid = paired_differences(cells[b], run.strengths, run.seeds, "iid")
        chosen = diffs if fam.verdict_test == "shifted" else diffs_iid
        lines, verdicts = verdict(cells[b], chosen, run.strengths, run.seeds, fam.verdict_test)
        all_verdicts += [_on(v, b) for v in verdicts]
        block = [
            f"## {b}: i.i.d. test (same s as training)",
            reference_table(cells[b], run.strengths, run.seeds, "iid"),
            f"\n## {b}: shifted test (shortcut at s = {run.test_strength:g})",
            reference_table(cells[b], run.strengths, run.seeds, "shifted"),
            f"\n## {b}: paired differences, shifted test (positive DT-CE gain = second model better)",
            paired_table(diffs),
            f"\n## {b}: paired differences, i.i.d. test",
            paired_table(diffs_iid),
            f"\n## {b}: reading",
            *lines,
            "",
        ]
        report += markdown_tables(
            [
                f"{b}: i.i.d. test (same s as training), mean ± sample SD over seeds {run.seeds}",
                f"{b}: shifted test (shortcut at s = {run.test_strength:g}), mean ± sample SD over seeds {run.seeds}",
                f"{b}: paired differences, shifted test (positive DT-CE gain = second model better)",
                f"{b}: paired differences, i.i.d. test",
            ],
            "\n\n".join(block[1:8:2]),
        )
        text += block
        record["backbones"][b] = {
            "cells": [{"strength": k[0], "seed": k[1], "row": k[2], **v} for k, v in cells[b].items()],
            "paired_shifted": diffs,
            "paired_iid": diffs_iid,
            "verdict": lines,
            "verdicts": verdicts,
        }
    record["seconds"] = round(time.perf_counter() - start, 1)
    record |= {"subset": subset} if run.full and (subset := full_subset(run)) else {}  # labelled on the page
    if ns.join:  # the docs name the flags that set the numbers, and say that the rows come from several runs
        record["joined"] = {str(p): json.loads(Path(p).read_text(encoding="utf-8"))["seconds"] for p in ns.join}
        command = reproduce_command("orca", argv, skip=("--join", "--only-arms", "--join-only"))
        record["command"] = f"{command} (rows joined from {len(ns.join)} runs: --join)"
    results = Results(
        method="orca",
        scale=record["scale"],
        rules=list(rules(fam.verdict_test, run.arms).values()),
        verdicts=all_verdicts,
    )
    write_results(out / "results.json", {**results.to_dict(), **record, "report": report})
    top = max(run.strengths)
    order = ["oracle (test posterior)"] + [f"{run.backbones[0]} {v}" for v in ("baseline", "orca")]
    panels = {k: result["heatmaps"][k] for k in order if k in result["heatmaps"]}
    if len(panels) == len(order) or not copy_joined_heatmaps(ns.join or [], out, top):
        plot_heatmaps(
            panels,
            out / "heatmaps.png",
            f"shifted test (s = {run.test_strength:g}), trained at s = {top:g}: CTR bucket × DT bin",
        )
    table = "\n".join(text)
    print(table)
    artifact = f" and {out / 'artifact'}" if (out / "artifact").is_dir() else ""
    print(f"\nwrote {out / 'results.json'}, {out / 'heatmaps.png'}{artifact} ({record['seconds']:.0f} s)")
    record["table"] = table
    return record


def _on(v: Verdict, backbone: str) -> Verdict:
    return Verdict(f"{v.claim} ({backbone})", v.verdict, v.reason, v.difference, v.premise)


if __name__ == "__main__":
    main()
