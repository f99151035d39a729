"""Training of TinyAlign on `transformers.Trainer`: stage 1 (vision tower and LM frozen, connector + connector2
trained) and stage 2 (LM unfrozen too), next-token cross-entropy on caption tokens; a callback records every
step's loss."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from hf_ext.core.devices import use_cpu as _run_uses_cpu

from .metrics import class_word_accuracy, corpus_bleu, token_accuracy


@dataclass
class TinyAlignTrainingArguments(TrainingArguments):
    """`TrainingArguments` with the paper's stage-1 defaults (lr 1e-3, cosine, 3 % warmup), scaled to CPU runs."""

    learning_rate: float = 1e-3
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.03
    per_device_train_batch_size: int = 32
    num_train_epochs: float = 4.0
    logging_steps: int = 1
    save_strategy: str = "no"
    report_to: str | list[str] = "none"
    remove_unused_columns: bool = False
    # the run's --device (auto: TrainingArguments picks CUDA when present); progress bars as HF's default (on)
    use_cpu: bool = field(default_factory=_run_uses_cpu)
    dataloader_num_workers: int = 0


class TinyAlignCollator:
    """Rows `{"pixel_values", "caption"}` → padded model inputs with labels (see `TinyAlignProcessor`)."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        return self.processor([r["pixel_values"] for r in rows], [r["caption"] for r in rows])


class LossCurveCallback(TrainerCallback):
    """Keeps the training loss of every logged step (set `logging_steps=1` for a full curve)."""

    def __init__(self):
        self.losses: list[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


def make_trainer(model, processor, train_dataset, args: TinyAlignTrainingArguments,
                 stage: str = "pretrain") -> tuple[Trainer, LossCurveCallback]:
    """A `Trainer` for stage 1 (`"pretrain"`: vision tower and LM frozen) or stage 2 (`"finetune"`: LM and connectors
    train; the vision tower stays frozen here, unlike the paper's stage 2, to keep CPU runs short)."""
    if stage == "pretrain":
        model.freeze_for_stage1()
    elif stage == "finetune":
        model.freeze_for_stage2()
    else:
        raise ValueError(f"stage must be 'pretrain' or 'finetune', got {stage!r}")
    curve = LossCurveCallback()
    from hf_ext.core.trainer_metrics import argmax_logits, token_accuracy as token_acc_metric

    # trainer.evaluate(eval_dataset) reports `eval_token_acc` (the README's "token acc", teacher-forced caption
    # tokens); class-word accuracy and BLEU need generation (`evaluate_captions`)
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset, data_collator=TinyAlignCollator(processor),
                      callbacks=[curve], compute_metrics=token_acc_metric, preprocess_logits_for_metrics=argmax_logits)
    return trainer, curve


@torch.no_grad()
def evaluate_captions(model, processor, dataset, batch_size: int = 120, max_new_tokens: int = 10) -> dict:
    """Teacher-forced token accuracy and loss, and greedy captions scored by class-word accuracy and BLEU-4.

    Retrieval is always the prompt-only (honest) query, whatever `config.query_includes_answer`: in eval mode the
    model's query pools the image and prompt positions only (`text_query_mask`), so the test caption in the
    teacher-forced `input_ids` never reaches it. `neighbours` lists the retrieved ids per test row.
    """
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    preds, refs, neighbours = [], [], []
    for start in range(0, len(dataset), batch_size):
        rows = dataset[start : start + batch_size]
        batch = {k: v.to(model.device) for k, v in processor(rows["pixel_values"], rows["caption"]).items()}
        out = model(**batch)
        c, t = token_accuracy(out.logits, batch["labels"])
        correct, total, loss_sum = correct + c, total + t, loss_sum + float(out.loss) * t
        prompt = {k: v.to(model.device) for k, v in processor(rows["pixel_values"]).items()}
        gen = model.generate(**prompt, max_new_tokens=max_new_tokens, do_sample=False)
        preds += processor.decode(gen[:, prompt["input_ids"].shape[1]:])
        refs += list(rows["caption"])
        if out.retrieved_ids is not None:
            neighbours += out.retrieved_ids.tolist()
    return {"token_accuracy": correct / max(total, 1), "test_loss": loss_sum / max(total, 1),
            "class_word_accuracy": class_word_accuracy(preds, refs), "bleu": corpus_bleu(preds, refs),
            "examples": [[p, r] for p, r in zip(preds[:3], refs[:3])], "neighbours": neighbours}
