"""`hf-ext train fl_llama`: split training in one process (server and client here; `hf-ext fl_llama serve` +
`hf-ext fl_llama client` run them apart over gRPC); saves the client's and the server's parts, each with the run's
training record (and the same record at the top of the output folder).

- **On your own corpus** (`--data SOURCE --model_name_or_path MODEL`): any Llama-family causal LM (a Hub id or a
  local folder) is split at `(a, c)` and trained by causal LM on the documents of a `text` column (see
  [`~hf_ext.fl_llama.data.SCHEMA`]); the record holds the test split's loss and perplexity through the split model
  (noise included), and the unsplit base's on the same documents. `hf-ext evaluate fl_llama` re-measures them.
- **Without `--data`**: a tiny random Llama on MultiRC yes/no cloze prompts (the demonstration run).

Flags are underscore style (`--noise_scale`); the dashed spellings (`--noise-scale`) of earlier versions and `--out`
still work. The split runs its own per-part optimisers (one AdamW each, as the official scripts), not a
`transformers.Trainer`, so the arguments are a plain dataclass.
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

    data: str | None = field(
        default=None,
        metadata={
            "help": "your corpus: a JSONL/JSON/CSV/TSV/Parquet file or folder with a `text` column, a Hub dataset id, "
            "or a .txt file with one document per line (default: MultiRC cloze prompts on a tiny random Llama)"
        },
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "with --data: the Llama-family causal LM to split (a Hub id or a local folder)"},
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "with --data: the tokenizer (default: the model's own)"}
    )
    a: int = field(default=1, metadata={"help": "client input blocks"})
    c: int = field(default=1, metadata={"help": "client output blocks"})
    client_stored_blocks: int | None = field(
        default=None,
        metadata={"help": "first/last blocks the client stores, so (a, c) can move later (default: max(a, c))"},
    )
    noise_scale: float = field(default=0.0, metadata={"help": "s (σ = s·sqrt(π/2))"})
    steps: int = field(default=200, metadata={"help": "training steps"})
    batch_size: int = field(default=8, metadata={"help": "prompts (chunks of documents with --data) per step"})
    lr: float | None = field(
        default=None,
        metadata={
            "aliases": ["--learning_rate"],
            "help": "AdamW learning rate of every part (default: 2e-5 with --data, 1e-3 for the tiny MultiRC run)",
        },
    )
    max_length: int = field(default=256, metadata={"help": "with --data: tokens per training/evaluation chunk"})
    validation_split: float = field(
        default=0.1, metadata={"help": "with --data: share of documents held out for validation (when no split)"}
    )
    test_split: float = field(
        default=0.1, metadata={"help": "with --data: share of documents held out for the test metrics (when no split)"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the data split, the batch order and the client's noise"})
    eval_batch_size: int = field(default=8, metadata={"help": "chunks per evaluation forward"})
    output_dir: str | None = field(
        default=None,
        metadata={
            "aliases": ["--out"],
            "help": "(default: $HF_EXT_HOME/fl_llama/artifact, read when the command runs) writes OUT/client and "
            "OUT/server, each with its training_record.json (`hf-ext push fl_llama` "
            "publishes both, as the Space loads them; one party's part alone with `--from OUT/client`)",
        },
    )

    def __post_init__(self):
        for name in ("a", "c", "steps", "batch_size", "max_length", "eval_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name} must be an integer >= 1, got {value!r}")
        if self.max_length < 2:
            raise ValueError(f"--max_length must be >= 2 (a token and its successor), got {self.max_length}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"--seed must be an integer >= 0, got {self.seed!r}")
        if (
            not isinstance(self.noise_scale, (int, float))
            or not math.isfinite(self.noise_scale)
            or self.noise_scale < 0
        ):
            raise ValueError(f"--noise_scale must be a finite number >= 0, got {self.noise_scale!r}")
        if self.lr is not None and (
            not isinstance(self.lr, (int, float)) or not math.isfinite(self.lr) or self.lr <= 0
        ):
            raise ValueError(f"--lr must be a finite number > 0, got {self.lr!r}")
        for name in ("validation_split", "test_split"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f"--{name} must be a share in [0, 1), got {value!r}")
        if self.test_split == 0:
            raise ValueError("--test_split must be > 0: the record's metrics are measured on the test split")
        if self.data is not None and self.model_name_or_path is None:
            raise ValueError(
                "--data needs --model_name_or_path: the Llama-family causal LM to split (a Hub id such as "
                "HuggingFaceTB/SmolLM2-135M, or a local folder)"
            )
        if self.data is None and (self.model_name_or_path or self.tokenizer_name):
            raise ValueError("--model_name_or_path / --tokenizer_name need --data (your corpus)")

    @property
    def out(self) -> str | None:
        """Old name of `output_dir`."""
        return self.output_dir


def build_parser() -> HfArgumentParser:
    """The `hf-ext train fl_llama` parser (the CLI reuses it); HfArgumentParser accepts `--noise_scale` and
    `--noise-scale` alike."""
    return HfArgumentParser(FlLlamaTrainScriptArguments, prog="hf-ext train fl_llama", description=__doc__)


def make_parser() -> HfArgumentParser:
    """Old name of [`build_parser`]."""
    return build_parser()


TRAIN_PASSAGES, VAL_PASSAGES = 120, 20


def main(argv: list[str] | None = None) -> dict:
    """`hf-ext train fl_llama`: split training (in-process: server and client in this process; `hf-ext fl_llama
    serve` + `hf-ext fl_llama client` run them apart over gRPC) on your corpus (`--data`) or, without it, of a tiny
    random Llama on MultiRC; saves the client's and the server's parts, each with the run's training record."""
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        (ns,) = parser.parse_args_into_dataclasses(argv)
    except ValueError as err:  # a range check of FlLlamaTrainScriptArguments, naming the flag
        parser.error(str(err))
    if ns.output_dir is None:
        ns.output_dir = str(work_dir("fl_llama", "artifact"))
    if ns.data is not None:
        from .train_corpus import train_on_corpus

        return train_on_corpus(ns, argv)
    return _train_multirc(ns, argv)


def _train_multirc(ns: FlLlamaTrainScriptArguments, argv: list[str]) -> dict:
    import shlex

    from hf_ext.core.records import metric

    from .artifacts import save_parts
    from .data import answer_token_ids, corpus, encode_cloze, iter_batches, load_multirc, train_tokenizer

    torch.set_num_threads(1)  # intra-op threads spin-wait on a busy 2-core machine
    train_ex, val_ex = load_multirc("train", limit=TRAIN_PASSAGES), load_multirc("val", limit=VAL_PASSAGES)
    tok = train_tokenizer(corpus(train_ex, 60))
    model = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    args = FlLlamaTrainingArguments(learning_rate=ns.lr or 1e-3, max_steps=ns.steps)
    # store 3 + 3 client blocks so the saved parts can be re-partitioned up to a, c = 3 (the Space does)
    stored = ns.client_stored_blocks or max(3, ns.a, ns.c)
    setup = build_setup(model, ns.a, ns.c, ns.noise_scale, args=args, client_stored_blocks=stored)
    data = encode_cloze(tok, train_ex)
    result = train(setup, [list(iter_batches(data, ns.batch_size, steps=ns.steps))])
    metrics = evaluate(setup.clients[0], encode_cloze(tok, val_ex), *answer_token_ids(tok))
    losses = result["losses"][0]
    name = "multirc"
    record = {
        "command": "hf-ext train fl_llama" + (" " + shlex.join(argv) if argv else ""),
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
    save_parts(setup.clients[0].client, setup.server.model, ns.output_dir, tokenizer=tok, record=record)
    print(f"final loss {losses[-1]:.4f}  val accuracy {metrics['accuracy']:.3f}  -> {ns.output_dir}")
    return {"losses": result["losses"], **metrics}


__all__ = ["FlLlamaTrainScriptArguments", "build_parser", "main"]
