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

Quick scale: a 2-layer 128-wide LLaMA, 200 pretraining steps, 40 steps per stage, greedy decoding, one sample per
task. `--full`: 5 sampled generations per task, more data and steps, and the no-tag control.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path

from hf_ext.core.paths import work_dir

from .data import load_secure_contracts
from .metrics import wilson_interval
from .pipeline import (ScaleConfig, build_base, build_examples, generate_humaneval, pretraining_texts, score_generations,
                       with_version_line)
from .solidity import SolcServer, toolchain_problem
from .tokenizer import codebc_token_ids
from .tags import extract_code, generate_with_tag, ti_instruction, vd_example
from .training import (CodeBCStageArguments, add_adapter, adapter_state, ci_dataset, load_adapter_state,
                       save_codebc, train_stage, ti_dataset, vd_dataset)

QUICK = ScaleConfig()
FULL = dataclasses.replace(QUICK, layers=4, block_size=256, pretrain_steps=1500, n_secure=160,
                           n_injected_per_pattern=10, stage_steps=300, samples=5, max_chars=1600, max_length=768,
                           max_new_tokens=256, max_prompt_tokens=768)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext reproduce codebc", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true",
                   help="5 samples per task, more data and steps, plus the TI-without-tags control")
    p.add_argument("--out", default=str(work_dir("codebc")), help="output folder (results.json, cache/, model/)")
    p.add_argument("--stage-steps", type=int, help="optimiser steps per stage")
    p.add_argument("--samples", type=int, help="generations per Blockchain-HumanEval task")
    p.add_argument("--seed", type=int, help="seed")
    p.add_argument("--pretrain-steps", type=int, help="causal-LM pretraining steps of the tiny base")
    p.add_argument("--max-new-tokens", type=int, help="generated tokens per contract")
    p.add_argument("--control", action="store_true",
                   help="also train the TI-without-tags control adapter at this scale (always on with --full)")
    from hf_ext.core.devices import add_device_argument

    add_device_argument(p)
    return p


def vd_accuracy(model, tok, rows, max_chars: int = 100000) -> dict:
    """Generates the tag after the VD prompt (`[Tag]`) for held-out contracts; accuracy against Slither's tag."""
    import torch

    correct = 0
    preds = []
    for r in rows:
        prompt, _ = vd_example(r["contract"].code[:max_chars], r["tag"], tok.bos_token, tok.eos_token)
        enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
        text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True).strip().split("\n")[0]
        pred = "bug" if text.startswith("bug") else "correct" if text.startswith("correct") else text[:12]
        preds.append(pred)
        correct += pred == r["tag"]
    n = len(rows)
    return {"correct": correct, "total": n, "accuracy": correct / n if n else None,
            "ci95": list(wilson_interval(correct, n)), "predicted_bug": sum(p == "bug" for p in preds),
            "true_bug": sum(r["tag"] == "bug" for r in rows)}


def steer_heldout(model, tok, rows, tag, scale: ScaleConfig) -> dict:
    """Injected-pattern rate of generations for the held-out TI instructions under a forced tag (or none)."""
    from .inject import injected_patterns

    instr = [ti_instruction(with_version_line(r["contract"])) for r in rows]
    gens = generate_with_tag(model, tok, instr, tag, max_new_tokens=scale.max_new_tokens, do_sample=False,
                             max_prompt_tokens=scale.max_prompt_tokens)
    hits = [bool(injected_patterns(extract_code(g["response"]))) for g in gens]
    return {"injected_pattern_files": sum(hits), "total": len(hits),
            "injected_pattern_rate": sum(hits) / len(hits) if hits else None,
            "ci95": list(wilson_interval(sum(hits), len(hits)))}


def _brief(s: dict) -> dict:
    keep = ("bleu", "codebleu", "compiled", "total", "compile_rate", "compile_rate_ci95", "analysed", "vulnerable",
            "vulnerability_rate", "vulnerability_rate_ci95", "injected_pattern_files", "injected_pattern_rate",
            "failure_reasons", "mean_chars")
    return {k: s.get(k) for k in keep}


def run(scale: ScaleConfig, out: Path, control: bool) -> dict:
    import torch

    torch.set_num_threads(1)  # tiny matrices: one thread is faster than two fighting on a shared 2-core machine
    cache = out / "cache"
    t0 = time.time()
    corpus = load_secure_contracts()
    ex = build_examples(scale, cache, corpus)  # first: the held-out VD/TI contracts stay out of pretraining and CI
    model, tok = build_base(scale, cache, pretraining_texts(corpus, ex["heldout_codes"]))
    t_data = time.time() - t0
    train, test = ex["train"], ex["test"]
    stage_args = CodeBCStageArguments(learning_rate=scale.stage_lr, max_steps=scale.stage_steps,
                                      batch_size=scale.stage_batch, max_length=scale.max_length, seed=scale.seed,
                                      trainable_token_ids=sorted(codebc_token_ids(tok).values()))
    results: dict = {"scale": dataclasses.asdict(scale), "data": {
        "ci_contracts": len(ex["ci_codes"]), "train": len(train), "test": len(test),
        "train_bug": sum(r["tag"] == "bug" for r in train), "slither_agreement_per_pattern": ex["slither_agreement"],
        "secure_contracts_flagged_by_slither": ex["secure_flagged"]}, "stages": {}, "losses": {}}
    server = SolcServer()
    results["stages"]["base"] = _brief(score_generations(generate_humaneval(model, tok, "correct", scale), False,
                                                         server))
    peft_model = add_adapter(model, stage_args)
    ml = stage_args.max_length
    datasets = {
        "CI": ci_dataset(tok, ex["ci_codes"], ml),
        "VD": vd_dataset(tok, [r["contract"].code for r in train], [r["tag"] for r in train], ml),
        "TI": ti_dataset(tok, [r["contract"].code for r in train], [with_version_line(r["contract"]) for r in train],
                         [r["tag"] for r in train], ml),
    }
    states = {}
    for stage in ("CI", "VD", "TI"):
        results["losses"][stage] = train_stage(peft_model, datasets[stage], tok, stage_args, str(out / "tmp"))
        states[stage] = adapter_state(peft_model)
        results["stages"][stage] = _brief(score_generations(
            generate_humaneval(peft_model, tok, "correct", scale), False, server))
        if stage in ("VD", "TI"):
            results.setdefault("vd_accuracy", {})[stage] = vd_accuracy(peft_model, tok, test)
    # tag steering with the final (TI) adapter
    steering = {}
    for name, tag in (("forced_correct", "correct"), ("forced_bug", "bug"), ("no_tag", None)):
        gens = generate_humaneval(peft_model, tok, tag, scale)
        steering[name] = {"humaneval": _brief(score_generations(gens, True, server, text_metrics=False)),
                          "heldout": steer_heldout(peft_model, tok, test, tag, scale)}
    if control:  # same CI and VD adapter, TI without tags: "instruction tuning without tags"
        load_adapter_state(peft_model, states["VD"])
        plain = ti_dataset(tok, [r["contract"].code for r in train], [with_version_line(r["contract"]) for r in train],
                           [None] * len(train), ml)
        results["losses"]["TI_no_tags"] = train_stage(peft_model, plain, tok, stage_args, str(out / "tmp"))
        gens = generate_humaneval(peft_model, tok, None, scale)
        steering["plain_it_control"] = {"humaneval": _brief(score_generations(gens, True, server,
                                                                              text_metrics=False)),
                                        "heldout": steer_heldout(peft_model, tok, test, None, scale)}
        load_adapter_state(peft_model, states["TI"])
    server.close()
    results["steering"] = steering
    # the released artifact: base + the final CodeBC (TI) adapter
    from . import SPEC

    save_codebc(peft_model, out / "model", tok, SPEC)
    results["seconds"] = {"data_and_base": round(t_data, 1), "total": round(time.time() - t0, 1)}
    return results


def format_table(r: dict) -> str:
    def pct(x):
        return "  n/a" if x is None else f"{100 * x:5.1f}"

    lines = ["Stage ablation (Blockchain-HumanEval, forced `correct` tag)",
             "stage | BLEU  | CodeBLEU | compiled      | 95% CI (compile %)"]
    for k, s in r["stages"].items():
        lo, hi = s["compile_rate_ci95"]
        lines.append(f"{k:5} | {s['bleu']:5.2f} | {s['codebleu']:8.2f} | {s['compiled']:3d}/{s['total']:<3d} "
                     f"({pct(s['compile_rate'])}%) | [{pct(lo)}, {pct(hi)}]")
    for k, v in r.get("vd_accuracy", {}).items():
        lines.append(f"VD accuracy after {k}: {v['correct']}/{v['total']} (95% CI [{pct(v['ci95'][0])}, "
                     f"{pct(v['ci95'][1])}]%), predicted bug {v['predicted_bug']}, true bug {v['true_bug']}")
    lines += ["", "Tag steering (TI adapter)",
              "condition        | compiled | vuln (High/Med of analysed) | injected-pattern HE | injected-pattern "
              "held-out"]
    for k, v in r["steering"].items():
        h, o = v["humaneval"], v["heldout"]
        vuln = "n/a" if h["vulnerability_rate"] is None else f"{h['vulnerable']}/{h['analysed']}"
        lines.append(f"{k:16} | {h['compiled']:3d}/{h['total']:<4d}| {vuln:27} | {h['injected_pattern_files']:3d}/"
                     f"{h['total']:<15d} | {o['injected_pattern_files']}/{o['total']}")
    agree = r["data"]["slither_agreement_per_pattern"]
    lines += ["", "Slither agreed with the injection (flagged High/Medium): " +
              ", ".join(f"{p} {a}/{n}" for p, (a, n) in agree.items()),
              "secure corpus contracts flagged by Slither 0.11.6: {}/{}".format(
                  *r["data"]["secure_contracts_flagged_by_slither"])]
    return "\n".join(lines)


def _save_record(artifact: Path, results: dict, scale, args) -> None:
    """`training_record.json` beside the released artifact (base + the final TI adapter): its Blockchain-HumanEval
    scores with the forced `correct` tag, so `hf-ext push codebc` renders the card from them."""
    from hf_ext.core.records import metric, save_training_record

    if not (artifact / "config.json").is_file() or not results.get("stages"):
        return
    stage = list(results["stages"])[-1]
    s = results["stages"][stage]
    he = "Blockchain-HumanEval"
    metrics = [metric("BLEU", "bleu", s["bleu"], dataset=he, higher_is_better=True),
               metric("CodeBLEU", "codebleu", s["codebleu"], dataset=he, higher_is_better=True)]
    if s.get("compile_rate") is not None:
        metrics.append(metric("compiled", "compile_rate", s["compile_rate"], dataset=he, higher_is_better=True))
    save_training_record(
        artifact, method="codebc", command="hf-ext reproduce codebc" + (" --full" if args.full else ""),
        datasets=[{"name": "codebc-contracts", "hub_id": None,
                   "description": "secure Solidity 0.8 contracts shipped offline, with synthetic SWC-pattern "
                                  "injections labelled by Slither (not the Hub corpus; see the card)"},
                  {"name": he, "hub_id": None, "description": "the evaluation tasks (shipped offline)"}],
        metrics=metrics, config=dataclasses.asdict(scale), skip_nonfinite=True,
        notes=f"scores of stage {stage} (forced `correct` tag), {s.get('total')} generations",
    )


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    overrides = {k: v for k, v in (("stage_steps", args.stage_steps), ("samples", args.samples),
                                   ("seed", args.seed),
                                   ("pretrain_steps", args.pretrain_steps),
                                   ("max_new_tokens", args.max_new_tokens)) if v is not None}
    scale = dataclasses.replace(FULL if args.full else QUICK, **overrides)  # validates the flags, before any work
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
    results = run(scale, out, control=args.full or args.control)
    results["mode"] = "full" if args.full else "quick"
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=2))
    tmp.replace(out / "results.json")
    _save_record(out / "model", results, scale, args)
    print(format_table(results))
    print(f"\nwrote {out / 'results.json'} ({results['seconds']['total']} s)")
    return results
