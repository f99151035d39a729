"""`hf-ext train fede4rag` is an `HfArgumentParser` script (issue 35): underscore flags, their dashed aliases and the
older names (`--out`, `--lr`) all parse to the same arguments, and bad values fail naming the flag or field."""

import pytest
from transformers import HfArgumentParser

from hf_ext.fede4rag.train import FedE4RAGTrainArguments, build_parser, parse_args


def test_parser_is_an_hf_argument_parser_over_the_arguments_dataclass():
    parser = build_parser()
    assert isinstance(parser, HfArgumentParser)
    assert parser.dataclass_types == [FedE4RAGTrainArguments]
    from hf_ext.fede4rag import SPEC

    assert SPEC.train == "hf_ext.fede4rag.train:main"


@pytest.mark.parametrize(
    "argv",
    [
        ["--output_dir", "o", "--learning_rate", "0.01", "--train_fraction", "0.5", "--kd_lambda", "3",
         "--lora_layers", "4,5", "--no_eval"],
        ["--out", "o", "--lr", "0.01", "--train-fraction", "0.5", "--kd-lambda", "3", "--lora-layers", "4,5",
         "--no-eval"],
    ],
    ids=["underscore", "old dashed"],
)  # fmt: skip
def test_old_and_new_flag_spellings_give_the_same_arguments(argv):
    args = parse_args(argv)
    assert (args.output_dir, args.learning_rate, args.train_fraction, args.kd_lambda) == ("o", 0.01, 0.5, 3.0)
    assert args.layer_indices == (4, 5) and args.no_eval is True
    run = args.run_config(cache_dir="c")
    assert run.lora_layers == (4, 5) and run.learning_rate == 0.01 and run.cache_dir == "c"


def test_defaults_are_the_run_configs():
    from hf_ext.fede4rag.task import RunConfig

    args, run = parse_args([]), RunConfig()
    assert (args.rounds, args.learning_rate, args.temperature, args.kd_lambda, args.lora_rank) == (
        run.rounds, run.learning_rate, run.temperature, run.kd_lambda, run.lora_rank)  # fmt: skip
    assert args.setting == "fede4rag" and args.engine == "simulation" and args.no_eval is False


def test_bad_values_fail_naming_the_flag_or_field(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--rounds", "three"])
    assert "--rounds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--setting", "magic"])
    with pytest.raises(ValueError, match="--lora_layers must be comma-separated integers"):
        parse_args(["--lora_layers", "4,x"])
    with pytest.raises(ValueError, match="RunConfig.train_fraction"):
        parse_args(["--train_fraction", "2"]).run_config(cache_dir="c")
