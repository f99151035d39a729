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
    model, processor, train_dataset, args: TinyAlignTrainingArguments, stage: str = "pretrain"
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


@dataclass
class TinyAlignTrainScriptArguments:
    """What `hf-ext train tinyalign` trains (the optimiser and schedule are `TinyAlignTrainingArguments`)."""

    setting: str = field(
        default="tiny",
        metadata={
            "help": "tiny: sklearn digits with the in-house frozen ConvNeXt + small Llama (quick); "
            "pretrained: Fashion-MNIST "
            "with frozen EfficientNet-Lite0 (ImageNet) + SmolLM2-135M-Instruct (slow on CPU)"
        },
    )
    variant: str = field(default="k4", metadata={"help": "baseline, k<k> (honest TinyAlign) or released-k<k> (leaky)"})
    stage: str = field(default="pretrain", metadata={"help": "pretrain (LM frozen) or finetune (LM trained too)"})
    n_memory: int = field(default=400, metadata={"help": "pretrained setting: memory-split size"})
    n_train: int = field(default=128, metadata={"help": "pretrained setting: train-split size"})
    n_test: int = field(default=48, metadata={"help": "pretrained setting: test-split size"})
    value_num_latents: int = field(default=8, metadata={"help": "pretrained setting: latents per memory value"})
    artifact_dir: str | None = field(default=None, metadata={"help": "default: <output_dir>/artifact"})
    save_frozen_parts: bool = field(
        default=False,
        metadata={"help": "write the frozen encoder and LM into the artifact too (default: referenced by path)"},
    )


class TinyAlignArtifact:
    """Model + processor saved together by `hf_ext.core.hub.save_artifact` (one atomic folder)."""

    def __init__(self, model, processor, save_frozen_parts: bool = False):
        self.model, self.processor, self.save_frozen_parts = model, processor, save_frozen_parts

    def save_pretrained(self, folder, **kwargs):
        self.model.save_pretrained(folder, save_frozen_parts=self.save_frozen_parts, **kwargs)
        self.processor.save_pretrained(folder)


def _setting(script: TinyAlignTrainScriptArguments, seed: int):
    """`(model, processor, train, test, class words)` for the chosen setting."""
    from .data import DIGIT_WORDS

    if script.setting == "tiny":
        from .reproduce import build_model, setup

        data = setup()[0]
        model, processor = build_model("small", script.variant, seed)
        return model, processor, data["train"], data["test"], DIGIT_WORDS
    if script.setting != "pretrained":
        raise ValueError(f"--setting must be 'tiny' or 'pretrained', got {script.setting!r}")
    from datasets import concatenate_datasets

    from .fashion import FASHION_WORDS, load_fashion_captions
    from .pretrained_parts import add_vision_features, pretrained_tinyalign
    from .processing_tinyalign import build_memory_bank
    from .reproduce_pretrained import variant_kwargs

    data = load_fashion_captions(n_memory=script.n_memory, n_train=script.n_train, n_test=script.n_test)
    torch.manual_seed(seed)
    model, processor = pretrained_tinyalign(**variant_kwargs(script.variant, script.value_num_latents))
    if model.config.use_retrieval:
        leaky = script.variant.startswith("released")
        build_memory_bank(
            model,
            processor,
            concatenate_datasets([data["memory"], data["train"]]) if leaky else data["memory"],
            batch_size=32,
        )
    train, test = (add_vision_features(model, processor, data[s]) for s in ("train", "test"))
    return model, processor, train, test, FASHION_WORDS


def main(argv: list[str] | None = None) -> dict:
    """`hf-ext train tinyalign`: one Trainer run of the chosen setting and variant; evaluates on the test split and
    saves the artifact (weights without the referenced frozen parts, memory bank, processor) atomically."""
    import json
    from pathlib import Path

    from transformers import HfArgumentParser

    parser = HfArgumentParser(
        (TinyAlignTrainScriptArguments, TinyAlignTrainingArguments), prog="hf-ext train tinyalign"
    )
    script, args = parser.parse_args_into_dataclasses(args=argv)
    if script.stage not in ("pretrain", "finetune"):
        raise ValueError(f"--stage must be 'pretrain' or 'finetune', got {script.stage!r}")
    model, processor, train, test, words = _setting(script, args.seed)
    trainer, curve = make_trainer(model, processor, train, args, stage=script.stage)
    result = trainer.train()
    ev = evaluate_captions(model, processor, test, batch_size=32, class_words=words)
    metrics = {
        "train_loss": result.training_loss,
        "steps": trainer.state.global_step,
        **{k: ev[k] for k in ("test_loss", "token_accuracy", "class_word_accuracy", "bleu")},
    }
    if trainer.is_world_process_zero():
        from hf_ext.core.hub import save_artifact

        from . import SPEC

        out = save_artifact(
            TinyAlignArtifact(model, processor, script.save_frozen_parts),
            script.artifact_dir or Path(args.output_dir) / "artifact",
            SPEC,
        )
        metrics["artifact_dir"] = str(out)
        print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in metrics.items()}, indent=1))
    return metrics
