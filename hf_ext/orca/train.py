"""`hf-ext train orca`: trains one ORCA model (or the plain multi-task baseline) with [`OrcaTrainer`] on the user's
click log (`--data`, the format of [`~hf_ext.orca.data.CLICK_LOG_SCHEMA`]), the causal synthetic log
([`~hf_ext.orca.causal_generator`], without `--data`) or a Tenrec QK-article CSV, saves it as a Hub artifact and
writes its `training_record.json` with the metrics measured on the test split ([`~hf_ext.orca.evaluate`]).

```
hf-ext train orca --data clicks.csv --output_dir out [--use_orca false] [--post_click_fields category] ...
```

[`OrcaTrainingArguments`] is a `TrainingArguments` subclass parsed by `transformers.HfArgumentParser`
([`build_parser`]): every `TrainingArguments` flag works, flags are underscore style (`--output_dir`) and the dashed
spelling (`--output-dir`) is accepted too. Runs under `accelerate launch --multi_gpu --num_processes 2` as well.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import HfArgumentParser, TrainingArguments

from .configuration_orca import OrcaConfig
from .modeling_orca import OrcaModel
from .trainer import EVAL_COLUMNS, MODEL_COLUMNS, ORCA_TRAINING_DEFAULTS, OrcaTrainer


def _check_number(flag: str, value, *, kind=float, low=None, high=None, open_low=False, choices=None) -> None:
    """Raises a `ValueError` naming `--flag` unless `value` has the type `kind` and lies in its range."""
    name = f"--{flag}"
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        return
    if kind is str:
        if not isinstance(value, str) or (choices and value not in choices):
            raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
        return
    ok_type = (int, np.integer) if kind is int else (int, float, np.number)
    if isinstance(value, bool) or not isinstance(value, ok_type):
        raise ValueError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and high is not None:
        if not (low < value if open_low else low <= value) or value > high:
            raise ValueError(f"{name} must be in {'(' if open_low else '['}{low:g}, {high:g}], got {value!r}")
    elif low is not None and (value <= low if open_low else value < low):
        raise ValueError(f"{name} must be {'>' if open_low else '>='} {low:g}, got {value!r}")


@dataclass
class OrcaTrainingArguments(TrainingArguments):
    """`TrainingArguments` with the ORCA training knobs, the data and model choices of `hf-ext train orca`, and the
    official defaults (lr 1e-3, weight decay 1e-4, batch 512; the loader is shuffled, unlike the released code). Every
    `TrainingArguments` flag works; each flag also has its dashed spelling (`--output-dir`). The device comes from
    `TrainingArguments` / Accelerate as usual (`use_cpu=True` to force the CPU).

    Args:
        backbone (`str`, defaults to `"mmoe"`): `mmoe` or `ple`.
        use_orca (`bool`, defaults to `True`): `False` trains the plain multi-task baseline.
        shortcut_strength (`float`, defaults to 2.0): clickbait shortcut strength `s` of the synthetic log (>= 0).
        num_impressions (`int`, defaults to 50000): synthetic impressions (>= 100).
        generator_seed (`int`, defaults to 0): seed of the synthetic generator (>= 0).
        data (`str`, *optional*): the user's click log (a CSV / TSV / JSON(L) / Parquet file, a folder with
            train/validation/test files, or a Hub dataset id) in the format of `hf_ext.orca.data.CLICK_LOG_SCHEMA`.
        field_columns (`str`, *optional*): with `data`, the comma-separated field columns (default: every column but
            `click` and `dwell_time`).
        post_click_fields (`str`, *optional*): with `data`, the comma-separated fields seen only after the click.
        validation_fraction (`float`, defaults to 0.1), test_fraction (`float`, defaults to 0.1): shares split off
            when the data has no validation / test split of its own.
        split_seed (`int`, *optional*): seed of that split (default `--seed`); recorded, so `hf-ext evaluate orca`
            scores the same test rows.
        tenrec_csv (`str`, *optional*): train on a Tenrec QK-article CSV instead of the synthetic log.
        artifact_dir (`str`, *optional*): where to save the model (default `OUTPUT_DIR/artifact`).
        sync_report (`str`, *optional*): write per-rank checksums and seen rows (JSON; the data-parallel test).
        nde_lr_ratio (`float`, defaults to 1.0): learning-rate ratio of the NDE tower and head. The released code
            reads an undeclared `united_lr_ratio`; 1.0 is the documented choice.
        use_mask_fea (`bool`, defaults to `True`): the feature-level counterfactual intervention.
        mask_fea_ratio (`float`, defaults to 0.2): share of batches also served with post-click fields masked.
        early_stopping_patience (`int`, *optional*, defaults to 1): with an evaluation strategy, stop after this
            many evaluations without a lower validation CE of the prediction (ORCA) head and restore the best
            weights, as the released code does (patience 1). `None` turns it off.
    """

    backbone: str = field(default="mmoe", metadata={"help": "mmoe or ple", "choices": ["mmoe", "ple"]})
    use_orca: bool = field(default=True, metadata={"help": "False trains the plain multi-task baseline"})
    shortcut_strength: float = field(default=2.0, metadata={"help": "synthetic clickbait shortcut strength s (>= 0)"})
    num_impressions: int = field(default=50_000, metadata={"help": "synthetic impressions (>= 100)"})
    generator_seed: int = field(default=0, metadata={"help": "seed of the synthetic generator (>= 0)"})
    data: str | None = field(
        default=None,
        metadata={"help": "your click log: CSV/TSV/JSON(L)/Parquet file, train/validation/test folder or Hub id"},
    )
    field_columns: str | None = field(
        default=None, metadata={"help": "comma-separated field columns (default: all but click and dwell_time)"}
    )
    post_click_fields: str | None = field(
        default=None, metadata={"help": "comma-separated fields seen only after the click (masked by ORCA)"}
    )
    validation_fraction: float = field(default=0.1, metadata={"help": "validation share when the data has none"})
    test_fraction: float = field(default=0.1, metadata={"help": "test share when the data has none"})
    split_seed: int | None = field(default=None, metadata={"help": "seed of the data split (default --seed)"})
    tenrec_csv: str | None = field(default=None, metadata={"help": "train on a Tenrec QK-article CSV instead"})
    artifact_dir: str | None = field(
        default=None, metadata={"help": "where to save the model (default OUTPUT_DIR/artifact)"}
    )
    sync_report: str | None = field(default=None, metadata={"help": "write per-rank checksums and seen rows (JSON)"})
    nde_lr_ratio: float = field(
        default=ORCA_TRAINING_DEFAULTS["nde_lr_ratio"],
        metadata={"help": "LR ratio of the NDE tower/head (united_lr_ratio)."},
    )
    use_mask_fea: bool = field(default=True, metadata={"help": "Counterfactual intervention on post-click fields."})
    mask_fea_ratio: float = field(default=0.2, metadata={"help": "Share of batches re-served masked."})
    early_stopping_patience: int | None = field(
        default=1, metadata={"help": "Evaluations without a better ORCA-head validation CE before stopping."}
    )
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    per_device_train_batch_size: int = 512
    per_device_eval_batch_size: int = 2048
    num_train_epochs: float = 3.0
    save_strategy: str = "no"
    dataloader_num_workers: int = 0
    ddp_find_unused_parameters: bool = False
    label_names: list[str] | None = field(default_factory=lambda: ["click_labels", "dwell_labels", "dwell_seconds"])

    def __post_init__(self):
        # Several processes (torchrun / accelerate launch) and no GPU: data-parallel CPU training (gloo) needs
        # Accelerate's CPU mode; on one process, or with a GPU, the device is left to TrainingArguments/Accelerate.
        if not self.use_cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
            self.use_cpu = True
        self._check_ranges()  # before TrainingArguments' own checks, so a bad number is named by its flag first
        super().__post_init__()

    def _check_ranges(self) -> None:
        """Every number of the script and the main training numbers, by range; a `ValueError` names the flag."""
        _check_number("backbone", self.backbone, kind=str, choices=("mmoe", "ple"))
        for name in ("use_orca", "use_mask_fea"):
            _check_number(name, getattr(self, name), kind=bool)
        _check_number("shortcut_strength", self.shortcut_strength, low=0.0)
        _check_number("num_impressions", self.num_impressions, kind=int, low=100)
        _check_number("generator_seed", self.generator_seed, kind=int, low=0)
        _check_number("mask_fea_ratio", self.mask_fea_ratio, low=0.0, high=1.0)
        _check_number("validation_fraction", self.validation_fraction, low=0.0, high=0.5)
        _check_number("test_fraction", self.test_fraction, low=0.0, high=0.5, open_low=True)
        if self.split_seed is not None:
            _check_number("split_seed", self.split_seed, kind=int, low=0)
        if self.data and self.tenrec_csv:
            raise ValueError("--data and --tenrec_csv: pass one of them")
        _check_number("nde_lr_ratio", self.nde_lr_ratio, low=0.0, open_low=True)
        if self.early_stopping_patience is not None:
            _check_number("early_stopping_patience", self.early_stopping_patience, kind=int, low=1)
        _check_number("learning_rate", self.learning_rate, low=0.0, open_low=True)
        _check_number("weight_decay", self.weight_decay, low=0.0)
        _check_number("num_train_epochs", self.num_train_epochs, low=0.0)
        _check_number("max_steps", self.max_steps, kind=int, low=-1)
        _check_number("seed", self.seed, kind=int, low=0)
        for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
            _check_number(name, getattr(self, name), kind=int, low=1)


def build_parser() -> HfArgumentParser:
    """The `hf-ext train orca` parser: one [`OrcaTrainingArguments`] (every `TrainingArguments` flag included)."""
    return HfArgumentParser(OrcaTrainingArguments, prog="hf-ext train orca")


make_parser = build_parser  # the name before the layout change (issue 35)


def load_training_data(script: OrcaTrainingArguments, seed: int):
    """Returns `(DatasetDict with train/validation/test model features, field names, vocab sizes, post-click,
    field values, dataset entry for the record)`; `field values` is `None` except for `--data`."""
    from datasets import DatasetDict

    from hf_ext.core.user_data import dataset_entry

    from .causal_generator import (
        FIELD_NAMES,
        POST_CLICK_FIELDS,
        SyntheticOrcaConfig,
        field_vocab_sizes,
        generate_synthetic,
    )
    from .data import (
        encode_click_log,
        field_vocabulary,
        load_click_log,
        to_model_features,
        train_val_test_split,
    )
    from .tenrec import load_tenrec_qk_article

    if script.data:
        log = load_click_log(
            script.data,
            field_columns=script.field_columns,
            post_click_fields=script.post_click_fields,
            validation=script.validation_fraction,
            test=script.test_fraction,
            seed=seed,
        )
        names = log.field_names
        values = field_vocabulary(log.splits["train"], names)
        sizes = [len(values[f]) for f in names]
        splits = DatasetDict(
            {k: to_model_features(encode_click_log(v, names, values), names) for k, v in log.splits.items()}
        )
        entry = dataset_entry(script.data, log.splits, description="click log (one row per impression)")
        return splits, names, sizes, log.post_click_fields, values, entry
    if script.tenrec_csv:
        ds, names, sizes, post_click = load_tenrec_qk_article(script.tenrec_csv)
        entry = dataset_entry(script.tenrec_csv, ds, name="tenrec-qk-article")
    else:
        gen = SyntheticOrcaConfig(
            num_impressions=script.num_impressions,
            shortcut_strength=script.shortcut_strength,
            seed=script.generator_seed,
        )
        ds, names, sizes, post_click = (
            generate_synthetic(gen),
            list(FIELD_NAMES),
            field_vocab_sizes(gen),
            list(POST_CLICK_FIELDS),
        )
        entry = {
            "name": "synthetic-causal-dwell",
            "hub_id": None,
            "source": "hf_ext.orca.causal_generator",
            "fingerprint": f"generator:s={gen.shortcut_strength:g},n={gen.num_impressions},seed={gen.seed}",
            "rows": {"all": len(ds)},
        }
    splits = train_val_test_split(to_model_features(ds, names, sizes), seed=seed)
    return splits, names, sizes, post_click, None, entry


class _RecordingCollator:
    """Collates model columns and remembers which `row_id`s this rank saw (for the data-sharding check)."""

    def __init__(self):
        self.seen: list[int] = []

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        self.seen.extend(int(f["row_id"]) for f in features if "row_id" in f)  # eval batches carry no row_id
        keys = [k for k in EVAL_COLUMNS if k in features[0]]
        return {k: torch.as_tensor(np.stack([np.asarray(f[k]) for f in features])) for k in keys}


def _record_config(args: OrcaTrainingArguments, split_seed: int) -> dict:
    """The hyperparameters a card shows: ORCA's knobs, the main training numbers and the data split."""
    keys = (
        "backbone", "use_orca", "nde_lr_ratio", "use_mask_fea", "mask_fea_ratio", "early_stopping_patience",
        "learning_rate", "weight_decay", "per_device_train_batch_size", "num_train_epochs", "max_steps", "seed",
        "field_columns", "post_click_fields",
    )  # fmt: skip
    config = {k: getattr(args, k) for k in keys}
    if args.data:
        config["data_split"] = {"validation": args.validation_fraction, "test": args.test_fraction, "seed": split_seed}
    else:
        config["data_split"] = {
            "validation": 0.1,
            "test": 0.1,
            "seed": split_seed,
            "generator": args.tenrec_csv is None,
        }
        config.update(shortcut_strength=args.shortcut_strength, num_impressions=args.num_impressions)
    return config


def main(argv: list[str] | None = None) -> dict:
    """Trains one ORCA (or baseline) model with `Trainer`, saves it as a Hub artifact and writes its training record
    with the test-split metrics."""
    import shlex
    import sys

    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    command = "hf-ext train orca " + shlex.join(sys.argv[1:] if argv is None else [str(a) for a in argv])
    script = args
    split_seed = args.seed if script.split_seed is None else script.split_seed
    splits, names, sizes, post_click, values, entry = load_training_data(script, seed=split_seed)
    config = OrcaConfig(
        field_names=names,
        field_vocab_sizes=sizes,
        post_click_fields=post_click,
        backbone=script.backbone,
        use_orca=script.use_orca,
        field_values=values,
    )
    torch.manual_seed(args.seed)
    model = OrcaModel(config)
    train = splits["train"]
    collator = None
    if script.sync_report:
        train = train.add_column("row_id", list(range(len(train))))
        args = dataclasses.replace(args, remove_unused_columns=False)  # keep row_id for the collator
        collator = _RecordingCollator()
    validation = splits["validation"].select_columns(list(EVAL_COLUMNS)) if "validation" in splits else None
    trainer = OrcaTrainer(
        model=model,
        args=args,
        train_dataset=train.select_columns([*MODEL_COLUMNS] + (["row_id"] if collator else [])),
        eval_dataset=validation,
        data_collator=collator,
    )
    resume = args.resume_from_checkpoint
    if isinstance(resume, str) and resume.lower() in ("true", "last", "latest"):
        resume = True  # the newest checkpoint in --output_dir, as the transformers example scripts do
    result = trainer.train(resume_from_checkpoint=resume)
    metrics = {"train_loss": result.training_loss, **(trainer.evaluate() if validation is not None else {})}
    state = trainer.state
    if script.sync_report:
        _write_sync_report(trainer, collator, Path(script.sync_report))
    if trainer.is_world_process_zero():
        from hf_ext.core.hub import save_artifact
        from hf_ext.core.records import save_training_record

        from . import SPEC
        from .evaluate import _columns, click_log_metrics, predict

        final = trainer.accelerator.unwrap_model(trainer.model)
        test = _columns(splits["test"])
        pred = predict(final, test["input_ids"], args.per_device_eval_batch_size)
        tested = click_log_metrics(test, pred, final.config.bin_seconds, entry["name"], "test")
        out = save_artifact(final, script.artifact_dir or Path(args.output_dir) / "artifact", SPEC)
        save_training_record(
            out,
            method="orca",
            command=command,
            datasets=[entry],
            metrics=tested,
            config={**_record_config(script, split_seed), "global_step": state.global_step},
            notes=None if script.use_orca else "the plain multi-task baseline (use_orca=False)",
            skip_nonfinite=True,  # e.g. CTR AUC on a test split with one class: named in the notes
        )
        metrics["artifact_dir"] = str(out)
        metrics.update({f"test_{m['name']}": m["value"] for m in tested})
        print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in metrics.items()}, indent=1))
    metrics["global_step"] = state.global_step
    return metrics


def _write_sync_report(trainer: OrcaTrainer, collator: _RecordingCollator, path: Path) -> None:
    """All ranks: gather a parameter checksum and the rows each rank trained on; rank 0 writes them as JSON."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    checksum = torch.tensor([float(sum(p.detach().double().sum() for p in model.parameters()))], dtype=torch.float64)
    seen = torch.tensor(collator.seen, dtype=torch.long)
    length = torch.tensor([seen.numel()])
    acc = trainer.accelerator
    checksums = acc.gather(checksum).tolist()
    lengths = acc.gather(length).tolist()
    padded = torch.full((max(lengths),), -1, dtype=torch.long)
    padded[: seen.numel()] = seen
    rows = acc.gather(padded).view(len(lengths), -1).tolist()
    if acc.is_main_process:
        report = {
            "world_size": acc.num_processes,
            "checksums": checksums,
            "rows_per_rank": [[r for r in rank if r >= 0] for rank in rows],
            "global_step": trainer.state.global_step,
            "train_size": len(trainer.train_dataset),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
