"""Bad input to Proto-EVFL's entry points gets a clear error naming the field and the allowed range: configs,
training and data arguments, the two models' forward passes, priors and OT, per-party datasets, the inference
helper, the run config, the reproduce and train CLIs."""

import numpy as np
import pytest
import torch

from hf_ext.core.testing import BadInput, assert_clear_error


def _party_config(**kw):
    from hf_ext.proto_evfl import ProtoEvflPartyConfig

    return ProtoEvflPartyConfig(**kw)


def _top_config(**kw):
    from hf_ext.proto_evfl import ProtoEvflConfig

    return ProtoEvflConfig(**kw)


def _training(**kw):
    from hf_ext.proto_evfl.training import ProtoEvflTrainingArguments

    return ProtoEvflTrainingArguments(**kw)


def _data(**kw):
    from hf_ext.proto_evfl.data import VerticalDataConfig, build_vertical_split

    return build_vertical_split(VerticalDataConfig(**kw))


def _party_forward(features):
    from hf_ext.proto_evfl import ProtoEvflPartyModel
    from hf_ext.proto_evfl.testing import tiny_party_config

    return ProtoEvflPartyModel(tiny_party_config())(features=features)


def _top_forward(**overrides):
    from hf_ext.proto_evfl import ProtoEvflForClassification
    from hf_ext.proto_evfl.testing import tiny_batch, tiny_config

    batch = tiny_batch()
    batch.update(overrides)
    return ProtoEvflForClassification(tiny_config())(**batch)


def _sinkhorn(cost, prior):
    from hf_ext.proto_evfl.ot_selection import sinkhorn_plan

    return sinkhorn_plan(cost, prior)


def _mixed(local, glob, mix):
    from hf_ext.proto_evfl.prototypes import mixed_prior

    return mixed_prior(local, glob, mix)


def _unseen_mass(q):
    from hf_ext.proto_evfl.prototypes import unseen_mass

    return unseen_mass([0.1, 0.2], [0.3, 0.4], q)


def _run_config(values):
    from hf_ext.proto_evfl.task import ProtoEvflRunConfig

    return ProtoEvflRunConfig.from_run_config(values)


def _party_dataset(tmp, columns):
    from datasets import Dataset

    from hf_ext.proto_evfl.party_data import load_party_dataset

    Dataset.from_dict(columns).save_to_disk(str(tmp))
    return load_party_dataset(tmp, 0)


def _label_dataset(tmp, labels):
    from datasets import Dataset

    from hf_ext.proto_evfl.party_data import load_label_dataset

    Dataset.from_dict({"entity_id": list(range(len(labels))), "split": ["aligned"] * len(labels),
                       "label": labels}).save_to_disk(str(tmp))  # fmt: skip
    return load_label_dataset(tmp, 10)


def _score(embeddings):
    from hf_ext.proto_evfl import ProtoEvflForClassification
    from hf_ext.proto_evfl.inference import score_embeddings
    from hf_ext.proto_evfl.testing import tiny_config

    return score_embeddings(ProtoEvflForClassification(tiny_config()), embeddings)


def _reproduce(argv):
    from hf_ext.proto_evfl.reproduce import ProtoEvflReproduceArguments

    return ProtoEvflReproduceArguments(**argv)


def _tmp():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp()) / "ds"


CASES = [
    BadInput("party embed_dim 0", lambda: _party_config(embed_dim=0), r"embed_dim must be an integer >= 1"),
    BadInput("party num_classes 1", lambda: _party_config(num_classes=1), r"num_classes must be an integer >= 2"),
    BadInput(
        "party temperature 0",
        lambda: _party_config(temperature=0.0),
        r"temperature must be a finite number in \(0, inf\]",
    ),
    BadInput("party hidden width 0", lambda: _party_config(hidden_dims=[0]), r"hidden_dims must be an integer >= 1"),
    BadInput("top aggregation unknown", lambda: _top_config(aggregation="mean"), r"aggregation must be one of"),
    BadInput(
        "top momentum 1",
        lambda: _top_config(prototype_momentum=1.0),
        r"prototype_momentum must be a finite number in \[0, 1\)",
    ),
    BadInput("top party widths count", lambda: _top_config(party_input_dims=[3]), r"party_input_dims has 1 widths"),
    BadInput("training rounds 0", lambda: _training(rounds=0), r"rounds must be an integer >= 1"),
    BadInput("training selection unknown", lambda: _training(selection="greedy"), r"selection must be one of"),
    BadInput(
        "training prior_mix 2", lambda: _training(prior_mix=2.0), r"prior_mix must be a finite number in \[0, 1\]"
    ),
    BadInput(
        "training novelty_quantile 0",
        lambda: _training(novelty_quantile=0.0),
        r"novelty_quantile must be a finite number in \(0, 1\)",
    ),
    BadInput(
        "training unseen_weighting unknown",
        lambda: _training(unseen_weighting="max"),
        r"unseen_weighting must be one of",
    ),
    BadInput("data one party", lambda: _data(num_parties=1), r"at least 2 parties"),
    BadInput("data unknown dataset", lambda: _data(dataset="mnist"), r"dataset must be one of"),
    BadInput("data imbalance below 1", lambda: _data(imbalance_ratio=0.5), r"imbalance_ratio must be >= 1"),
    BadInput("data unseen class out of range", lambda: _data(unseen_class=10), r"unseen_class must be in \[0, 10\)"),
    BadInput("party features wrong width", lambda: _party_forward(torch.zeros(2, 4)), r"expects \(batch, 5\)"),
    BadInput("party features NaN", lambda: _party_forward(torch.full((2, 5), float("nan"))), r"NaN or inf"),
    BadInput(
        "party features integer", lambda: _party_forward(torch.zeros(2, 5, dtype=torch.long)), r"floating-point tensor"
    ),
    BadInput(
        "top embeddings wrong parties",
        lambda: _top_forward(party_embeddings=torch.zeros(12, 1, 4)),
        r"shape \(batch, 2, 4\)",
    ),
    BadInput("top labels out of range", lambda: _top_forward(labels=torch.full((12,), 7)), r"classes in \[0, 3\)"),
    BadInput("sinkhorn NaN cost", lambda: _sinkhorn(np.full((3, 2), np.nan), [0.5, 0.5]), r"cost contains NaN"),
    BadInput("sinkhorn prior not summing to 1", lambda: _sinkhorn(np.zeros((3, 2)), [0.5, 0.6]), r"sums to 1.1"),
    BadInput("mixed prior lambda 1.5", lambda: _mixed([0.5, 0.5], [0.5, 0.5], 1.5), r"λ must be in \[0, 1\]"),
    BadInput("mixed prior negative mass", lambda: _mixed([1.5, -0.5], [0.5, 0.5], 0.5), r"negative mass"),
    BadInput("unseen mass quantile 1", lambda: _unseen_mass(1.0), r"novelty quantile must be in \(0, 1\)"),
    BadInput(
        "run config unknown key", lambda: _run_config({"roundz": 3}), r"unknown ProtoEvflRunConfig run-config key"
    ),
    BadInput("run config bool as text", lambda: _run_config({"prototype-ema": "maybe"}), r"must be a bool"),
    BadInput(
        "run config widths not integers",
        lambda: _run_config({"feature-widths": "a,b"}),
        r"feature_widths must be comma-separated integers",
    ),
    BadInput(
        "party dataset ragged features",
        lambda: _party_dataset(
            _tmp(),
            {
                "entity_id": [0, 1, 2],
                "split": ["aligned", "unaligned", "unaligned"],
                "features": [[0.0], [1.0, 2.0], [1.0]],
            },
        ),
        r"same width",
    ),
    BadInput(
        "party dataset NaN features",
        lambda: _party_dataset(
            _tmp(),
            {
                "entity_id": [0, 1, 2],
                "split": ["aligned", "unaligned", "unaligned"],
                "features": [[0.0], [float("nan")], [1.0]],
            },
        ),
        r"features contain NaN",
    ),
    BadInput(
        "party dataset duplicate aligned ids",
        lambda: _party_dataset(
            _tmp(),
            {
                "entity_id": [0, 0, 2, 3],
                "split": ["aligned", "aligned", "unaligned", "unaligned"],
                "features": [[0.0], [1.0], [1.0], [2.0]],
            },
        ),
        r"entity ids are not unique",
    ),
    BadInput(
        "label dataset label out of range",
        lambda: _label_dataset(_tmp(), [0, 12]),
        r"label must be integer classes in \[0, 10\)",
    ),
    BadInput("inference wrong party count", lambda: _score([np.zeros((2, 4))]), r"need embeddings from 2 parties"),
    BadInput("reproduce unknown variant", lambda: _reproduce({"variants": ["magic"]}), r"unknown variant 'magic'"),
    BadInput("reproduce rounds 0", lambda: _reproduce({"rounds": 0}), r"need rounds >= 1"),
    # strict types and ranges at construction and on load (issue 38)
    BadInput("party input_dim text", lambda: _party_config(input_dim="3"), r"input_dim must be an integer >= 1"),
    BadInput("party hidden_dims float", lambda: _party_config(hidden_dims=[2.7]), r"hidden_dims must be an integer"),
    BadInput("party hidden_dims text", lambda: _party_config(hidden_dims="64"), r"hidden_dims must be a list"),
    BadInput("party num_classes float", lambda: _party_config(num_classes=2.0), r"num_classes must be an integer"),
    BadInput("party index None", lambda: _party_config(party_index=None), r"party_index must be an integer >= 0"),
    BadInput("party init NaN", lambda: _party_config(initializer_range=float("nan")), r"initializer_range.*finite"),
    BadInput("top num_parties text", lambda: _top_config(num_parties="2"), r"num_parties must be an integer"),
    BadInput("top num_parties bool", lambda: _top_config(num_parties=True), r"num_parties must be an integer"),
    BadInput("top temperature None", lambda: _top_config(temperature=None), r"temperature must be a finite number"),
    BadInput("top temperature text", lambda: _top_config(temperature="0.1"), r"temperature must be a finite number"),
    BadInput("top temperature inf", lambda: _top_config(temperature=float("inf")), r"temperature must be a finite"),
    BadInput("top embed_dim float", lambda: _top_config(embed_dim=2.5), r"embed_dim must be an integer"),
    BadInput("top local weight NaN", lambda: _top_config(local_loss_weight=float("nan")), r"local_loss_weight"),
    BadInput("top initializer negative", lambda: _top_config(initializer_range=-1.0), r"initializer_range"),
    BadInput("top party widths text", lambda: _top_config(party_input_dims=["a", "b"]), r"party_input_dims"),
    BadInput("top loaded temperature text", lambda: _top_loaded(temperature="hot"), r"temperature must be a finite"),
    BadInput("party loaded hidden null", lambda: _party_loaded(hidden_dims=[None]), r"hidden_dims must be an integer"),
    BadInput("training rounds text", lambda: _training(rounds="40"), r"rounds must be an integer >= 1"),
    BadInput("training lr None", lambda: _training(party_learning_rate=None), r"party_learning_rate must be a finite"),
    BadInput("training epsilon text", lambda: _training(sinkhorn_epsilon="0.1"), r"sinkhorn_epsilon must be a finite"),
    BadInput("training momentum NaN", lambda: _training(prototype_momentum=float("nan")), r"prototype_momentum"),
    BadInput("training ema text", lambda: _training(prototype_ema="yes"), r"prototype_ema must be a bool"),
    BadInput("data parties text", lambda: _data(num_parties="2"), r"num_parties must be an integer"),
    BadInput("data ratio None", lambda: _data(imbalance_ratio=None), r"imbalance_ratio must be a finite number"),
    BadInput("data ratio inf", lambda: _data(imbalance_ratio=float("inf")), r"imbalance_ratio must be a finite"),
    # forwards: NaN / inf or a wrong type where it would pass silently or crash deep
    BadInput(
        "top party_logits NaN",
        lambda: _top_forward(party_logits=torch.full((12, 2, 3), float("nan"))),
        r"party_logits contains NaN or inf",
    ),
    BadInput("top party_logits list", lambda: _top_forward(party_logits=[[0.0]]), r"party_logits must be a float"),
    BadInput("top labels list", lambda: _top_forward(labels=[0, 1]), r"labels must be an integer tensor"),
    BadInput(
        "top empty labelled batch",
        lambda: _top_forward(
            party_embeddings=torch.zeros(0, 2, 4), labels=torch.zeros(0, dtype=torch.long), party_logits=None
        ),  # fmt: skip
        r"batch is empty",
    ),
    BadInput("party features inf", lambda: _party_forward(torch.full((2, 5), float("inf"))), r"NaN or inf"),
]


def _loaded(config, changes):
    import json
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="proto_evfl_cfg_"))
    config.save_pretrained(folder)
    data = json.loads((folder / "config.json").read_text())
    data.update(changes)
    (folder / "config.json").write_text(json.dumps(data))
    return type(config).from_pretrained(folder)


def _top_loaded(**changes):
    from hf_ext.proto_evfl.testing import tiny_config

    return _loaded(tiny_config(), changes)


def _party_loaded(**changes):
    from hf_ext.proto_evfl.testing import tiny_party_config

    return _loaded(tiny_party_config(), changes)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gets_a_clear_error(case):
    assert_clear_error(case)
