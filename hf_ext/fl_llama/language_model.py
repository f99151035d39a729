"""Causal-LM split training on the user's corpus: the Llama-family base (checked before any weight is read), the
documents cut into token chunks, and the per-document loss that `hf-ext train fl_llama --data` records and
`hf-ext evaluate fl_llama` pairs with a baseline.

A document's loss is its summed next-token negative log-likelihood (nats) over all its chunks divided by its number
of predicted tokens; the split's test loss is the token-weighted mean over the test documents and its perplexity
`exp(test loss)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch

LLAMA_MODEL_TYPES = ("llama",)


def check_llama(model_name_or_path: str):
    """The base's config, after checking it is a Llama-family causal LM (`model_type` `"llama"`: LLaMA 1-3,
    SmolLM2, TinyLlama, ...). Anything else is a `ValueError` naming its `model_type` and architectures before a
    weight is read: the split copies `LlamaDecoderLayer` blocks by name."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_name_or_path)
    except (OSError, ValueError) as err:
        raise ValueError(
            f"--model_name_or_path {model_name_or_path!r}: cannot read a model config ({err}); pass a Hub id or a "
            "folder with config.json"
        ) from None
    if config.model_type not in LLAMA_MODEL_TYPES:
        archs = ", ".join(getattr(config, "architectures", None) or []) or "no architectures listed"
        raise ValueError(
            f"--model_name_or_path {model_name_or_path!r} is a {config.model_type!r} model ({archs}); FL-LLaMA splits "
            "Llama-family causal LMs only (model_type 'llama', LlamaForCausalLM)"
        )
    return config


def load_llama(model_name_or_path: str, tokenizer_name: str | None = None):
    """`(LlamaForCausalLM in float32, tokenizer)` of a Hub id or local folder, after [`check_llama`]; the tokenizer
    comes from `tokenizer_name` (default: the model's own) and gets a pad token (its EOS) when it has none."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    check_llama(model_name_or_path)
    model = LlamaForCausalLM.from_pretrained(model_name_or_path, dtype=torch.float32)
    source = tokenizer_name or model_name_or_path
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(
            f"no tokenizer in {source!r} ({err}); pass --tokenizer_name (a Hub id or folder with the model's tokenizer)"
        ) from None
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"the tokenizer of {source!r} has neither a pad nor an EOS token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
    if len(tokenizer) > model.config.vocab_size:
        raise ValueError(
            f"the tokenizer of {source!r} has {len(tokenizer)} tokens but the model's vocab_size is "
            f"{model.config.vocab_size}: not the model's tokenizer (pass --tokenizer_name)"
        )
    return model.eval(), tokenizer


def encode_documents(tokenizer, texts: Sequence[str], max_length: int) -> list[list[list[int]]]:
    """Each document's token ids (with the tokenizer's own special tokens, e.g. a Llama BOS) cut into consecutive
    chunks of at most `max_length` tokens; a last chunk of one token (nothing to predict) is dropped."""
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
        raise ValueError(f"--max_length must be an integer >= 2, got {max_length!r}")
    out = []
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        chunks = [ids[i : i + max_length] for i in range(0, len(ids), max_length)]
        out.append([c for c in chunks if len(c) >= 2])
    return out


def collate(chunks: Sequence[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded `input_ids`, `attention_mask` and `labels` (`-100` on padding), the split model's layout."""
    width = max(len(c) for c in chunks)
    ids = torch.full((len(chunks), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(chunks), width), dtype=torch.long)
    for i, c in enumerate(chunks):
        ids[i, width - len(c) :] = torch.tensor(c)
        mask[i, width - len(c) :] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def training_batches(documents: list[list[list[int]]], batch_size: int, steps: int, pad_id: int, seed: int = 0):
    """`steps` shuffled mini-batches of chunks (reshuffled every epoch)."""
    import random

    chunks = [c for doc in documents for c in doc]
    if not chunks:
        raise ValueError("the training split has no document with two or more tokens")
    rng, order = random.Random(seed), []
    for _ in range(steps):
        while len(order) < batch_size:
            perm = list(range(len(chunks)))
            rng.shuffle(perm)
            order += perm
        idx, order = order[:batch_size], order[batch_size:]
        yield collate([chunks[i] for i in idx], pad_id)


@torch.no_grad()
def document_nll(
    forward, documents: list[list[list[int]]], pad_id: int, batch_size: int = 8
) -> list[tuple[float, int]]:
    """`(summed next-token NLL in nats, predicted tokens)` per document. `forward(input_ids, attention_mask)`
    returns logits: the split model (`FlLlamaSplitForCausalLM`, noise included, as a deployed client runs it) or
    any causal LM."""
    flat = [(d, c) for d, doc in enumerate(documents) for c in doc]
    sums, counts = [0.0] * len(documents), [0] * len(documents)
    for i in range(0, len(flat), batch_size):
        part = flat[i : i + batch_size]
        batch = collate([c for _, c in part], pad_id)
        logits = forward(batch["input_ids"], batch["attention_mask"]).float()
        targets = batch["labels"][:, 1:]
        nll = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), targets, ignore_index=-100, reduction="none"
        )
        valid = targets != -100
        for row, (d, _) in enumerate(part):
            sums[d] += float(nll[row][valid[row]].sum())
            counts[d] += int(valid[row].sum())
    return list(zip(sums, counts))


def split_forward(split):
    """`forward(input_ids, attention_mask) -> logits` of a client's `FlLlamaSplitForCausalLM`."""
    split.client.eval()
    return lambda ids, mask: split(ids, mask).logits


def causal_lm_forward(model):
    """`forward(input_ids, attention_mask) -> logits` of an unsplit causal LM (left padding: explicit positions)."""
    from .modeling_fl_llama import position_ids_from_mask

    model.eval()
    return lambda ids, mask: model(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask)).logits


def summarize(nll: list[tuple[float, int]]) -> dict:
    """Token-weighted `loss` and `perplexity` over documents, and each document's own mean loss (`per_document`,
    `None` for a document with nothing to predict)."""
    total, tokens = sum(s for s, _ in nll), sum(n for _, n in nll)
    if tokens == 0:
        raise ValueError("the evaluated documents have no token to predict (each needs two or more tokens)")
    loss = total / tokens
    return {
        "loss": loss,
        "perplexity": math.exp(min(loss, 700.0)),
        "tokens": tokens,
        "documents": len(nll),
        "per_document": [s / n if n else None for s, n in nll],
    }


def load_split(artifact: str | Path, noise_seed: int = 0):
    """A trained `OUT` folder (`client/` + `server/`) as the client's `FlLlamaSplitForCausalLM` wired to its server
    in this process, and the client's tokenizer."""
    from transformers import AutoModel, AutoTokenizer

    from .arguments import FlLlamaTrainingArguments
    from .server import SplitServer
    from .split_model import FlLlamaSplitForCausalLM
    from .transport import InProcessTransport

    folder = Path(artifact)
    missing = [p for p in ("client", "server") if not (folder / p / "config.json").is_file()]
    if missing:
        raise ValueError(
            f"--model {folder}: not an `hf-ext train fl_llama` output (no {' or '.join(p + '/' for p in missing)})"
        )
    client = AutoModel.from_pretrained(folder / "client")
    server = AutoModel.from_pretrained(folder / "server")
    tokenizer = AutoTokenizer.from_pretrained(folder / "client")
    args = FlLlamaTrainingArguments(seed=noise_seed)
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(SplitServer(server, args).handle_bytes), args)
    return split, tokenizer


__all__ = [
    "check_llama",
    "collate",
    "document_nll",
    "encode_documents",
    "load_llama",
    "load_split",
    "summarize",
    "training_batches",
]
