"""TinyAlign's Trainer: the collator, a loss-curve callback and `make_trainer` for stage 1 (vision tower and LM frozen,
connector + connector2 trained) and stage 2 (LM unfrozen too), next-token cross-entropy on caption tokens. The
arguments are [`~hf_ext.tinyalign.train.TinyAlignTrainingArguments`]."""

from __future__ import annotations

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments


class TinyAlignCollator:
    """Rows `{"pixel_values", "caption"}` → padded model inputs with labels (see `TinyAlignProcessor`)."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        batch = self.processor([r["pixel_values"] for r in rows], [r["caption"] for r in rows])
        if "vision_features" in rows[0]:  # precomputed by hf_ext.tinyalign.features: the frozen tower is skipped
            batch["vision_features"] = torch.as_tensor([r["vision_features"] for r in rows], dtype=torch.float32)
            del batch["pixel_values"]
        return batch


class LossCurveCallback(TrainerCallback):
    """Keeps the training loss of every logged step (set `logging_steps=1` for a full curve)."""

    def __init__(self):
        self.losses: list[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


def make_trainer(
    model,
    processor,
    train_dataset,
    args: TrainingArguments,
    stage: str = "pretrain",
) -> tuple[Trainer, LossCurveCallback]:
    """A `Trainer` for stage 1 (`"pretrain"`: vision tower and LM frozen) or stage 2 (`"finetune"`: LM and connectors
    train; the vision tower stays frozen here, unlike the paper's stage 2, to keep CPU runs short)."""
    if stage == "pretrain":
        model.freeze_for_stage1()
    elif stage == "finetune":
        model.freeze_for_stage2()
    else:
        raise ValueError(f"stage must be 'pretrain' or 'finetune', got {stage!r}")
    curve = LossCurveCallback()
    from hf_ext.core.trainer_metrics import argmax_logits
    from hf_ext.core.trainer_metrics import token_accuracy as token_acc_metric

    # trainer.evaluate(eval_dataset) reports `eval_token_acc` (the README's "token acc", teacher-forced caption
    # tokens); class-word accuracy and BLEU need generation (`evaluate_captions`)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_dataset,
        data_collator=TinyAlignCollator(processor),
        callbacks=[curve],
        compute_metrics=token_acc_metric,
        preprocess_logits_for_metrics=argmax_logits,
    )
    return trainer, curve
