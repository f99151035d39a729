"""`hf-ext train tinyalign`: one Trainer run of a setting and variant, evaluated on the test split and saved as an
artifact. The arguments are two dataclasses parsed by `transformers.HfArgumentParser` ([`build_parser`]):
[`TinyAlignTrainScriptArguments`] (what is trained) and [`TinyAlignTrainingArguments`] (the optimiser and schedule,
a `TrainingArguments` subclass)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import TrainingArguments

from hf_ext.core.devices import use_cpu as _run_uses_cpu

from .data import check_variant


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

    def __post_init__(self):
        # flags are checked here, by name, before anything loads: a bad value must not crash deep in the run or be
        # silently ignored (`--n_memory -3` used to be dropped by the tiny setting without a word)
        if self.setting not in ("tiny", "pretrained"):
            raise ValueError(f"--setting must be 'tiny' or 'pretrained', got {self.setting!r}")
        if self.stage not in ("pretrain", "finetune"):
            raise ValueError(f"--stage must be 'pretrain' or 'finetune', got {self.stage!r}")
        check_variant(self.variant)
        for name in PRETRAINED_ONLY:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name} must be an integer >= 1, got {value!r}")
            if self.setting == "tiny" and value != _DEFAULTS[name]:
                raise ValueError(
                    f"--{name} applies to --setting pretrained only (the tiny setting uses the fixed digits splits); "
                    f"got --{name} {value} with --setting tiny"
                )


PRETRAINED_ONLY = ("n_memory", "n_train", "n_test", "value_num_latents")
_DEFAULTS = {"n_memory": 400, "n_train": 128, "n_test": 48, "value_num_latents": 8}


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
    from .data import memory_source
    from .fashion import FASHION_WORDS, load_fashion_captions
    from .pretrained_parts import add_vision_features, pretrained_tinyalign
    from .processing_tinyalign import build_memory_bank
    from .reproduce_pretrained import variant_kwargs

    data = load_fashion_captions(n_memory=script.n_memory, n_train=script.n_train, n_test=script.n_test)
    torch.manual_seed(seed)
    model, processor = pretrained_tinyalign(**variant_kwargs(script.variant, script.value_num_latents))
    if model.config.use_retrieval:
        build_memory_bank(model, processor, memory_source(data, script.variant), batch_size=32)
    train, test = (add_vision_features(model, processor, data[s]) for s in ("train", "test"))
    return model, processor, train, test, FASHION_WORDS


def build_parser():
    """The `transformers.HfArgumentParser` of `hf-ext train tinyalign` ([`TinyAlignTrainScriptArguments`] and
    [`TinyAlignTrainingArguments`]; underscore flags, the dashed spellings accepted too)."""
    from transformers import HfArgumentParser

    return HfArgumentParser((TinyAlignTrainScriptArguments, TinyAlignTrainingArguments), prog="hf-ext train tinyalign")


def main(argv: list[str] | None = None) -> dict:
    """`hf-ext train tinyalign`: one Trainer run of the chosen setting and variant; evaluates on the test split and
    saves the artifact (weights without the referenced frozen parts, memory bank, processor) atomically."""
    import json
    from pathlib import Path

    from .evaluation import evaluate_captions
    from .trainer import make_trainer

    script, args = build_parser().parse_args_into_dataclasses(args=argv)
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
