"""Evaluation of a trained TinyAlign model on a caption split: teacher-forced token accuracy and loss, greedy captions
scored by class-word accuracy and BLEU-4, and the retrieved neighbours."""

from __future__ import annotations

import torch

from .metrics import class_word_accuracy, corpus_bleu, token_accuracy


@torch.no_grad()
def evaluate_captions(
    model, processor, dataset, batch_size: int = 120, max_new_tokens: int = 10, class_words=None
) -> dict:
    """Teacher-forced token accuracy and loss, and greedy captions scored by class-word accuracy and BLEU-4.

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
        prompt = {k: v.to(model.device) for k, v in processor(rows["pixel_values"]).items()}
        if "vision_features" in batch:
            prompt["vision_features"] = batch["vision_features"]
            del prompt["pixel_values"]
        gen = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False)
        preds += processor.decode(gen[:, prompt["input_ids"].shape[1] :])
        refs += list(rows["caption"])
        if out.retrieved_ids is not None:
            neighbours += out.retrieved_ids.tolist()
    return {
        "token_accuracy": correct / max(total, 1),
        "test_loss": loss_sum / max(total, 1),
        "class_word_accuracy": class_word_accuracy(preds, refs, class_words),
        "bleu": corpus_bleu(preds, refs),
        "examples": [[p, r] for p, r in zip(preds[:3], refs[:3])],
        "neighbours": neighbours,
    }
