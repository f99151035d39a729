"""Evaluation of a trained TinyAlign model on a caption split: teacher-forced token accuracy and loss, greedy captions
scored by class-word accuracy and BLEU-4, and the retrieved neighbours; [`caption_scores`] gives the per-caption
scores of free captions (the user's data), which paired comparisons need."""

from __future__ import annotations

import torch

from .metrics import class_word_hits, corpus_bleu, token_accuracy


@torch.no_grad()
def evaluate_captions(
    model, processor, dataset, batch_size: int = 120, max_new_tokens: int = 10, class_words=None, generate=True
) -> dict:
    """Teacher-forced token accuracy and loss, and greedy captions scored by class-word accuracy and BLEU-4
    (`generate=False`: the teacher-forced pair only, the generation metrics `nan`; what a validation pass needs).

    Retrieval is always the prompt-only (honest) query, whatever `config.query_includes_answer`: in eval mode the
    model's query pools the image and prompt positions only (`text_query_mask`), so the test caption in the
    teacher-forced `input_ids` never reaches it. `neighbours` lists the retrieved ids per test row.
    """
    from .data import DIGIT_WORDS

    class_words = class_words or DIGIT_WORDS
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    preds, refs, neighbours = [], [], []
    for start in range(0, len(dataset), batch_size):
        rows = dataset[start : start + batch_size]
        batch = {k: v.to(model.device) for k, v in processor(rows["pixel_values"], rows["caption"]).items()}
        if "vision_features" in rows:  # precomputed frozen-tower features replace the images
            batch["vision_features"] = torch.as_tensor(rows["vision_features"], dtype=torch.float32).to(model.device)
            del batch["pixel_values"]
        out = model(**batch)
        c, t = token_accuracy(out.logits, batch["labels"])
        correct, total, loss_sum = correct + c, total + t, loss_sum + float(out.loss) * t
        if out.retrieved_ids is not None:
            neighbours += out.retrieved_ids.tolist()
        if not generate:
            continue
        prompt = {k: v.to(model.device) for k, v in processor(rows["pixel_values"]).items()}
        if "vision_features" in batch:
            prompt["vision_features"] = batch["vision_features"]
            del prompt["pixel_values"]
        gen = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False)
        preds += processor.decode(gen[:, prompt["input_ids"].shape[1] :])
        refs += list(rows["caption"])
    hits = class_word_hits(preds, refs, class_words)  # per test row, in split order: paired tests read these
    return {
        "token_accuracy": correct / max(total, 1),
        "test_loss": loss_sum / max(total, 1),
        "class_word_accuracy": sum(hits) / max(len(hits), 1) if generate else float("nan"),
        "class_word_hits": hits,
        "bleu": corpus_bleu(preds, refs) if generate else float("nan"),
        "examples": [[p, r] for p, r in zip(preds[:3], refs[:3])],
        "neighbours": neighbours,
    }


def _inputs(model, processor, rows, captions=True) -> dict:
    batch = processor(rows["pixel_values"], rows["caption"] if captions else None)
    batch = {k: v.to(model.device) for k, v in batch.items()}
    if "vision_features" in rows:  # precomputed frozen-tower features replace the images
        batch["vision_features"] = torch.as_tensor(rows["vision_features"], dtype=torch.float32).to(model.device)
        del batch["pixel_values"]
    return batch


@torch.no_grad()
def caption_scores(model, processor, dataset, batch_size: int = 32, max_new_tokens: int = 16) -> dict:
    """Per-caption scores of `dataset` (`pixel_values` or `vision_features`, `caption`), for free captions.

    Returns `{"caption_ce": [...], "token_accuracy": [...], "tokens": [...], "predictions": [...],
    "references": [...]}`: per row, the teacher-forced cross-entropy (nats per caption token, the `<eos>` included,
    the model's training loss) and next-token accuracy over that caption's tokens, and the greedy caption.
    """
    model.eval()
    out = {"caption_ce": [], "token_accuracy": [], "tokens": [], "predictions": [], "references": []}
    for start in range(0, len(dataset), batch_size):
        rows = dataset[start : start + batch_size]
        batch = _inputs(model, processor, rows)
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits.float()
        labels = batch["labels"][:, 1:]
        mask = labels != -100
        ce = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), labels.clamp_min(0), reduction="none"
        )  # (B, T-1)
        n = mask.sum(1).clamp_min(1)
        out["caption_ce"] += ((ce * mask).sum(1) / n).tolist()
        out["token_accuracy"] += (((logits[:, :-1].argmax(-1) == labels) & mask).sum(1) / n).tolist()
        out["tokens"] += mask.sum(1).tolist()
        prompt = _inputs(model, processor, rows, captions=False)
        gen = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False)
        out["predictions"] += processor.decode(gen[:, prompt["input_ids"].shape[1] :])
        out["references"] += [c.lower() for c in rows["caption"]]
    return out


def summarize_caption_scores(scores: dict) -> dict[str, float]:
    """Corpus-level metrics from [`caption_scores`]: token-weighted caption CE and token accuracy, and BLEU-4 of the
    greedy captions against the (lower-cased) references."""
    weights = scores["tokens"]
    total = max(sum(weights), 1)
    return {
        "caption_ce": sum(c * w for c, w in zip(scores["caption_ce"], weights)) / total,
        "token_accuracy": sum(a * w for a, w in zip(scores["token_accuracy"], weights)) / total,
        "bleu": corpus_bleu(scores["predictions"], scores["references"]),
    }
