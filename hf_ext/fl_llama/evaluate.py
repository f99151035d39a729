"""`hf-ext evaluate fl_llama --model OUT --data SOURCE [--baseline DIR]`: the test split's causal-LM loss and
perplexity of a trained split model (client and server wired in this process, the client's noise included), on the
same test documents `hf-ext train fl_llama` held out (its record gives the split's seed and shares).

With `--baseline DIR` (another `hf-ext train fl_llama` output, or any unsplit causal LM folder or Hub id with the
same tokenizer, e.g. the base model you split) both are scored on the same documents, and the per-document loss
difference (model − baseline, negative: the model predicts the documents better) is bootstrapped over the test
documents ([`~hf_ext.core.reporting.paired_bootstrap`]).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from hf_ext.core.records import Comparison


@dataclass
class FlLlamaEvaluateArguments:
    """What `hf-ext evaluate fl_llama` measures."""

    model: str = field(metadata={"help": "the `hf-ext train fl_llama` output folder (client/ + server/)"})
    data: str = field(metadata={"help": "the corpus it was trained on (same forms as `hf-ext train fl_llama --data`)"})
    baseline: str | None = field(
        default=None,
        metadata={
            "help": "another `hf-ext train fl_llama` output, or an unsplit causal LM (folder or Hub id) with the "
            "same tokenizer, scored on the same test documents"
        },
    )
    output: str | None = field(default=None, metadata={"help": "write the metrics and the comparison as JSON here"})
    eval_batch_size: int | None = field(default=None, metadata={"help": "chunks per forward (default: as trained)"})


def build_parser() -> HfArgumentParser:
    return HfArgumentParser(FlLlamaEvaluateArguments, prog="hf-ext evaluate fl_llama", description=__doc__)


def _training_config(artifact: Path) -> dict:
    from hf_ext.core.records import load_training_record

    from .train_corpus import SPLIT_KEYS

    record = load_training_record(artifact) or load_training_record(artifact / "client")
    config = (record or {}).get("config", {})
    missing = [k for k in SPLIT_KEYS if k not in config]
    if missing:
        raise ValueError(
            f"--model {artifact}: its training record has no {', '.join(missing)}; evaluate needs the output of "
            "`hf-ext train fl_llama --data ...` (it repeats that run's split)"
        )
    return config


def _baseline_forward(path: str, tokenizer, noise_seed: int):
    from .language_model import causal_lm_forward, load_split, split_forward

    folder = Path(path)
    if (folder / "client").is_dir() and (folder / "server").is_dir():
        split, tok = load_split(folder, noise_seed=noise_seed)
        vocab = split.config.llama_config["vocab_size"]
        forward = split_forward(split)
    else:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path)
        vocab, forward = model.config.vocab_size, causal_lm_forward(model)
    if len(tokenizer) > vocab:
        raise ValueError(
            f"--baseline {path}: its vocabulary ({vocab}) is smaller than the model's tokenizer ({len(tokenizer)}); "
            "a paired loss needs the same tokenizer"
        )
    return forward


def main(argv: list[str] | None = None) -> dict:
    from hf_ext.core.records import metric, report_evaluation
    from hf_ext.core.reporting import paired_bootstrap

    from .data import TEXT_COLUMN
    from .language_model import document_nll, encode_documents, load_split, split_forward, summarize
    from .train_corpus import corpus_splits

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    (ns,) = parser.parse_args_into_dataclasses(argv)
    artifact = Path(ns.model)
    config = _training_config(artifact)
    _, splits = corpus_splits(
        ns.data, validation_split=config["validation_split"], test_split=config["test_split"], seed=config["seed"]
    )
    split, tok = load_split(artifact, noise_seed=config["seed"])
    batch = ns.eval_batch_size or config["eval_batch_size"]
    docs = encode_documents(tok, splits["test"][TEXT_COLUMN], config["max_length"])
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    test = summarize(document_nll(split_forward(split), docs, pad, batch))
    name = Path(ns.data).name if Path(ns.data).exists() else ns.data
    metrics = [
        metric("test loss", "loss", test["loss"], dataset=name, higher_is_better=False),
        metric("test perplexity", "perplexity", test["perplexity"], dataset=name, higher_is_better=False),
    ]
    comparison = None
    if ns.baseline:
        base = summarize(document_nll(_baseline_forward(ns.baseline, tok, config["seed"]), docs, pad, batch))
        pairs = [(m, b) for m, b in zip(test["per_document"], base["per_document"]) if m is not None and b is not None]
        diff = paired_bootstrap([m for m, _ in pairs], [b for _, b in pairs], seed=config["seed"])
        full = diff.to_dict()
        comparison = {
            "test loss (per document)": Comparison.paired(
                "documents",
                cell=diff.cell(4),
                model=test["loss"],
                baseline=base["loss"],
                baseline_perplexity=base["perplexity"],
                documents=len(pairs),
                **{k: full[k] for k in ("mean", "sd", "ci_low", "ci_high", "confidence", "method")},
            )
        }
    header = (
        f"FL-LLaMA split model {artifact} on the test split of {ns.data} ({test['documents']} documents, "
        f"{test['tokens']} predicted tokens)"
    )
    return report_evaluation(metrics, output=ns.output, comparison=comparison, header=header)


__all__ = ["FlLlamaEvaluateArguments", "build_parser", "main"]
