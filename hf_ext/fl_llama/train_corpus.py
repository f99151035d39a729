"""`hf-ext train fl_llama --data SOURCE --model_name_or_path MODEL`: split causal-LM training of the user's Llama on
the user's corpus, with the test split's loss and perplexity in the training record (see
[`~hf_ext.fl_llama.language_model`] for the definitions)."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import torch

SPLIT_KEYS = ("max_length", "validation_split", "test_split", "seed", "eval_batch_size")


def hub_id_or_none(name: str) -> str | None:
    """`name` when it is a Hub id (what a card's `base_model` may name), `None` for a local folder."""
    if Path(name).expanduser().exists():
        return None
    parts = name.split("/")
    return name if len(parts) == 2 and all(parts) else None


def corpus_splits(source: str, *, validation_split: float, test_split: float, seed: int):
    """The corpus read and checked ([`~hf_ext.fl_llama.data.load_corpus`]) and split: the user's own
    train/validation/test where present, else a seeded split by document (train and evaluate call this alike, so
    they see the same test documents)."""
    from hf_ext.core.user_data import split_data

    from .data import load_corpus

    data = load_corpus(source)
    return data, split_data(data, validation=validation_split, test=test_split, seed=seed)


def train_on_corpus(ns, argv: list[str]) -> dict:
    """Trains and saves `ns.output_dir/{client,server}` with the record; returns the metrics."""
    from hf_ext.core.records import metric, save_training_record
    from hf_ext.core.user_data import dataset_entry

    from . import SPEC
    from .arguments import FlLlamaTrainingArguments
    from .artifacts import save_parts
    from .data import TEXT_COLUMN
    from .language_model import (
        causal_lm_forward,
        check_llama,
        document_nll,
        encode_documents,
        load_llama,
        split_forward,
        summarize,
        training_batches,
    )
    from .parallel import build_setup, train

    # everything that can be wrong with the data or the model's kind fails here, before a weight is read
    data, splits = corpus_splits(ns.data, validation_split=ns.validation_split, test_split=ns.test_split, seed=ns.seed)
    check_llama(ns.model_name_or_path)
    model, tok = load_llama(ns.model_name_or_path, ns.tokenizer_name)
    docs = {name: encode_documents(tok, split[TEXT_COLUMN], ns.max_length) for name, split in splits.items()}
    pad = tok.pad_token_id
    base_test = summarize(document_nll(causal_lm_forward(model), docs["test"], pad, ns.eval_batch_size))

    lr = ns.lr if ns.lr is not None else 2e-5
    args = FlLlamaTrainingArguments(learning_rate=lr, max_steps=ns.steps, seed=ns.seed)
    stored = ns.client_stored_blocks or max(ns.a, ns.c)
    setup = build_setup(model, ns.a, ns.c, ns.noise_scale, args=args, client_stored_blocks=stored)
    start = time.perf_counter()
    result = train(setup, [training_batches(docs["train"], ns.batch_size, ns.steps, pad, seed=ns.seed)])
    seconds = time.perf_counter() - start
    losses = result["losses"][0]
    split = setup.clients[0]
    # evaluation with a fresh noise generator, as `hf-ext evaluate fl_llama` draws it (same seed: same numbers)
    split.noise_generator = torch.Generator().manual_seed(ns.seed)
    test = summarize(document_nll(split_forward(split), docs["test"], pad, ns.eval_batch_size))
    val = (
        summarize(document_nll(split_forward(split), docs["validation"], pad, ns.eval_batch_size))
        if "validation" in docs and docs["validation"]
        else None
    )
    entry = dataset_entry(ns.data, data, description=f"the `{TEXT_COLUMN}` column, one document per row")
    name = entry["name"]
    metrics = [
        metric("test loss", "loss", test["loss"], split="test", dataset=name, higher_is_better=False),
        metric("test perplexity", "perplexity", test["perplexity"], split="test", dataset=name, higher_is_better=False),
        metric("final training loss", "loss", losses[-1], split="train", dataset=name, higher_is_better=False),
    ]
    if val is not None:
        metrics.insert(2, metric("validation loss", "loss", val["loss"], split="validation", dataset=name,
                                 higher_is_better=False))  # fmt: skip
    llama = model.config.to_dict()
    record = {
        "command": "hf-ext train fl_llama" + (" " + shlex.join(argv) if argv else ""),
        "base_model": hub_id_or_none(ns.model_name_or_path),
        "datasets": [entry],
        "metrics": metrics,
        "config": {
            "model_name_or_path": ns.model_name_or_path,
            "tokenizer_name": ns.tokenizer_name,
            "a": ns.a,
            "c": ns.c,
            "client_stored_blocks": stored,
            "noise_scale": ns.noise_scale,
            "steps": len(losses),
            "batch_size": ns.batch_size,
            **{k: getattr(ns, k) for k in SPLIT_KEYS},
            "split_rows": {k: len(v) for k, v in splits.items()},
            "training_arguments": args.to_dict(),
            "transport": "in-process",
            "model": {k: llama.get(k) for k in ("vocab_size", "hidden_size", "num_hidden_layers")},
            "test_tokens": test["tokens"],
            "base_model_test_loss": base_test["loss"],
            "base_model_test_perplexity": base_test["perplexity"],
            "train_seconds": round(seconds, 1),
        },
        "notes": (
            f"{len(losses)} split causal-LM steps at a = {ns.a}, c = {ns.c}, s = {ns.noise_scale:g}; the unsplit base "
            f"model scored test loss {base_test['loss']:.4f} (perplexity {base_test['perplexity']:.2f}) on the same "
            f"{base_test['documents']} test documents"
        ),
    }
    out = Path(ns.output_dir)
    save_parts(split.client, setup.server.model, out, tokenizer=tok, record=record)
    save_training_record(out, method=SPEC.name, **record)  # the run as a whole (`hf-ext push --from OUT`)
    print(
        f"test loss {test['loss']:.4f} (perplexity {test['perplexity']:.2f}; unsplit base {base_test['loss']:.4f}) "
        f"after {len(losses)} steps, final training loss {losses[-1]:.4f} -> {out}"
    )
    return {"losses": losses, "test": test, "validation": val, "base_test": base_test}


__all__ = ["SPLIT_KEYS", "corpus_splits", "hub_id_or_none", "train_on_corpus"]
