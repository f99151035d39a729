"""A Proto-EVFL federation survives one dishonest party: zero, constant, stale (replayed) and row-permuted embeddings
are refused, the batch is skipped (split learning needs every block of a sample), the run completes, and every
rejection names the party's transport node id. An honest run is untouched (no rejection)."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord
from flwr.clientapp import ClientApp

from hf_ext.proto_evfl.active_party import EmbeddingScreen
from hf_ext.proto_evfl.client_app import app as honest_app
from hf_ext.proto_evfl.data import VerticalDataConfig
from hf_ext.proto_evfl.task import ProtoEvflRunConfig
from hf_ext.proto_evfl.training import ProtoEvflTrainingArguments, run_federation

DISHONEST = 1  # partition 1 = node 102 on the in-process grid


def small(**training) -> ProtoEvflRunConfig:
    args = dict(rounds=3, warmup_rounds=1, local_steps=1, unaligned_batch_size=48, aligned_batch_size=40)
    args.update(training)
    return ProtoEvflRunConfig(data=VerticalDataConfig(unseen_class=3), training=ProtoEvflTrainingArguments(**args))


def dishonest_app(kind: str, from_round: int = 1) -> ClientApp:
    """Party `DISHONEST` rewrites the embeddings of its `train.step` replies from round `from_round` on."""
    state = {"round": 0, "first": None}

    class Dishonest(ClientApp):
        def __call__(self, message, context):
            reply = honest_app(message, context)
            mtype = message.metadata.message_type
            if int(context.node_config["partition-id"]) != DISHONEST:
                return reply
            if mtype == "train.local":
                state["round"] += 1
            if mtype != "train.step" or "embeddings" not in reply.content:
                return reply
            record = reply.content["embeddings"]
            z, s = record["embeddings"].numpy(), record["prototype-logits"].numpy()
            if state["first"] is None and len(z) == 40:
                state["first"] = (z.copy(), s.copy())  # an honest reply, kept to replay later
                return reply
            if state["round"] < from_round:
                return reply
            if kind == "zero":
                z, s = np.zeros_like(z), np.zeros_like(s)
            elif kind == "constant":
                z, s = np.repeat(z[:1], len(z), 0), np.repeat(s[:1], len(s), 0)
            elif kind == "stale" and len(z) == 40:
                z, s = state["first"]
            elif kind == "permuted":
                order = np.random.default_rng(0).permutation(len(z))
                z, s = z[order], s[order]
            reply.content["embeddings"] = ArrayRecord(
                {"embeddings": Array(np.ascontiguousarray(z)), "prototype-logits": Array(np.ascontiguousarray(s))}
            )
            return reply

    return Dishonest()


def test_an_honest_run_rejects_nothing():
    result = run_federation(small())
    assert result.rejections == [] and result.metrics["rejected_replies"] == 0


@pytest.mark.parametrize(
    "kind, from_round, match",
    [
        ("zero", 1, "not unit vectors"),
        ("constant", 1, "one row repeated"),
        ("stale", 1, "stale or replayed"),
        ("permuted", 2, "does not match the same entities' previous embeddings"),
    ],
)
def test_a_run_with_one_dishonest_party_completes_and_names_it(kind, from_round, match):
    result = run_federation(small(), client_app=dishonest_app(kind, from_round))
    assert np.isfinite(result.metrics["accuracy"])  # the run completed and evaluated
    assert result.rejections, "the dishonest party's embeddings were accepted"
    assert all(r.startswith("node 102 (train.step): party 1: embeddings/embeddings ") for r in result.rejections), (
        result.rejections
    )
    assert all(match in r and r.endswith("batch skipped") for r in result.rejections)
    skipped = sum(result.history["skipped-batches"])
    assert skipped == len(result.rejections) and 0 < skipped < 3 * 3  # honest batches still trained


def test_the_screen_on_its_own():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(20, 8)).astype(np.float32)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    ids = np.arange(20)
    screen = EmbeddingScreen()
    assert screen.problem(7, ids, z) is None
    screen.accept(7, ids, z)
    assert screen.problem(7, ids, z) is None  # no gradients sent since: the same rows are not stale yet
    screen.gradients_sent(7)
    assert "stale" in screen.problem(7, ids, z)
    drift = z + 0.05 * rng.normal(size=z.shape).astype(np.float32)
    drift /= np.linalg.norm(drift, axis=1, keepdims=True)
    assert screen.problem(7, ids, drift) is None  # honest drift between visits
    assert "previous embeddings" in screen.problem(7, ids, drift[::-1].copy())  # rows reversed: permuted
    assert screen.problem(8, ids, drift[::-1].copy()) is None  # another party: no history, cannot tell
