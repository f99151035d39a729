"""Per-party data: each party's process reads only its own saved `datasets.Dataset`, keyed by entity id; a run
from the exported folders is the simulated run, exactly; the inference helper scores new entities."""

import numpy as np
import pytest
from datasets import Dataset

from hf_ext.proto_evfl import party as party_module
from hf_ext.proto_evfl.data import VerticalDataConfig, build_vertical_split
from hf_ext.proto_evfl.inference import embed_party, predict_entities, score_embeddings
from hf_ext.proto_evfl.party_data import export_party_datasets, load_label_dataset, load_party_dataset
from hf_ext.proto_evfl.task import ProtoEvflRunConfig
from hf_ext.proto_evfl.training import ProtoEvflTrainingArguments, run_federation

CONFIG = VerticalDataConfig(unseen_class=3)
TRAIN = ProtoEvflTrainingArguments(rounds=3, warmup_rounds=1, local_steps=1, unaligned_batch_size=48,
                                   aligned_batch_size=40)  # fmt: skip


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_party_datasets(build_vertical_split(CONFIG), tmp_path_factory.mktemp("parties"))


def test_a_party_dataset_round_trips_its_own_block_only(exported):
    split = build_vertical_split(CONFIG)
    for k in range(2):
        mine, ref = load_party_dataset(exported[f"party-{k}"], k), split.party(k)
        for f in ("aligned_ids", "aligned_features", "unaligned_features", "test_ids", "test_features"):
            np.testing.assert_array_equal(getattr(mine, f), getattr(ref, f), err_msg=f)
        assert mine.width == 32
    labels = load_label_dataset(exported["labels"], 10, 3)
    np.testing.assert_array_equal(labels.aligned_labels, split.labels().aligned_labels)


def test_parties_reading_their_own_folders_reproduce_the_simulated_run(exported, monkeypatch):
    simulated = run_federation(ProtoEvflRunConfig(data=CONFIG, training=TRAIN))

    def forbidden(*a, **k):
        raise AssertionError("a party built the whole simulated split")

    monkeypatch.setattr(party_module, "build_vertical_split", forbidden)
    settings = ProtoEvflRunConfig(data=CONFIG, training=TRAIN, labels_path=str(exported["labels"]),
                                  feature_widths="32,32", num_labels=10)  # fmt: skip
    own = run_federation(settings, node_configs=[{"data-path": str(exported[f"party-{k}"])} for k in range(2)])
    for key, value in simulated.metrics.items():
        if key != "seconds":
            assert own.metrics[key] == value, key


def test_bad_party_datasets_are_named(tmp_path):
    Dataset.from_dict({"entity_id": [0, 1], "split": ["aligned", "nope"], "features": [[0.0], [1.0]]}).save_to_disk(
        str(tmp_path / "a")
    )
    with pytest.raises(ValueError, match=r"split must be one of \('aligned', 'unaligned', 'test'\), got \['nope'\]"):
        load_party_dataset(tmp_path / "a", 0)
    Dataset.from_dict({"entity_id": [0], "split": ["aligned"]}).save_to_disk(str(tmp_path / "b"))
    with pytest.raises(ValueError, match=r"lacks the columns \['features'\]"):
        load_party_dataset(tmp_path / "b", 0)
    with pytest.raises(FileNotFoundError, match="no dataset folder at"):
        load_party_dataset(tmp_path / "missing", 1)


def test_inference_helper_matches_the_federation_on_its_test_entities():
    result = run_federation(ProtoEvflRunConfig(data=CONFIG, training=TRAIN))
    split = build_vertical_split(CONFIG)
    features = [split.party(k).test_features for k in range(2)]
    out = predict_entities(result.top_model, result.party_models, features)
    np.testing.assert_array_equal(out["predictions"], result.predictions["predictions"])
    np.testing.assert_allclose(out["probabilities"].sum(1), 1.0, rtol=1e-5)
    z = [embed_party(p, x) for p, x in zip(result.party_models, features)]
    with pytest.raises(ValueError, match="need embeddings from 2 parties, got 1"):
        score_embeddings(result.top_model, z[:1])
    with pytest.raises(ValueError, match="same entities"):
        score_embeddings(result.top_model, [z[0], z[1][:5]])
