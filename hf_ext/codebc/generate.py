"""`hf-ext codebc generate`: contracts with a forced security tag from a CodeBC artifact (as `hf-ext train codebc`
writes it: base + `adapter/` + tokenizer). Writes Blockchain-HumanEval-named files (`<Task>.txt_<k>.sol`) that
`hf-ext codebc score` scores, or prints the generations for `--prompt`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.paths import work_dir

from .tags import SECURITY_TAGS


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
    p = ArgumentParser(
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
    from hf_ext.core.validation import check_finite_number, check_positive_int

    check_positive_int("--samples", args.samples)
    check_positive_int("--tasks", args.tasks)
    if args.tasks > 41:
        raise ValueError(f"--tasks must be at most 41 (Blockchain-HumanEval's tasks), got {args.tasks}")
    check_positive_int("--max-new-tokens", args.max_new_tokens)
    check_positive_int("--seed", args.seed, minimum=0)
    check_finite_number("--temperature", args.temperature, low=0.0, low_open=True, high=100.0)
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
