"""`hf-ext codebc train` (also `hf-ext train codebc`) and `hf-ext codebc generate`.

`train` runs the staged recipe (CI → VD → TI with one LoRA adapter) on a base and saves the artifact that
`generate`, `hf-ext push codebc` and the Space load (base + `adapter/` + tokenizer). `generate` writes
Blockchain-HumanEval-named files (`<Task>.txt_<k>.sol`) that `hf-ext codebc score` scores, or prints the
generations for `--prompt`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from hf_ext.core.paths import work_dir

from .tags import SECURITY_TAGS


def train_parser() -> argparse.ArgumentParser:
    from hf_ext.core.devices import add_device_argument

    from .external import NPM_ENV
    from .pipeline import BASES

    p = argparse.ArgumentParser(
        prog="hf-ext codebc train",
        description="Train the CodeBC stages CI -> VD -> TI with one LoRA adapter and save base + adapter + tokenizer.",
    )
    p.add_argument(
        "--base",
        choices=BASES,
        default="smollm2",
        help="smollm2: SmolLM2-135M-Instruct (default); tiny: a tiny LLaMA pretrained on the corpus",
    )
    p.add_argument("--stages", default="CI,VD,TI", help="comma-separated stages, in order (default CI,VD,TI)")
    p.add_argument("--steps", type=int, default=40, help="optimiser steps per stage (default 40)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: 5e-4 smollm2, 1e-2 tiny)")
    p.add_argument("--batch-size", type=int, default=None, help="per-device batch (default: 2 smollm2, 8 tiny)")
    p.add_argument("--max-length", type=int, default=None, help="tokens of prompt + answer (default 512 / 384)")
    p.add_argument("--no-tags", action="store_true", help="TI without the security tags (the control)")
    p.add_argument(
        "--npm-corpus", default=os.environ.get(NPM_ENV), help=f"node_modules with more Solidity (default ${NPM_ENV})"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(work_dir("codebc") / "artifact"), help="artifact folder to write")
    add_device_argument(p)
    return p


def train_main(argv: list[str] | None = None) -> Path:
    """`hf-ext codebc train`: the artifact folder it wrote."""
    args = train_parser().parse_args(argv)
    from hf_ext.core.devices import set_device

    from .recipe import STAGES, prepare, stage_arguments, stage_dataset
    from .reproduce import PRETRAINED, QUICK
    from .training import add_adapter, save_codebc, train_stage

    stages = [s.strip().upper() for s in args.stages.split(",") if s.strip()]
    bad = [s for s in stages if s not in STAGES]
    if bad or not stages:
        raise SystemExit(f"--stages must name stages among {', '.join(STAGES)}, got {args.stages!r}")
    preset = PRETRAINED if args.base == "smollm2" else QUICK
    overrides = {
        k: v
        for k, v in (("stage_lr", args.lr), ("stage_batch", args.batch_size), ("max_length", args.max_length))
        if v is not None
    }
    scale = dataclasses.replace(preset, stage_steps=args.steps, seed=args.seed, **overrides)  # validates
    set_device(args.device)
    out = Path(args.out)
    prep = prepare(scale, out.parent / "cache", args.npm_corpus)
    stage_args = stage_arguments(scale, prep.trainable)
    model = add_adapter(prep.model, stage_args)
    losses = {}
    for stage in stages:
        ds = stage_dataset(stage, prep.tokenizer, prep.examples, scale.max_length, tags=not args.no_tags)
        curve: list = []
        losses[stage] = train_stage(model, ds, prep.tokenizer, stage_args, str(out.parent / "tmp"), curve)
        print(
            f"{stage}: mean loss {losses[stage]:.4f} over {scale.stage_steps} steps; logged "
            + ", ".join(f"{p['step']}:{p['loss']:.3f}" for p in curve),
            flush=True,
        )
    from . import SPEC

    save_codebc(model, out, prep.tokenizer, SPEC)
    (out / "codebc_training.json").write_text(
        json.dumps(
            {
                "base": args.base,
                "stages": stages,
                "losses": losses,
                "tags": not args.no_tags,
                "scale": dataclasses.asdict(scale),
            },
            indent=2,
        )
    )
    print(f"wrote {out}")
    return out


def load_artifact(folder: str | os.PathLike):
    """`(PeftModel, tokenizer)` of a saved CodeBC artifact (base + `adapter/` + tokenizer)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hf_ext.codebc.modeling_codebc  # noqa: F401 - registers the tiny base's Auto classes

    folder = Path(folder)
    if not (folder / "adapter" / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"{folder} is not a CodeBC artifact (no adapter/adapter_config.json); write one "
            f"with `hf-ext codebc train --out {folder}`"
        )
    base = AutoModelForCausalLM.from_pretrained(folder)
    return PeftModel.from_pretrained(base, folder / "adapter").eval(), AutoTokenizer.from_pretrained(folder)


def generate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hf-ext codebc generate",
        description="Generate contracts with a forced security tag from a CodeBC artifact.",
    )
    p.add_argument("--model", default=str(work_dir("codebc") / "artifact"), help="artifact folder")
    p.add_argument("--prompt", action="append", help="a requirement (repeatable); default: Blockchain-HumanEval")
    p.add_argument("--tasks", type=int, default=41, help="Blockchain-HumanEval tasks (an even spread; default 41)")
    p.add_argument("--tag", choices=(*SECURITY_TAGS, "none"), default="correct", help="forced tag (default correct)")
    p.add_argument("--samples", type=int, default=1, help="samples per task (1: greedy; more: sampled)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="folder for <Task>.txt_<k>.sol files (score them with `hf-ext codebc score`)")
    return p


def generate_main(argv: list[str] | None = None) -> dict[str, str]:
    """`hf-ext codebc generate`: `{file name or prompt index: code}`."""
    args = generate_parser().parse_args(argv)
    from hf_ext.core.validation import check_positive_int

    check_positive_int("--samples", args.samples)
    check_positive_int("--tasks", args.tasks)
    from .data import humaneval_prompt
    from .pipeline import task_subset
    from .tags import generate_with_tag

    try:
        model, tok = load_artifact(args.model)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    from hf_ext.core.devices import torch_device

    model.to(torch_device())
    tag = None if args.tag == "none" else args.tag
    names = [f"prompt_{i}" for i in range(len(args.prompt))] if args.prompt else task_subset(args.tasks)
    prompts = args.prompt or [humaneval_prompt(t) for t in names]
    out: dict[str, str] = {}
    for k in range(args.samples):
        gens = generate_with_tag(
            model,
            tok,
            prompts,
            tag,
            max_new_tokens=args.max_new_tokens,
            do_sample=args.samples > 1,
            temperature=args.temperature,
            seed=args.seed * 100 + k,
        )
        for name, g in zip(names, gens):
            out[f"{name}.txt_{k}.sol"] = g["code"]
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        for name, code in out.items():
            (folder / name).write_text(code, encoding="utf-8")
        print(f"wrote {len(out)} files to {folder}")
    else:
        for name, code in out.items():
            print(f"=== {name}\n{code}\n")
    return out
