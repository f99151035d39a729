"""The Proto-EVFL protocol over Flower's Message API, in-process (`LocalGrid`): what crosses the wire (never raw
features, unaligned samples or OT plans), determinism, the zero-shot prototype path, vanilla VFL's zero on the
unseen class, and clear errors for misbehaving parties."""

import dataclasses
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from flwr.app import Array

from hf_ext.core.federated import ClientAppError
from hf_ext.proto_evfl import party as party_module
from hf_ext.proto_evfl.active_party import FederationAborted
from hf_ext.proto_evfl.data import VerticalDataConfig, build_vertical_split
from hf_ext.proto_evfl.reproduce import run_settings
from hf_ext.proto_evfl.task import ProtoEvflRunConfig
from hf_ext.proto_evfl.testing import tampering_client_app
from hf_ext.proto_evfl.training import ProtoEvflTrainingArguments, run_federation

UNALIGNED_BATCH = 48  # distinct from every size that may cross the wire, so an OT plan would be recognisable


def small(unseen=3, **training) -> ProtoEvflRunConfig:
    args = dict(rounds=4, warmup_rounds=1, local_steps=1, unaligned_batch_size=UNALIGNED_BATCH, aligned_batch_size=40)
    args.update(training)
    return ProtoEvflRunConfig(data=VerticalDataConfig(unseen_class=unseen), training=ProtoEvflTrainingArguments(**args))


@pytest.fixture(scope="module")
def recorded():
    return run_federation(small(), record_messages=True)


ALLOWED = {
    "to-party": {"config", "global-prior", "step", "gradients"},
    "to-active-party": {"metrics", "prototypes", "embeddings", "layout"},
}


def test_only_embeddings_gradients_prototypes_priors_and_ids_cross(recorded):
    split = build_vertical_split(small().data)
    shared_ids = set(split.aligned_ids.tolist()) | set(split.test_ids.tolist())
    pool_sizes = {len(u) for u in split.unaligned_ids}
    widths = set(small().party_widths())  # 32: a raw feature row would have it
    types = {entry["type"] for entry in recorded.messages}
    assert types == {"train.local", "train.step", "evaluate"}
    assert len(recorded.messages) == 2 * 2 * (4 * 3 + 1)  # 2 parties x (out + back) x (4 rounds x 3 batches + eval)
    for entry in recorded.messages:
        assert set(entry["records"]) <= ALLOWED[entry["direction"]], entry["records"].keys()
        for name, record in entry["records"].items():
            for key, value in record.items():
                if not isinstance(value, np.ndarray):
                    continue
                assert not set(value.shape) & widths, (name, key, value.shape)
                assert not set(value.shape) & pool_sizes and UNALIGNED_BATCH not in value.shape, (name, key)
                if value.dtype.kind in "iu":  # entity ids: only aligned and test entities, never unaligned ones
                    assert set(value.tolist()) <= shared_ids, (name, key)
    up = [e for e in recorded.messages if e["direction"] == "to-active-party" and "prototypes" in e["records"]]
    assert up and all(e["records"]["prototypes"]["prototypes"].shape == (10, 16) for e in up)
    np.testing.assert_allclose([e["records"]["prototypes"]["prior"].sum() for e in up], 1.0)


def test_gradients_come_back_for_exactly_the_embedded_batch(recorded):
    sent = [e for e in recorded.messages if e["direction"] == "to-party"]
    received = [e for e in recorded.messages if e["direction"] == "to-active-party"]
    steps = [e["records"]["step"]["ids"] for e in sent if "step" in e["records"]]
    grads = [e["records"]["gradients"] for e in sent if "gradients" in e["records"]]
    assert len(steps) == len(grads) == 2 * 12  # every embedded batch is answered by its gradients
    for ids, g in zip(steps[::2], grads[::2]):
        np.testing.assert_array_equal(ids, g["ids"])
        assert g["embeddings"].shape == (len(ids), 16) and np.abs(g["embeddings"]).sum() > 0
    embedded = [e["records"]["embeddings"]["embeddings"] for e in received if "embeddings" in e["records"]]
    assert embedded and all(z.shape[1] == 16 for z in embedded)


def test_runs_are_deterministic_and_the_unseen_prototype_is_projected(recorded):
    again = run_federation(small())
    assert again.metrics.keys() == recorded.metrics.keys()
    for key, value in recorded.metrics.items():
        if key != "seconds":
            assert again.metrics[key] == value, key
    top = recorded.top_model
    assert top.unseen_classes.tolist() == [3]
    final = [e["records"]["prototypes"]["prototypes"] for e in recorded.messages
             if e["type"] == "evaluate" and e["direction"] == "to-active-party"]  # fmt: skip
    local = torch.from_numpy(np.stack(final))  # party order = node order in LocalGrid
    g, w = top.aggregation.gate_mean, top.aggregation.projection
    expected = F.normalize(sum(g[k] * local[k, 3] @ w[k] for k in range(2)), dim=-1)
    torch.testing.assert_close(top.head.prototypes[3], expected)
    for k, party in enumerate(recorded.party_models):
        torch.testing.assert_close(party.normalized_prototypes(), local[k])


def test_vanilla_vfl_scores_exactly_zero_on_the_unseen_class():
    settings = run_settings("vanilla_vfl", "zero_shot", seed=3, imbalance_ratio=50.0, rounds=12)
    result = run_federation(settings)
    assert settings.data.unseen_class == 3
    assert result.metrics["unseen_accuracy"] == 0.0
    assert 3 not in result.predictions["predictions"]  # a softmax trained without the class never predicts it
    assert result.metrics["seen_accuracy"] > 0.5


def test_ot_that_does_not_converge_is_a_counted_fallback_not_nan():
    result = run_federation(small(sinkhorn_epsilon=1e-4, sinkhorn_iterations=1))
    assert sum(result.history["ot-fallbacks"]) > 0
    assert all(np.isfinite(v) for v in result.history["loss"])
    assert np.isfinite(result.metrics["accuracy"])


def _shift_aligned_ids(kind, content):
    if "layout" in content:
        content["layout"]["aligned-ids"] = Array(content["layout"]["aligned-ids"].numpy() + 1)


def _bad_prior(kind, content):
    if kind == "train.local":
        content["prototypes"]["prior"] = Array(np.full(10, 0.2))


def _nan_embeddings(kind, content):
    if kind == "train.step":
        content["embeddings"]["embeddings"] = Array(np.full((40, 16), np.nan, dtype=np.float32))


def test_a_party_whose_entity_ids_disagree_is_rejected_and_the_run_ends_cleanly(caplog):
    with pytest.raises(FederationAborted, match=r"only parties \[0\] of 0..1 enrolled"):
        run_federation(small(rounds=2), client_app=tampering_client_app(_shift_aligned_ids))
    assert "party 1's aligned-ids disagree with the active party's: " in caplog.text


@pytest.mark.parametrize(
    "tamper, match",
    [
        (_bad_prior, "local prior sent by party 1 sums to 2.000000, not 1"),
        (_nan_embeddings, "party 1: embeddings/embeddings contains NaN or inf; batch skipped"),
    ],
    ids=["prior", "nan-embeddings"],
)
def test_a_malformed_reply_is_rejected_alone_with_its_reason(tamper, match, caplog):
    result = run_federation(small(rounds=2), client_app=tampering_client_app(tamper))
    assert match in caplog.text and any(match in r for r in result.rejections)
    assert np.isfinite(result.metrics["accuracy"])


def test_a_feature_block_of_the_wrong_width_stops_the_party(monkeypatch):
    real = build_vertical_split

    class NarrowRightHalf:
        def __init__(self, config):
            self.split = real(config)

        def party(self, k):
            data = self.split.party(k)
            if k != 1:
                return data
            cut = {f: getattr(data, f)[:, :31] for f in ("aligned_features", "unaligned_features", "test_features")}
            return dataclasses.replace(data, **cut)

    monkeypatch.setattr(party_module, "build_vertical_split", NarrowRightHalf)
    with pytest.raises(ClientAppError, match="party 1: feature block has 31 columns, but the federation's encoder"):
        run_federation(small(rounds=1))


def test_run_config_round_trip_and_the_flower_app_declares_every_key():
    settings = small(selection="threshold", prototype_ema=False)
    flat = settings.to_run_config()
    assert flat["unseen-class"] == 3 and flat["prototype-ema"] is False
    assert ProtoEvflRunConfig.from_run_config(flat) == settings
    assert ProtoEvflRunConfig.from_run_config({**flat, "prototype-ema": "true"}).training.prototype_ema is True
    # the core's one parser (hf_ext.core.federated.run_config): unknown keys refused by name, strict types
    with pytest.raises(ValueError, match=r"unknown ProtoEvflRunConfig run-config key\(s\) \['roundz'\]"):
        ProtoEvflRunConfig.from_run_config({"roundz": 3})
    with pytest.raises(ValueError, match="'rounds' must be an integer"):
        ProtoEvflRunConfig.from_run_config({"rounds": "many"})
    with pytest.raises(ValueError, match="'prototype-ema' must be a bool"):
        ProtoEvflRunConfig.from_run_config({"prototype-ema": 1})
    assert ProtoEvflRunConfig.from_run_config({"unseen-class": -1}).data.unseen_class is None
    app = tomllib.loads((Path(__file__).parents[2] / "examples" / "proto_evfl_app" / "pyproject.toml").read_text())
    declared = app["tool"]["flwr"]["app"]["config"]
    assert declared == ProtoEvflRunConfig().to_run_config()


def test_a_run_config_is_parsed_once_and_the_cache_keeps_value_types():
    """Parties rebuild their settings from the run config on every message: one parse per distinct run config is
    shared (a frozen dataclass), and the cache never lets a value of another type through (`True` == 1 in Python)."""
    flat = small().to_run_config()
    first = ProtoEvflRunConfig.from_run_config(flat)
    assert ProtoEvflRunConfig.from_run_config(dict(flat)) is first  # an equal mapping: no second parse
    assert (
        ProtoEvflRunConfig.from_run_config({**flat, "rounds": flat["rounds"] + 1}).training.rounds
        == first.training.rounds + 1
    )
    assert ProtoEvflRunConfig.from_run_config({"prototype-ema": True}).training.prototype_ema is True
    with pytest.raises(ValueError, match="'prototype-ema' must be a bool"):
        ProtoEvflRunConfig.from_run_config({"prototype-ema": 1})  # equal to True, and its key, but not a bool
    for _ in range(2):  # a failed parse is not remembered
        with pytest.raises(ValueError, match="'rounds' must be an integer"):
            ProtoEvflRunConfig.from_run_config({"rounds": "many"})


@pytest.mark.parametrize("selection", ["ot", "threshold"])
def test_a_party_kept_in_memory_trains_exactly_as_one_rebuilt_from_its_state(monkeypatch, selection):
    """In one process a party reuses the model and optimiser it saved into its node state (`party._LIVE`) instead of
    decoding them again; the run must be bit-identical to rebuilding from the state on every message."""
    settings = small(selection=selection, rounds=5, local_steps=2)
    kept = run_federation(settings)
    monkeypatch.setattr(party_module, "_LIVE_MAX", 0)  # nothing kept: every message rebuilds from the state
    rebuilt = run_federation(settings)
    timing = {"seconds"}
    assert {k: v for k, v in kept.metrics.items() if k not in timing} == {
        k: v for k, v in rebuilt.metrics.items() if k not in timing
    }
    for key in kept.predictions:
        np.testing.assert_array_equal(kept.predictions[key], rebuilt.predictions[key])
    for a, b in zip(kept.party_models, rebuilt.party_models):
        for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(x, y), name


def test_a_replaced_party_state_is_read_not_the_kept_model():
    """A node state whose records were replaced (a restart, a deployment's deserialised state) is decoded again."""
    from flwr.app import RecordDict

    settings = small()
    state = RecordDict()
    worker = party_module.PartyWorker(settings, 0, state)
    worker.save()
    with torch.no_grad():
        worker.model.prototypes.add_(1.0)  # the kept model drifts from what the state holds ...
    state["party-model"] = party_module.state_dict_to_arrays(
        party_module.PartyWorker(settings, 0, RecordDict()).model.state_dict()
    )
    again = party_module.PartyWorker(settings, 0, state)  # ... and the replaced record wins
    assert again.model is not worker.model
    assert not torch.equal(again.model.prototypes, worker.model.prototypes)
    worker.save()
    assert party_module.PartyWorker(settings, 0, state).model is worker.model  # unchanged since the save: kept
