"""`hf-ext train codebc` (also `hf-ext codebc train`): the staged recipe (CI → VD → TI with one LoRA adapter) on a base,
saved as the artifact that `hf-ext codebc generate`, `hf-ext push codebc` and the Space load (base + `adapter/` +
tokenizer + `training_record.json`).

- **On your own contracts** (`--data SOURCE --model_name_or_path MODEL`): any causal LM (a Hub id or a local folder)
  and a folder of `.sol` files (or a table with a `code` column, see [`~hf_ext.codebc.data.SCHEMA`]); a seeded
  `--test_split` of the contracts is held out and the record holds its metrics (TI loss, VD accuracy and, with
  solc-js installed, the compile rate of generated contracts; see [`~hf_ext.codebc.train_contracts`]).
  `hf-ext evaluate codebc` re-measures them and pairs them with a baseline.
- **Without `--data`**: the shipped secure-contract corpus on SmolLM2-135M-Instruct or the tiny LLaMA (`--base`).

The arguments are one plain dataclass, [`CodeBCTrainArguments`], parsed by `transformers.HfArgumentParser`
([`build_parser`]). It is not a `TrainingArguments` subclass on purpose: each stage's `TrainingArguments` is built
from a reproduction preset ([`~hf_ext.codebc.presets`]) by [`~hf_ext.codebc.trainer.make_trainer`], so the ~100
`TrainingArguments` flags would be accepted here and silently ignored.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hf_ext.core.devices import DEVICE_ENV
from hf_ext.core.paths import work_dir

from .external import NPM_ENV


@dataclass
class CodeBCTrainArguments:
    """What `hf-ext train codebc` trains. Flags are underscore style; the dashed spellings (`--batch-size`) and the
    old short names (`--out`, `--lr`) keep working."""

    data: str | None = field(
        default=None,
        metadata={
            "help": "your contracts: a folder of .sol files (files under correct/ or bug/ get that security tag), or "
            "a CSV/JSONL/Parquet file or folder with a `code` column (optional `tag`, `instruction`), or a Hub id "
            "(default: the shipped secure-contract corpus)"
        },
    )
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "with --data: the causal LM to adapt (a Hub id or a local folder)"}
    )
    test_split: float = field(
        default=0.1, metadata={"help": "with --data: share of contracts held out for the test metrics (seeded)"}
    )
    label_untagged: str = field(
        default="auto",
        metadata={
            "help": "with --data: the security tag of a contract without one: slither (Slither's verdict, as the "
            "paper labels), correct, or auto (slither when solc-js and Slither are installed, else correct)"
        },
    )
    lora_targets: str = field(
        default="q_proj,v_proj", metadata={"help": "with --data: comma-separated module names LoRA adapts"}
    )
    max_new_tokens: int = field(
        default=128,
        metadata={"help": "with --data: tokens generated per test request for the compile rate (0: no generation)"},
    )
    eval_batch_size: int = field(default=8, metadata={"help": "with --data: contracts per evaluation batch"})
    base: Literal["smollm2", "tiny"] = field(
        default="smollm2",
        metadata={"help": "smollm2: SmolLM2-135M-Instruct (default); tiny: a tiny LLaMA pretrained on the corpus"},
    )
    stages: str = field(default="CI,VD,TI", metadata={"help": "comma-separated stages, in order (default CI,VD,TI)"})
    steps: int = field(default=40, metadata={"help": "optimiser steps per stage (default 40)"})
    learning_rate: float | None = field(
        default=None, metadata={"aliases": ["--lr"], "help": "learning rate (default: 5e-4 smollm2, 1e-2 tiny)"}
    )
    batch_size: int | None = field(default=None, metadata={"help": "per-device batch (default: 2 smollm2, 8 tiny)"})
    max_length: int | None = field(default=None, metadata={"help": "tokens of prompt + answer (default 512 / 384)"})
    no_tags: bool = field(default=False, metadata={"help": "TI without the security tags (the control)"})
    npm_corpus: str | None = field(
        default_factory=lambda: os.environ.get(NPM_ENV),
        metadata={"help": f"node_modules with more Solidity (default ${NPM_ENV})"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the adapter's training (default 0)"})
    output_dir: str = field(
        default_factory=lambda: str(work_dir("codebc") / "artifact"),
        metadata={"aliases": ["--out"], "help": "artifact folder to write"},
    )
    device: Literal["auto", "cpu", "cuda"] | None = field(
        default=None,
        metadata={
            "help": f"training device: auto (CUDA when present, as TrainingArguments decides), cpu or cuda "
            f"(default ${DEVICE_ENV} or auto)"
        },
    )

    def __post_init__(self):
        from hf_ext.core.validation import check_finite_number, check_positive_int

        from .recipe import STAGES

        stages = [s.strip().upper() for s in str(self.stages).split(",") if s.strip()]
        bad = [s for s in stages if s not in STAGES]
        if bad or not stages:
            raise ValueError(f"--stages must name stages among {', '.join(STAGES)}, got {self.stages!r}")
        check_positive_int("--steps", self.steps)
        check_positive_int("--seed", self.seed, minimum=0)
        if self.learning_rate is not None:
            check_finite_number("--learning_rate", self.learning_rate, low=0.0, low_open=True, high=10.0)
        if self.batch_size is not None:
            check_positive_int("--batch_size", self.batch_size)
        if self.max_length is not None:
            check_positive_int("--max_length", self.max_length, minimum=2)
        check_positive_int("--max_new_tokens", self.max_new_tokens, minimum=0)
        check_positive_int("--eval_batch_size", self.eval_batch_size)
        if not isinstance(self.test_split, (int, float)) or not 0 < self.test_split < 1:
            raise ValueError(f"--test_split must be a share in (0, 1), got {self.test_split!r}")
        from .train_contracts import LABELLERS

        if self.label_untagged not in LABELLERS:
            raise ValueError(f"--label_untagged must be one of {', '.join(LABELLERS)}, got {self.label_untagged!r}")
        if self.data is not None and self.model_name_or_path is None:
            raise ValueError(
                "--data needs --model_name_or_path: the causal LM to adapt (a Hub id such as "
                "HuggingFaceTB/SmolLM2-135M-Instruct, or a local folder)"
            )
        if self.data is None and self.model_name_or_path is not None:
            raise ValueError("--model_name_or_path needs --data (your contracts); without it use --base")

    @property
    def stage_list(self) -> list[str]:
        return [s.strip().upper() for s in self.stages.split(",") if s.strip()]


def build_parser():
    """The `transformers.HfArgumentParser` of `hf-ext train codebc` ([`CodeBCTrainArguments`])."""
    from transformers import HfArgumentParser

    return HfArgumentParser(
        CodeBCTrainArguments,
        prog="hf-ext train codebc",
        description="Train the CodeBC stages CI -> VD -> TI with one LoRA adapter and save base + adapter + tokenizer.",
    )


def main(argv: list[str] | None = None) -> Path:
    """`hf-ext train codebc`: trains the stages and returns the artifact folder it wrote."""
    import sys

    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    except ValueError as err:  # a flag out of range: one line naming it, as argparse does for a malformed one
        raise SystemExit(f"hf-ext train codebc: error: {err}") from None
    from hf_ext.core.devices import set_device

    if args.data is not None:
        from .train_contracts import train_on_contracts

        set_device(args.device or os.environ.get(DEVICE_ENV, "auto"))
        return train_on_contracts(args, argv)

    import shlex

    from hf_ext.core.records import save_training_record

    from . import SPEC
    from .adapter import add_adapter, save_codebc
    from .pipeline import with_version_line
    from .presets import PRETRAINED, QUICK
    from .recipe import prepare, stage_arguments, stage_dataset
    from .train_contracts import heldout_metrics, record_metrics
    from .trainer import train_stage

    stages = args.stage_list
    preset = PRETRAINED if args.base == "smollm2" else QUICK
    overrides = {
        k: v
        for k, v in (
            ("stage_lr", args.learning_rate),
            ("stage_batch", args.batch_size),
            ("max_length", args.max_length),
        )
        if v is not None
    }
    scale = dataclasses.replace(preset, stage_steps=args.steps, seed=args.seed, **overrides)  # validates
    set_device(args.device or os.environ.get(DEVICE_ENV, "auto"))
    out = Path(args.output_dir)
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
    # the held-out VD/TI rows of the shipped corpus (split by host contract), measured as on the user's data
    test_rows = [
        {"code": r["contract"].code, "instruction": with_version_line(r["contract"]), "tag": r["tag"]}
        for r in prep.examples["test"]
    ]
    test = heldout_metrics(model, prep.tokenizer, test_rows, max_length=scale.max_length,
                           max_new_tokens=args.max_new_tokens, batch_size=args.eval_batch_size)  # fmt: skip
    save_codebc(model, out, prep.tokenizer, SPEC)
    record = {
        "base": args.base,
        "stages": stages,
        "losses": losses,
        "tags": not args.no_tags,
        "scale": dataclasses.asdict(scale),
    }
    (out / "codebc_training.json").write_text(json.dumps(record, indent=2))
    name = "secure-contracts"
    save_training_record(
        out,
        method=SPEC.name,
        command="hf-ext train codebc" + (" " + shlex.join(argv) if argv else ""),
        base_model="HuggingFaceTB/SmolLM2-135M-Instruct" if args.base == "smollm2" else None,
        datasets=[
            {
                "name": name,
                "hub_id": None,
                "description": "the shipped secure-contract corpus (Slither-labelled, plus SWC-injected copies); "
                f"{len(test_rows)} VD/TI contracts held out by host contract for the metrics",
            }
        ],
        metrics=record_metrics(test, name),
        config={**record, "max_new_tokens": args.max_new_tokens, "test_rows": len(test_rows)},
        notes=f"CodeBC stages {' -> '.join(stages)} ({scale.stage_steps} steps each) on the {args.base} base",
        skip_nonfinite=True,
    )
    print(f"test loss {test['loss']:.4f}  VD accuracy {test['vd_accuracy']:.3f}; wrote {out}")
    return out


__all__ = ["CodeBCTrainArguments", "build_parser", "main"]
