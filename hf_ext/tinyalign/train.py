"""`hf-ext train tinyalign`: one Trainer run of a setting and variant, evaluated on the test split and saved as an
artifact with its `training_record.json`. The arguments are two dataclasses parsed by `transformers.HfArgumentParser`
([`build_parser`]): [`TinyAlignTrainScriptArguments`] (what is trained, on which data) and
[`TinyAlignTrainingArguments`] (the optimiser and schedule, a `TrainingArguments` subclass: every Trainer flag works).

With `--data SOURCE` it trains on the user's image–caption pairs (`hf_ext.tinyalign.data.SCHEMA`) over any vision
encoder (`--vision_model`) and causal LM (`--language_model`); without it, on the built-in settings (`--setting`)."""

from __future__ import annotations

import sys
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
    remove_unused_columns: bool = False
    # the run's --device (auto: TrainingArguments picks CUDA when present); progress bars as HF's default (on)
    use_cpu: bool = field(default_factory=_run_uses_cpu)
    dataloader_num_workers: int = 0


def run_arguments(out, epochs: float, lr: float, batch_size: int, seed: int, **kwargs) -> TinyAlignTrainingArguments:
    """The arguments of one reproduction run: scratch folder `out/trainer`, the seed also fixing the batch order (so
    runs with one seed are paired); `kwargs` go to [`TinyAlignTrainingArguments`]."""
    from pathlib import Path

    return TinyAlignTrainingArguments(
        output_dir=str(Path(out) / "trainer"),
        num_train_epochs=epochs,
        learning_rate=lr,
        per_device_train_batch_size=batch_size,
        seed=seed,
        data_seed=seed,
        **kwargs,
    )


@dataclass
class TinyAlignTrainScriptArguments:
    """What `hf-ext train tinyalign` trains (the optimiser and schedule are `TinyAlignTrainingArguments`)."""

    data: str | None = field(
        default=None,
        metadata={
            "help": "your image–caption pairs: an image folder with metadata.csv / .jsonl (file_name, caption), "
            "a CSV / JSON / Parquet table with image (path) and caption, or a Hub dataset id; default: the built-in "
            "--setting"
        },
    )
    vision_model: str = field(
        default="efficientnet-lite0",
        metadata={"help": "with --data: efficientnet-lite0 (ImageNet, offline), tiny, a Hub id or a local folder"},
    )
    language_model: str = field(
        default="smollm2",
        metadata={"help": "with --data: smollm2 (SmolLM2-135M-Instruct, offline), tiny, a Hub id or a local folder"},
    )
    test_fraction: float = field(
        default=0.2, metadata={"help": "with --data: test rows when the data has no test split"}
    )
    memory_fraction: float = field(
        default=0.4, metadata={"help": "with --data: rows the memory bank is built from (never trained on)"}
    )
    split_seed: int = field(default=0, metadata={"help": "with --data: seed of the memory / train / test split"})
    tiny_lm_steps: int = field(default=200, metadata={"help": "--language_model tiny: text-only pretraining steps"})
    max_new_tokens: int = field(default=16, metadata={"help": "greedy caption length for BLEU on the test split"})
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
        for name, value in (("test_fraction", self.test_fraction), ("memory_fraction", self.memory_fraction)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
                raise ValueError(f"--{name} must be a number in (0, 1), got {value!r}")
        for name in ("tiny_lm_steps", "max_new_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name} must be an integer >= 1, got {value!r}")
        if self.data is not None and self.setting != "tiny":
            raise ValueError("--setting picks the built-in data; with --data it does not apply (drop --setting)")
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


def prepare_own_data(script, seed: int):
    """`(splits, model, processor)` for `--data`: the user's pairs split memory / train / test, TinyAlign composed over
    `--vision_model` and `--language_model`, the memory bank built from the memory split (the honest variant: no
    training row in it; `released-k<k>` adds the training rows, as released)."""
    from .data import load_caption_data, split_caption_data
    from .pretrained_parts import compose_tinyalign
    from .reproduce_pretrained import variant_kwargs

    data = load_caption_data(script.data)  # the schema check comes first: no model loads for bad data
    splits = split_caption_data(
        data, seed=script.split_seed, test=script.test_fraction, memory=script.memory_fraction
    ).rename_column("image", "pixel_values")
    model, processor = compose_tinyalign(
        script.vision_model,
        script.language_model,
        list(splits["train"]["caption"]) + list(splits["memory"]["caption"]),
        seed=seed,
        tiny_lm_steps=script.tiny_lm_steps,
        **variant_kwargs(script.variant, script.value_num_latents),
    )
    return splits, model, processor


def train_on_own_data(script, args, argv) -> dict:
    """`hf-ext train tinyalign --data ...`: trains on the user's pairs, scores the test split (caption CE, token
    accuracy, BLEU-4 of greedy captions), saves the artifact with its training record."""
    import json
    from pathlib import Path

    from hf_ext.core.records import metric, save_training_record
    from hf_ext.core.user_data import dataset_entry

    from .data import memory_source
    from .evaluation import caption_scores, summarize_caption_scores
    from .pretrained_parts import add_vision_features
    from .trainer import make_trainer

    splits, model, processor = prepare_own_data(script, args.seed)
    if model.config.use_retrieval:
        from .processing_tinyalign import build_memory_bank

        build_memory_bank(model, processor, memory_source(splits, script.variant), batch_size=32, progress=False)
    train, test = (add_vision_features(model, processor, splits[s]) for s in ("train", "test"))
    trainer, _ = make_trainer(model, processor, train, args, stage=script.stage)
    result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    scores = caption_scores(model, processor, test, batch_size=args.per_device_eval_batch_size,
                            max_new_tokens=script.max_new_tokens)  # fmt: skip
    summary = summarize_caption_scores(scores)
    out = {"train_loss": result.training_loss, "steps": trainer.state.global_step, **summary}
    if not trainer.is_world_process_zero():
        return out
    from hf_ext.core.hub import save_artifact

    from . import SPEC

    folder = save_artifact(
        TinyAlignArtifact(model, processor, script.save_frozen_parts),
        script.artifact_dir or Path(args.output_dir) / "artifact",
        SPEC,
    )
    entry = dataset_entry(script.data, splits)
    name = entry["name"]
    metrics = [
        metric("caption CE (nats/token)", "loss", summary["caption_ce"], dataset=name, higher_is_better=False),
        metric("token accuracy", "accuracy", summary["token_accuracy"], dataset=name, higher_is_better=True),
        metric("BLEU-4", "bleu", summary["bleu"], dataset=name, higher_is_better=True),
    ]
    cfg = model.config
    base = [ref for ref in (cfg.vision_model_name_or_path, cfg.text_model_name_or_path) if ref]
    train_keys = ("learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size", "seed",
                  "lr_scheduler_type", "warmup_ratio")  # fmt: skip
    config = {
        **{k: v for k, v in vars(script).items() if k not in PRETRAINED_ONLY or k == "value_num_latents"},
        **{k: getattr(args, k) for k in train_keys},
        "split": {"seed": script.split_seed, "test_fraction": script.test_fraction,
                  "memory_fraction": script.memory_fraction, "rows": {k: len(v) for k, v in splits.items()}},
    }  # fmt: skip
    save_training_record(
        folder,
        method="tinyalign",
        command="hf-ext train tinyalign " + " ".join(argv if argv is not None else sys.argv[1:]),
        base_model=base or None,
        datasets=[entry],
        metrics=metrics,
        config=config,
        notes=f"{script.variant} ({'no memory' if not cfg.use_retrieval else f'top-{cfg.memory_top_k} memory'}), "
        f"stage {script.stage}; test split of {len(test)} pairs",
    )
    out["artifact_dir"] = str(folder)
    out["examples"] = [[p, r] for p, r in zip(scores["predictions"][:3], scores["references"][:3])]
    print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in out.items()}, indent=1))
    return out


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
    if script.data is not None:
        return train_on_own_data(script, args, argv)
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
