"""`hf-ext train proto_evfl` is an `HfArgumentParser` script (issue 35): the underscore flags it always had and their
dashed aliases parse to the same run settings, and bad values fail naming the field."""

import pytest
from transformers import HfArgumentParser

from hf_ext.proto_evfl.train import ProtoEvflTrainArguments, build_parser, parse_args


def test_parser_is_an_hf_argument_parser_and_the_spec_points_at_it():
    from hf_ext.proto_evfl import SPEC

    assert isinstance(build_parser(), HfArgumentParser)
    assert build_parser().dataclass_types == [ProtoEvflTrainArguments]
    assert SPEC.train == "hf_ext.proto_evfl.train:main"


@pytest.mark.parametrize("style", ["_", "-"])
def test_flags_in_both_spellings_build_the_run_settings(style):
    def flag(name):
        return "--" + name.replace("_", style)

    argv = [flag("unseen_class"), "3", flag("prior_mix"), "0.5", flag("num_parties"), "3", "--rounds", "6",
            flag("local_loss_weight"), "0", flag("output_dir"), "o"]  # fmt: skip
    args = parse_args(argv)
    settings = args.run_config()
    assert settings.data.unseen_class == 3 and settings.data.num_parties == 3
    assert settings.training.prior_mix == 0.5 and settings.training.rounds == 6
    assert settings.training.warmup_rounds == 3  # min(15, rounds // 2)
    assert settings.local_loss_weight == 0.0 and args.output_dir == "o"


def test_defaults_match_the_configs_they_fill():
    from hf_ext.proto_evfl.data import VerticalDataConfig
    from hf_ext.proto_evfl.training import ProtoEvflTrainingArguments

    args, data, train = parse_args([]), VerticalDataConfig(), ProtoEvflTrainingArguments()
    assert (args.num_parties, args.imbalance_ratio, args.aligned_per_class, args.test_per_class) == (
        data.num_parties, data.imbalance_ratio, data.aligned_per_class, data.test_per_class)  # fmt: skip
    assert (args.rounds, args.prior_mix, args.sinkhorn_epsilon) == (
        train.rounds,
        train.prior_mix,
        train.sinkhorn_epsilon,
    )
    assert args.unseen_class is None and args.warmup_rounds is None


def test_bad_values_fail_naming_the_field(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--prior", "flat"])
    assert "--prior" in capsys.readouterr().err
    with pytest.raises(ValueError, match="prior_mix must be a finite number in"):
        parse_args(["--prior_mix", "2"]).run_config()
    with pytest.raises(ValueError, match="rounds must be an integer >= 1"):
        parse_args(["--rounds", "0"]).run_config()
