"""`hf-ext train mymethod`: fit MyMethod on a table with `Trainer` and save an artifact with its training record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser, TrainingArguments


@dataclass
class MyMethodTrainingArguments(TrainingArguments):
    """`TrainingArguments` plus the method's own knobs (every `TrainingArguments` flag works)."""

    data: str | None = field(default=None, metadata={"help": "CSV / JSON / Parquet file or Hub dataset id"})
    hidden_size: int = field(default=16, metadata={"help": "hidden width of the regressor"})
    num_rows: int = field(default=256, metadata={"help": "rows of synthetic data when --data is not given"})


def build_parser() -> HfArgumentParser:
    return HfArgumentParser(MyMethodTrainingArguments)


def main(argv: list[str] | None = None) -> Path:
    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    from transformers import Trainer

    from hf_ext.core.records import save_training_record

    from .configuration_mymethod import MyMethodConfig
    from .data import collate, load_table, synthetic_regression
    from .modeling_mymethod import MyMethodModel

    table = load_table(args.data) if args.data else synthetic_regression(args.num_rows, 8, args.seed)
    split = table.train_test_split(test_size=0.25, seed=args.seed)
    config = MyMethodConfig(num_features=len(table[0]["features"]), hidden_size=args.hidden_size)
    model = MyMethodModel(config)
    args.remove_unused_columns = False
    trainer = Trainer(
        model=model, args=args, train_dataset=split["train"], eval_dataset=split["test"], data_collator=collate
    )
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    metrics = trainer.evaluate()
    out = Path(args.output_dir) / "artifact"
    model.save_pretrained(out)
    save_training_record(
        out,
        method="mymethod",
        command="hf-ext train mymethod",
        datasets=[args.data or "synthetic-linear-regression"],
        metrics=[{"name": "MSE", "type": "mse", "value": metrics["eval_loss"], "split": "test"}],
        config=config.to_dict(),
    )
    return out
