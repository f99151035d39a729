"""`hf-ext train orca` (train.py): one TrainingArguments subclass parsed by HfArgumentParser, every
TrainingArguments flag, the dashed spellings, range checks naming the flag, and a tiny end-to-end run."""

from __future__ import annotations

import json

import pytest
from transformers import HfArgumentParser, TrainingArguments

from hf_ext.orca.train import OrcaTrainingArguments, build_parser, main


def test_parser_is_one_training_arguments_subclass():
    parser = build_parser()
    assert isinstance(parser, HfArgumentParser)
    assert issubclass(OrcaTrainingArguments, TrainingArguments)
    (args,) = parser.parse_args_into_dataclasses(
        args=[
            "--output_dir", "o", "--num_impressions", "500", "--backbone", "ple",
            # plain TrainingArguments flags pass through untouched
            "--lr_scheduler_type", "cosine", "--logging_steps", "7", "--warmup_steps", "3",
        ]
    )  # fmt: skip
    assert (args.num_impressions, args.backbone, args.logging_steps, args.warmup_steps) == (500, "ple", 7, 3)
    assert getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type) == "cosine"
    # ORCA's defaults (the released code's lr, weight decay and batch size)
    assert (args.learning_rate, args.weight_decay, args.per_device_train_batch_size) == (1e-3, 1e-4, 512)


def test_dashed_and_underscore_spellings_agree():
    underscore = ["--output_dir", "o", "--num_impressions", "600", "--shortcut_strength", "1.5", "--use_orca", "false"]
    dashed = ["--output-dir", "o", "--num-impressions", "600", "--shortcut-strength", "1.5", "--use-orca", "false"]
    (a,) = build_parser().parse_args_into_dataclasses(args=underscore)
    (b,) = build_parser().parse_args_into_dataclasses(args=dashed)
    assert (a.num_impressions, a.shortcut_strength, a.use_orca) == (b.num_impressions, b.shortcut_strength, False)
    (c,) = build_parser().parse_args_into_dataclasses(args=["--output_dir", "o", "--no-use-orca"])
    assert c.use_orca is False


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--num_impressions", "0"], r"--num_impressions must be >= 100"),
        (["--mask_fea_ratio", "-0.1"], r"--mask_fea_ratio must be in \[0, 1\]"),
        (["--early_stopping_patience", "0"], r"--early_stopping_patience must be >= 1"),
        (["--num_train_epochs", "-1"], r"--num_train_epochs must be >= 0"),
    ],
)
def test_numbers_are_checked_by_range_naming_the_flag(flags, match):
    with pytest.raises(ValueError, match=match):
        build_parser().parse_args_into_dataclasses(args=["--output_dir", "o", *flags])


def test_main_trains_and_saves_a_loadable_artifact(tmp_path, capsys):
    from transformers import AutoModel

    metrics = main(
        [
            "--output_dir", str(tmp_path), "--num_impressions", "2000", "--max_steps", "3",
            "--per_device_train_batch_size", "64", "--use_cpu", "true", "--report_to", "none",
            "--eval_strategy", "no", "--disable_tqdm", "true",
        ]
    )  # fmt: skip
    assert metrics["global_step"] == 3
    assert metrics["eval_dt_ce"] > 0 and 0.0 <= metrics["eval_ctr_auc"] <= 1.0
    model = AutoModel.from_pretrained(metrics["artifact_dir"])
    assert model.config.field_names[:2] == ["user_id", "item_id"] and model.config.use_orca
    out = capsys.readouterr().out
    printed = json.loads(out[out.rindex('{\n "') : out.rindex("}") + 1])  # the script's own summary, last
    assert printed["artifact_dir"] == metrics["artifact_dir"]
