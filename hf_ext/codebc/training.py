"""CodeBC training on `transformers.Trainer`: CLM pretraining of the tiny base, then CI → VD → TI with one LoRA.

The paper's recipe ([`CodeBCStageArguments`] defaults, from `train_seq_cl.sh` / `main.py`): LoRA r 8, α 32,
dropout 0.1 on `q_proj, v_proj`; Adam betas (0.9, 0.95), lr 1e-4, weight decay 0, a **constant** schedule (the
script asks for cosine but the optimiser factory builds a constant schedule), 10 epochs per task, the same adapter
carried through the three tasks in order. The quick reproduction raises the learning rate and cuts the steps (a
tiny random-init base needs larger steps; see `reproduce.py`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .tags import ci_text, prompt_style, ti_example, vd_example


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


def lora_config(args: CodeBCStageArguments):
    from peft import LoraConfig

    extra = {"trainable_token_indices": list(args.trainable_token_ids)} if args.trainable_token_ids else {}
    return LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=list(args.lora_targets),
        task_type="CAUSAL_LM",
        **extra,
    )


def add_adapter(model, args: CodeBCStageArguments | None = None):
    """Wraps the base model with the one CodeBC LoRA adapter (carried through CI → VD → TI)."""
    from peft import get_peft_model

    return get_peft_model(model, lora_config(args or CodeBCStageArguments()))


def encode_pair(tokenizer, prompt: str, answer: str, max_length: int, loss_on_prompt: bool = False) -> dict:
    """Token ids and labels of `prompt + answer`; labels are -100 on the prompt unless `loss_on_prompt`.

    Too-long examples lose the start of the prompt (the authors truncate on the left), never the answer.
    """
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be an integer >= 1, got {max_length!r}")
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    a = tokenizer(answer, add_special_tokens=False)["input_ids"]
    a = a[:max_length]
    p = p[max(0, len(p) - (max_length - len(a))) :] if len(p) + len(a) > max_length else p
    ids = p + a
    labels = ids[:] if loss_on_prompt else [-100] * len(p) + a
    return {"input_ids": ids, "labels": labels}


def ci_dataset(tokenizer, codes: Sequence[str], max_length: int, samples_per_contract: int = 5):
    """Code-infilling examples (5 FIM splits per secure contract, seeds 0..4), plain CLM loss."""
    from datasets import Dataset

    rows, style = [], prompt_style(tokenizer)
    for code in codes:
        for k in range(samples_per_contract):
            text = ci_text(code, seed=k, style=style)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"][:max_length]
            rows.append({"input_ids": ids, "labels": ids[:]})
    return Dataset.from_list(rows)


def vd_dataset(tokenizer, codes: Sequence[str], tags: Sequence[str], max_length: int):
    """Vulnerability detection as generation: loss on `\\n{tag}\\n[/Tag]\\n` only."""
    from datasets import Dataset

    style = prompt_style(tokenizer)
    return Dataset.from_list(
        [encode_pair(tokenizer, *vd_example(c, t, style), max_length) for c, t in zip(codes, tags)]
    )


def ti_dataset(
    tokenizer, codes: Sequence[str], comments: Sequence[list[str] | str], tags: Sequence[str | None], max_length: int
):
    """Tag-guided instruction tuning: loss on the response (tag, code, tag)."""
    from datasets import Dataset

    style = prompt_style(tokenizer)
    return Dataset.from_list(
        [encode_pair(tokenizer, *ti_example(c, m, t, style), max_length) for c, m, t in zip(codes, comments, tags)]
    )


def clm_dataset(tokenizer, texts: Sequence[str], block_size: int):
    """Concatenate `text </s>` and cut into `block_size` blocks (causal-LM pretraining)."""
    from datasets import Dataset

    stream: list[int] = []
    for t in texts:
        stream += tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    blocks = [stream[i : i + block_size] for i in range(0, len(stream) - block_size + 1, block_size)]
    return Dataset.from_dict({"input_ids": blocks, "labels": [b[:] for b in blocks]})


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


def adapter_state(model) -> dict[str, torch.Tensor]:
    """A copy of the LoRA weights (to evaluate each stage's checkpoint of the one sequential adapter)."""
    from peft import get_peft_model_state_dict

    return copy.deepcopy({k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()})


def load_adapter_state(model, state: dict[str, torch.Tensor]) -> None:
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(model, state)


def base_state_dict(peft_model) -> dict[str, torch.Tensor]:
    """The base model's own weights under their original names (LoRA tensors dropped, `base_layer.` unwrapped)."""
    state = {}
    for name, tensor in peft_model.get_base_model().state_dict().items():
        if "lora_" in name or "trainable_tokens_delta" in name:
            continue
        state[name.replace(".token_adapter.base_layer.", ".").replace(".base_layer.", ".")] = tensor
    return state


def save_codebc(peft_model, out_dir, tokenizer=None, spec=None):
    """Saves base model + CodeBC adapter (+ tokenizer, + card with `spec`) into one folder, atomically.

    The base goes to the folder itself through `save_pretrained(state_dict=...)` with the LoRA tensors removed; the
    adapter goes to `adapter/` (an `adapter_config.json` beside the base's `config.json` would make transformers
    attach the adapter while loading the base, and `PeftModel` would then add it a second time). Load with
    `PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder), folder / "adapter")`.
    """
    from hf_ext.core.hub import atomic_write_dir

    def write(tmp):
        peft_model.get_base_model().save_pretrained(tmp, state_dict=base_state_dict(peft_model))
        peft_model.save_pretrained(tmp / "adapter")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if spec is not None:
            from hf_ext.core.cards import render_card

            render_card(spec).save(tmp / "README.md")

    return atomic_write_dir(out_dir, write)
