"""`hf-ext train fl_llama`: split training of a tiny random Llama on MultiRC, in one process (server and client here;
`hf-ext fl_llama serve` + `hf-ext fl_llama client` run them apart over gRPC); saves the client's and the server's
parts, each with the run's training record.

Flags are underscore style (`--noise_scale`); the dashed spellings (`--noise-scale`) of earlier versions still work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from transformers import HfArgumentParser

from hf_ext.core.paths import work_dir

from .arguments import FlLlamaTrainingArguments
from .evaluation import evaluate
from .parallel import build_setup, train
from .presets import tiny_llama


@dataclass
class FlLlamaTrainScriptArguments:
    """What `hf-ext train fl_llama` trains (a plain dataclass: the split runs its own per-part optimisers, not a
    `transformers.Trainer`)."""

    a: int = field(default=1, metadata={"help": "client input blocks"})
    c: int = field(default=1, metadata={"help": "client output blocks"})
    noise_scale: float = field(default=0.0, metadata={"help": "s (σ = s·sqrt(π/2))"})
    steps: int = field(default=200, metadata={"help": "training steps"})
    batch_size: int = field(default=8, metadata={"help": "prompts per step"})
    lr: float = field(default=1e-3, metadata={"help": "AdamW learning rate of every part"})
    out: str | None = field(
        default=None,
        metadata={
            "help": "(default: $HF_EXT_HOME/fl_llama/artifact, read when the command runs) writes OUT/client and "
            "OUT/server, each with its training_record.json (`hf-ext push fl_llama` "
            "publishes both, as the Space loads them; one party's part alone with `--from OUT/client`)"
        },
    )

    def __post_init__(self):
        for name in ("a", "c", "steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name} must be an integer >= 1, got {value!r}")
        if (
            not isinstance(self.noise_scale, (int, float))
            or not math.isfinite(self.noise_scale)
            or self.noise_scale < 0
        ):
            raise ValueError(f"--noise_scale must be a finite number >= 0, got {self.noise_scale!r}")
        if not isinstance(self.lr, (int, float)) or not math.isfinite(self.lr) or self.lr <= 0:
            raise ValueError(f"--lr must be a finite number > 0, got {self.lr!r}")


def build_parser() -> HfArgumentParser:
    """The `hf-ext train fl_llama` parser (the CLI reuses it); HfArgumentParser accepts `--noise_scale` and
    `--noise-scale` alike."""
    return HfArgumentParser(FlLlamaTrainScriptArguments, prog="hf-ext fl_llama train", description=__doc__)


def make_parser() -> HfArgumentParser:
    """Old name of [`build_parser`]."""
    return build_parser()


TRAIN_PASSAGES, VAL_PASSAGES = 120, 20


def main(argv: list[str] | None = None) -> dict:
    """`hf-ext fl_llama train`: split training of a tiny random Llama on MultiRC (in-process: server and client in
    this process; `hf-ext fl_llama serve` + `hf-ext fl_llama client` run them apart over gRPC); saves the client's
    and the server's parts, each with the run's training record."""
    import shlex
    import sys

    from hf_ext.core.records import metric

    from .artifacts import save_parts
    from .data import answer_token_ids, corpus, encode_cloze, iter_batches, load_multirc, train_tokenizer

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        (ns,) = parser.parse_args_into_dataclasses(argv)
    except ValueError as err:  # a range check of FlLlamaTrainScriptArguments, naming the flag
        parser.error(str(err))
    if ns.out is None:
        ns.out = str(work_dir("fl_llama", "artifact"))
    torch.set_num_threads(1)  # intra-op threads spin-wait on a busy 2-core machine
    train_ex, val_ex = load_multirc("train", limit=TRAIN_PASSAGES), load_multirc("val", limit=VAL_PASSAGES)
    tok = train_tokenizer(corpus(train_ex, 60))
    model = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    args = FlLlamaTrainingArguments(learning_rate=ns.lr, max_steps=ns.steps)
    # store 3 + 3 client blocks so the saved parts can be re-partitioned up to a, c = 3 (the Space does)
    setup = build_setup(model, ns.a, ns.c, ns.noise_scale, args=args, client_stored_blocks=max(3, ns.a, ns.c))
    data = encode_cloze(tok, train_ex)
    result = train(setup, [list(iter_batches(data, ns.batch_size, steps=ns.steps))])
    metrics = evaluate(setup.clients[0], encode_cloze(tok, val_ex), *answer_token_ids(tok))
    losses = result["losses"][0]
    name = "multirc"
    record = {
        "command": "hf-ext fl_llama train" + (" " + shlex.join(argv) if argv else ""),
        "datasets": [
            {
                "name": name,
                "hub_id": None,
                "description": (
                    "MultiRC (SuperGLUE) yes/no cloze prompts, read locally from the FedSEA-LLaMA repository's "
                    "JSONL files: "
                    f"the first {TRAIN_PASSAGES} training passages ({len(train_ex)} answer options) for training, "
                    "the first "
                    f"{VAL_PASSAGES} validation passages ({len(val_ex)} options) for the metrics"
                ),
            }
        ],
        "metrics": [
            metric("final training loss", "loss", losses[-1], split="train", dataset=name, higher_is_better=False),
            metric(
                "validation answer loss",
                "loss",
                metrics["loss"],
                split="validation",
                dataset=name,
                higher_is_better=False,
            ),
            metric(
                "validation accuracy",
                "accuracy",
                metrics["accuracy"],
                split="validation",
                dataset=name,
                higher_is_better=True,
            ),
            metric(
                "validation AUC", "roc_auc", metrics["auc"], split="validation", dataset=name, higher_is_better=True
            ),
        ],
        "config": {
            "a": ns.a,
            "c": ns.c,
            "noise_scale": ns.noise_scale,
            "steps": len(losses),
            "batch_size": ns.batch_size,
            "training_arguments": args.to_dict(),
            "transport": "in-process",
            "model": {
                k: model.config.to_dict()[k]
                for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
            },
            "validation_yes_rate": metrics["yes_rate"],
        },
        "notes": (
            f"{len(losses)} split-training steps of a tiny random Llama from scratch (a small demonstration run, "
            "not the paper's fine-tuning)"
        ),
        "skip_nonfinite": True,  # the AUC is NaN when the validation slice holds one class only
    }
    save_parts(setup.clients[0].client, setup.server.model, ns.out, tokenizer=tok, record=record)
    print(f"final loss {losses[-1]:.4f}  val accuracy {metrics['accuracy']:.3f}  -> {ns.out}")
    return {"losses": result["losses"], **metrics}


__all__ = ["FlLlamaTrainScriptArguments", "build_parser", "main"]
