"""`hf-ext reproduce codebc`: CodeBC's stage ablation and tag steering at toy scale, judged by solc-js and Slither.

Pipeline: the secure corpus (single-pragma contracts, comments stripped, OpenZeppelin removed) trains a byte-level
BPE and a tiny LLaMA by causal LM (cached); secure contracts plus SWC-injected copies are labelled by Slither; one
LoRA adapter is trained CI → VD → TI on `Trainer`. Measured:

1. **Stage ablation** base → CI → VD → TI on Blockchain-HumanEval (41 tasks, forced `correct` tag): BLEU, CodeBLEU,
   compile pass count with a 95 % Wilson interval.
2. **VD accuracy** (tag generated after `[Tag]`) on held-out tagged contracts, after VD and after TI.
3. **Tag steering** with the TI model: forced `correct` vs forced `bug` vs no tag, on Blockchain-HumanEval (Slither
   vulnerability rate on compiled outputs, injected-pattern rate) and on the held-out TI instructions (injected-pattern
   rate); `--full` adds a control adapter trained with the same stages but TI **without** tags.

Each stage (and the base) is evaluated the same way: Blockchain-HumanEval scores, Slither's vulnerability rate of
the compiled outputs, and VD accuracy beside a constant predictor (the majority training tag) on the held-out rows
and, with `--slither-sdist`, on real labelled detector-test contracts.

Quick scale: a 2-layer 128-wide LLaMA, 200 pretraining steps, 40 steps per stage, greedy decoding, one sample per
task. `--full`: 5 sampled generations per task, more data and steps, and the no-tag control. `--pretrained`:
SmolLM2-135M-Instruct (its chat template, FIM tokens added) with 40 steps per stage at seq 512 / batch 2, 8 tasks,
the no-tag control, and VD on 48 labelled Slither contracts when `--slither-sdist` (or its variable) is set.
`--gpu`: the paper-scale job for one GPU (`presets.GPU`, run with `--device cuda`; prepared, not run on CPU).

Every scale also measures the two claims **without compilation** ([`~hf_ext.codebc.probe`]): on a held-out probe
of secure contracts and their injected copies, the tag-steering Δ and the VD log-odds as AUROCs per stage, decided
by the verdict rules of [`~hf_ext.codebc.report`] (printed before the run; the base is the control), and the
parser-pass rate of each stage's Blockchain-HumanEval outputs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.paths import work_dir
from hf_ext.core.progress import progress, set_quiet

from .adapter import adapter_state, add_adapter, load_adapter_state, save_codebc
from .evaluation import brief, constant_tag, fitting_tasks, parse_pass, steer_heldout, vd_accuracy
from .external import NPM_ENV, SLITHER_SDIST_ENV, licences
from .pipeline import ScaleConfig, generate_humaneval, score_generations, task_subset, with_version_line
from .presets import FULL, GPU, PRETRAINED, QUICK
from .probe import probe_scores
from .recipe import STAGES, prepare, stage_arguments, stage_dataset
from .report import RULES, decide, format_table, report_fields
from .solidity import SolcServer, toolchain_problem
from .tags import SECURITY_TAGS
from .trainer import train_stage


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="hf-ext reproduce codebc", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--full", action="store_true", help="5 samples per task, more data and steps, plus the TI-without-tags control"
    )
    p.add_argument("--out", default=str(work_dir("codebc")), help="output folder (results.json, cache/, model/)")
    p.add_argument("--stage-steps", type=int, help="optimiser steps per stage")
    p.add_argument("--samples", type=int, help="generations per Blockchain-HumanEval task")
    p.add_argument("--seed", type=int, help="seed")
    p.add_argument("--pretrain-steps", type=int, help="causal-LM pretraining steps of the tiny base")
    p.add_argument("--max-new-tokens", type=int, help="generated tokens per contract")
    p.add_argument(
        "--control",
        action="store_true",
        help="also train the TI-without-tags control adapter at this scale (always on with --full and --pretrained)",
    )
    p.add_argument(
        "--pretrained",
        action="store_true",
        help="SmolLM2-135M-Instruct as the base (hf_ext.core.pretrained), scoped to ~150 CPU steps",
    )
    p.add_argument(
        "--gpu",
        action="store_true",
        help=f"the paper-scale job for one GPU (SmolLM2, {GPU.stage_steps} steps a stage, {GPU.tasks} tasks x "
        f"{GPU.samples} samples x {GPU.max_new_tokens} new tokens); run it with --device cuda on a machine that also "
        "has Node.js and solc-js (`hf-ext setup codebc`)",
    )
    p.add_argument(
        "--stage0",
        action="store_true",
        help="stage 0 instead: continued pretraining of the base on permissive npm Solidity, base vs stage 0 on "
        "held-out contracts (its own flags: `hf-ext reproduce codebc --stage0 --help`)",
    )
    p.add_argument("--tasks", type=int, help="Blockchain-HumanEval tasks evaluated (an even spread of the 41)")
    p.add_argument("--vd-real", type=int, help="labelled Slither detector-test contracts for VD (needs the sdist)")
    p.add_argument(
        "--npm-corpus",
        default=os.environ.get(NPM_ENV),
        help=f"an installed node_modules folder with more 0.8 Solidity for CI/TI (default ${NPM_ENV})",
    )
    p.add_argument(
        "--slither-sdist",
        default=os.environ.get(SLITHER_SDIST_ENV),
        help=f"slither-analyzer sdist (.tar.gz or folder) for VD on real contracts (default ${SLITHER_SDIST_ENV})",
    )
    from hf_ext.core.devices import add_device_argument

    add_device_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars (none either under CI or when piped)")
    return p


def _progress(name: str, ev: dict, seconds: float) -> None:
    h, vd = ev["humaneval"], ev["vd_heldout"]
    print(
        f"[codebc] {name}: BLEU {h['bleu']:.2f} CodeBLEU {h['codebleu']:.2f} compiled {h['compiled']}/{h['total']}"
        f" VD {vd['correct']}/{vd['total']} ({seconds:.0f} s)",
        flush=True,
    )


def write_json(path: Path, obj: dict) -> None:
    """Writes `obj` as JSON atomically (a temporary file renamed over `path`)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2))
    tmp.replace(path)


def real_vd_set(scale: ScaleConfig, sdist: str | None) -> tuple[list[str], list[str], dict]:
    """`scale.vd_real` labelled detector-test contracts of the Slither sdist (at most `max_chars` long), as many
    `bug` as `correct` where possible (seeded), with a description of the set."""
    if not scale.vd_real:
        return [], [], {}
    from .external import load_slither_labelled

    pool = [c for c in load_slither_labelled(sdist) if len(c.code) <= scale.max_chars]
    rng = random.Random(scale.seed)
    picked = []
    for tag in SECURITY_TAGS:
        group = [c for c in pool if c.tag == tag]
        rng.shuffle(group)
        picked += group[: scale.vd_real // 2 + (scale.vd_real % 2 if tag == "correct" else 0)]
    rng.shuffle(picked)
    about = {
        "pool": len(pool),
        "picked": len(picked),
        "bug": sum(c.tag == "bug" for c in picked),
        "solc": dict(Counter(c.solc.rsplit(".", 1)[0] for c in picked)),
    }
    return [c.code for c in picked], [c.tag for c in picked], about


def evaluate(
    model, tok, scale: ScaleConfig, server, test, real, constant: str, probe, fit, *, analyse: bool = True
) -> dict:
    """One stage's evaluation: Blockchain-HumanEval with the forced `correct` tag (BLEU / CodeBLEU / compiled /
    Slither vulnerability rate, and the parser-pass rate over all tasks and the `fit` ones), VD accuracy on the
    held-out rows and the real labelled contracts, each beside the constant predictor, and the compile-free probe
    (tag-steering Δ and VD log-odds on the `probe` rows, [`~hf_ext.codebc.probe.probe_scores`])."""
    gens = generate_humaneval(model, tok, "correct", scale)
    out = {"humaneval": brief(score_generations(gens, analyse, server)), "parse": parse_pass(gens, server, fit)}
    if probe:
        out["probe"] = probe_scores(model, tok, probe, batch_size=scale.stage_batch)
    kw = dict(max_prompt_tokens=scale.max_length, batch_size=scale.stage_batch * 2)
    out["vd_heldout"] = vd_accuracy(
        model, tok, [r["contract"].code for r in test], [r["tag"] for r in test], constant, **kw
    )
    if real[0]:
        out["vd_real"] = vd_accuracy(model, tok, real[0], real[1], constant, **kw)
    return out


def run(scale: ScaleConfig, out: Path, control: bool, npm: str | None = None, sdist: str | None = None) -> dict:
    from hf_ext.core.devices import torch_device

    cache = out / "cache"
    t0 = time.time()
    prep = prepare(scale, cache, npm)
    ex, model, tok, trainable, extra = prep.examples, prep.model, prep.tokenizer, prep.trainable, prep.extra
    model.to(torch_device())  # evaluation before any Trainer: on the run's device too
    real = real_vd_set(scale, sdist)
    t_data = time.time() - t0
    train, test = ex["train"], ex["test"]
    stage_args = stage_arguments(scale, trainable)
    constant = constant_tag([r["tag"] for r in train])
    probe = ex["probe"]
    fit = fitting_tasks(tok, task_subset(scale.tasks), scale.max_new_tokens)
    results: dict = {
        "scale": dataclasses.asdict(scale),
        "data": {
            "ci_contracts": len(ex["ci_codes"]),
            "train": len(train),
            "test": len(test),
            "train_bug": sum(r["tag"] == "bug" for r in train),
            "slither_agreement_per_pattern": ex["slither_agreement"],
            "secure_contracts_flagged_by_slither": ex["secure_flagged"],
            "npm_contracts": len(extra),
            "npm_licences": licences(extra),
            "vd_real": real[2],
            "constant_tag": constant,
            "trainable_token_ids": trainable,
            "probe": {
                "hosts": len({r["host"] for r in probe}),
                "rows": len(probe),
                "patterns": dict(Counter(r["pattern"] for r in probe if r["injected"])),
                "solidity": dict(Counter((r["instruction"][0].split()[-1] or "?") for r in probe if r["injected"])),
                "labels": [int(r["injected"]) for r in probe],
                "hosts_of_rows": [r["host"] for r in probe],
                "fit_tasks": len(fit),
                "max_new_tokens": scale.max_new_tokens,
            },
        },
        "stages": {},
        "losses": {},
        "loss_curves": {},
        "seconds": {},
    }
    server = SolcServer()
    t = time.time()
    results["stages"]["base"] = evaluate(model, tok, scale, server, test, real, constant, probe, fit)
    results["seconds"]["eval_base"] = round(time.time() - t, 1)
    _progress("base", results["stages"]["base"], time.time() - t0)
    write_json(out / "results.partial.json", results)
    peft_model = add_adapter(model, stage_args)
    ml = stage_args.max_length
    states = {}
    for stage in progress(STAGES, desc="codebc stages (train + evaluate)", unit="stage"):
        t = time.time()
        curve: list = []
        results["losses"][stage] = train_stage(
            peft_model, stage_dataset(stage, tok, ex, ml), tok, stage_args, str(out / "tmp"), curve
        )
        results["loss_curves"][stage] = curve
        results["seconds"][f"train_{stage}"] = round(time.time() - t, 1)
        states[stage] = adapter_state(peft_model)
        t = time.time()
        results["stages"][stage] = evaluate(peft_model, tok, scale, server, test, real, constant, probe, fit)
        results["seconds"][f"eval_{stage}"] = round(time.time() - t, 1)
        _progress(stage, results["stages"][stage], time.time() - t0)
        write_json(out / "results.partial.json", results)  # a long run killed later keeps its finished stages
    # tag steering with the final (TI) adapter; forced `correct` is the TI stage's evaluation above
    held = [with_version_line(r["contract"]) for r in test]
    steer_kw = dict(max_new_tokens=scale.max_new_tokens, max_prompt_tokens=scale.max_prompt_tokens)
    steering = {}
    steer = (("forced_correct", "correct"), ("forced_bug", "bug"), ("no_tag", None))
    for name, tag in progress(steer, desc="codebc tag steering", unit="setting"):
        he = (
            results["stages"]["TI"]["humaneval"]
            if tag == "correct"
            else brief(
                score_generations(generate_humaneval(peft_model, tok, tag, scale), True, server, text_metrics=False)
            )
        )
        steering[name] = {"humaneval": he, "heldout": steer_heldout(peft_model, tok, held, tag, **steer_kw)}
        write_json(out / "results.partial.json", {**results, "steering": steering})
    if control:  # same CI and VD adapter, TI without tags: "instruction tuning without tags"
        load_adapter_state(peft_model, states["VD"])
        plain = stage_dataset("TI", tok, ex, ml, tags=False)
        curve = []
        results["losses"]["TI_no_tags"] = train_stage(peft_model, plain, tok, stage_args, str(out / "tmp"), curve)
        results["loss_curves"]["TI_no_tags"] = curve
        gens = generate_humaneval(peft_model, tok, None, scale)
        steering["plain_it_control"] = {
            "humaneval": brief(score_generations(gens, True, server)),
            "heldout": steer_heldout(peft_model, tok, held, None, **steer_kw),
        }
        load_adapter_state(peft_model, states["TI"])
    server.close()
    results["steering"] = steering
    # the released artifact: base + the final CodeBC (TI) adapter
    from . import SPEC

    save_codebc(peft_model, out / "model", tok, SPEC)
    results["verdicts"] = decide(results, probe)
    results["seconds"].update(data_and_base=round(t_data, 1), total=round(time.time() - t0, 1))
    return results


def _save_record(artifact: Path, results: dict, scale, args) -> None:
    """`training_record.json` beside the released artifact (base + the final TI adapter): its Blockchain-HumanEval
    scores with the forced `correct` tag, so `hf-ext push codebc` renders the card from them."""
    from hf_ext.core.records import metric, save_training_record

    if not (artifact / "config.json").is_file() or not results.get("stages"):
        return
    stage = list(results["stages"])[-1]
    s = results["stages"][stage]["humaneval"]
    he = "Blockchain-HumanEval"
    metrics = [
        metric("BLEU", "bleu", s["bleu"], dataset=he, higher_is_better=True),
        metric("CodeBLEU", "codebleu", s["codebleu"], dataset=he, higher_is_better=True),
    ]
    if s.get("compile_rate") is not None:
        metrics.append(metric("compiled", "compile_rate", s["compile_rate"], dataset=he, higher_is_better=True))
    save_training_record(
        artifact,
        method="codebc",
        command="hf-ext reproduce codebc"
        + (" --full" if args.full else "")
        + (" --pretrained" if args.pretrained else "")
        + (" --gpu" if args.gpu else ""),
        datasets=[
            {
                "name": "codebc-contracts",
                "hub_id": None,
                "description": "secure Solidity 0.8 contracts shipped offline, with synthetic SWC-pattern "
                "injections labelled by Slither (not the Hub corpus; see the card)",
            },
            {"name": he, "hub_id": None, "description": "the evaluation tasks (shipped offline)"},
        ],
        metrics=metrics,
        config=dataclasses.asdict(scale),
        skip_nonfinite=True,
        notes=f"scores of stage {stage} (forced `correct` tag), {s.get('total')} generations",
    )


def main(argv: list[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--stage0" in argv:  # its own knobs (an HfArgumentParser dataclass): hand every other flag over
        from .reproduce_stage0 import main as stage0_main

        return stage0_main([a for a in argv if a != "--stage0"])
    args = make_parser().parse_args(argv)
    set_quiet(args.quiet)
    overrides = {
        k: v
        for k, v in (
            ("stage_steps", args.stage_steps),
            ("samples", args.samples),
            ("seed", args.seed),
            ("pretrain_steps", args.pretrain_steps),
            ("max_new_tokens", args.max_new_tokens),
            ("tasks", args.tasks),
            ("vd_real", args.vd_real),
        )
        if v is not None
    }
    if args.full + args.pretrained + args.gpu > 1:
        raise SystemExit("--full, --pretrained and --gpu are different scales: pick one")
    preset = GPU if args.gpu else PRETRAINED if args.pretrained else FULL if args.full else QUICK
    if preset.vd_real and not args.slither_sdist and args.vd_real is None:
        preset = dataclasses.replace(preset, vd_real=0)  # no sdist given: VD on the held-out rows only
    scale = dataclasses.replace(preset, **overrides)  # validates the flags, before any work
    if scale.vd_real and not args.slither_sdist:
        raise SystemExit(f"--vd-real needs the slither-analyzer sdist: --slither-sdist PATH or ${SLITHER_SDIST_ENV}")
    from hf_ext.core.devices import set_device

    set_device(args.device)
    problem = toolchain_problem()
    if problem:
        raise SystemExit(f"codebc reproduce needs the Solidity toolchain: {problem}")
    logging.getLogger("CryticCompile").setLevel(logging.CRITICAL)
    logging.getLogger("Slither").setLevel(logging.CRITICAL)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from hf_ext.core.reporting import print_rules, reproduce_command

    print_rules(RULES)  # the verdict rules, before any work
    results = run(
        scale,
        out,
        control=args.full or args.pretrained or args.gpu or args.control,
        npm=args.npm_corpus,
        sdist=args.slither_sdist,
    )
    results["mode"] = "gpu" if args.gpu else "pretrained" if args.pretrained else "full" if args.full else "quick"
    # the command a reader reruns; the data paths (usually set by `make codebc-data`'s variables) stay out
    results["command"] = reproduce_command("codebc", argv, skip=("--npm-corpus", "--slither-sdist"))
    results["rules"] = [rule.to_dict() for rule in RULES.values()]
    results.update(report_fields(results))
    write_json(out / "results.json", results)
    _save_record(out / "model", results, scale, args)
    print(format_table(results))
    print(f"\nwrote {out / 'results.json'} ({results['seconds']['total']} s)")
    return results
