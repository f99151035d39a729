"""CodeBC's Trainer: the stage arguments, the padding collator, `make_trainer` and `train_stage` (CLM pretraining of
the tiny base, then CI → VD → TI with one LoRA adapter, see [`~hf_ext.codebc.adapter`]).

The paper's recipe ([`CodeBCStageArguments`] defaults, from `train_seq_cl.sh` / `main.py`): LoRA r 8, α 32,
dropout 0.1 on `q_proj, v_proj`; Adam betas (0.9, 0.95), lr 1e-4, weight decay 0, a **constant** schedule (the
script asks for cosine but the optimiser factory builds a constant schedule), 10 epochs per task, the same adapter
carried through the three tasks in order. The quick reproduction raises the learning rate and cuts the steps (a
tiny random-init base needs larger steps; see `reproduce.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class CodeBCStageArguments:
    """Knobs of one CodeBC fine-tuning stage (TrainingArguments-style; not part of the model config).

    Args:
        learning_rate (`float`, defaults to 1e-4): constant learning rate (the paper's effective schedule).
        epochs (`float`, defaults to 10): epochs per stage (paper: 10).
        max_steps (`int`, defaults to -1): if > 0, overrides `epochs`.
        batch_size (`int`, defaults to 4): per-device batch size (paper: 4 × 4 GPUs).
        max_length (`int`, defaults to 3072): max tokens of prompt + answer (paper: 1024 + 2048).
        adam_beta2 (`float`, defaults to 0.95), weight_decay (`float`, defaults to 0.0): optimiser settings.
        lora_r (`int`, defaults to 8), lora_alpha (`int`, defaults to 32), lora_dropout (`float`, defaults to 0.1),
        lora_targets (`list[str]`, defaults to `["q_proj", "v_proj"]`): the LoRA adapter.
        trainable_token_ids (`list[int]`, *optional*): ids of added tokens whose embeddings train with the adapter
            (PEFT `trainable_token_indices`). CodeLlama already knows `correct`, `bug`, `[INST]`...; a tiny base
            pretrained on code never saw them, so their rows would stay random under a q/v-only LoRA.
        seed (`int`, defaults to 0): Trainer seed.
        logging_steps (`int`, defaults to 10): the training loss is logged (printed, and kept in the stage's
            `log_history`) every this many steps.
    """

    learning_rate: float = 1e-4
    epochs: float = 10
    max_steps: int = -1
    batch_size: int = 4
    max_length: int = 3072
    adam_beta2: float = 0.95
    weight_decay: float = 0.0
    lora_r: int = 8
    lora_alpha: int = 32
    lora_dropout: float = 0.1
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    trainable_token_ids: list[int] | None = None
    seed: int = 0
    logging_steps: int = 10

    def __post_init__(self):
        from hf_ext.core.validation import check_finite_number, check_positive_int

        for name in ("learning_rate", "epochs", "adam_beta2", "weight_decay", "lora_alpha", "lora_dropout"):
            value = getattr(self, name)  # check_finite_number parses numeric strings: a str field is refused here
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if self.trainable_token_ids is not None and (
            isinstance(self.trainable_token_ids, str)
            or any(isinstance(i, bool) or not isinstance(i, int) for i in self.trainable_token_ids)
        ):
            raise ValueError(f"trainable_token_ids must be a list of integer ids, got {self.trainable_token_ids!r}")
        check_finite_number("learning_rate", self.learning_rate, low=0.0, low_open=True, high=10.0)
        check_finite_number("epochs", self.epochs, low=0.0, low_open=True, high=1e6)
        if (
            isinstance(self.max_steps, bool)
            or not isinstance(self.max_steps, int)
            or self.max_steps == 0
            or self.max_steps < -1
        ):
            raise ValueError(f"max_steps must be -1 (use epochs) or an integer >= 1, got {self.max_steps!r}")
        check_positive_int("batch_size", self.batch_size)
        check_positive_int("logging_steps", self.logging_steps)
        check_positive_int("max_length", self.max_length, minimum=2)
        check_finite_number("adam_beta2", self.adam_beta2, low=0.0, high=1.0)
        check_finite_number("weight_decay", self.weight_decay, low=0.0, high=10.0)
        check_positive_int("lora_r", self.lora_r)
        check_finite_number("lora_alpha", self.lora_alpha, low=0.0, low_open=True, high=1e6)
        check_finite_number("lora_dropout", self.lora_dropout, low=0.0, high=1.0)
        if self.lora_dropout == 1.0:
            raise ValueError("lora_dropout must be in [0, 1), got 1.0 (every LoRA activation dropped)")
        if not self.lora_targets:
            raise ValueError("lora_targets must name at least one module (e.g. ['q_proj', 'v_proj'])")
        if self.trainable_token_ids is not None and any(int(i) < 0 for i in self.trainable_token_ids):
            raise ValueError(f"trainable_token_ids must be ids >= 0, got {self.trainable_token_ids}")


class PadCollator:
    """Right-pads `input_ids` with the pad id and `labels` with -100; builds the attention mask."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        n = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), n), self.pad_id, dtype=torch.long)
        labels = torch.full((len(rows), n), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), n), dtype=torch.long)
        for i, r in enumerate(rows):
            k = len(r["input_ids"])
            ids[i, :k] = torch.tensor(r["input_ids"])
            labels[i, :k] = torch.tensor(r["labels"])
            mask[i, :k] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def make_trainer(model, dataset, tokenizer_or_pad_id, args: CodeBCStageArguments, output_dir: str):
    """A `Trainer` for one stage with the paper's optimiser settings (constant LR, betas (0.9, 0.95), wd 0)."""
    from transformers import Trainer, TrainingArguments

    from hf_ext.core.devices import use_cpu

    pad_id = tokenizer_or_pad_id if isinstance(tokenizer_or_pad_id, int) else tokenizer_or_pad_id.pad_token_id
    targs = TrainingArguments(
        output_dir=output_dir,
        use_cpu=use_cpu(),
        report_to="none",
        save_strategy="no",
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        adam_beta1=0.9,
        adam_beta2=args.adam_beta2,
        weight_decay=args.weight_decay,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        seed=args.seed,
        logging_steps=args.logging_steps,
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )
    from hf_ext.core.trainer_metrics import argmax_logits, token_accuracy

    # trainer.evaluate(eval_dataset) reports `eval_token_acc` (teacher-forced next-token accuracy on the labelled
    # code tokens); BLEU / CodeBLEU / compile rate need generation and the compiler (`hf-ext codebc score`)
    trainer = Trainer(
        model=model,
        args=targs,
        train_dataset=dataset,
        data_collator=PadCollator(pad_id),
        compute_metrics=token_accuracy,
        preprocess_logits_for_metrics=argmax_logits,
    )
    return trainer  # the loss is printed every `logging_steps` (`{'loss': ...}` lines)


def train_stage(
    model, dataset, tokenizer, args: CodeBCStageArguments, output_dir: str, log: list | None = None
) -> float:
    """Runs one stage; returns the mean training loss. `log`, if given, receives the logged `{"step", "loss"}`
    points (the loss curve the reproduce stores beside its table)."""
    trainer = make_trainer(model, dataset, tokenizer, args, output_dir)
    model.train()
    out = trainer.train()
    model.eval()
    if log is not None:
        log.extend({"step": h["step"], "loss": h["loss"]} for h in trainer.state.log_history if "loss" in h)
    return float(out.training_loss)
