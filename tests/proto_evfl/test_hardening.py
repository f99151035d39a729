"""The active party trusts the transport, not the payload: replies are keyed by the node id Flower reports, a
claimed party index is bound once at enrolment, a reply claiming another party or carrying malformed records is
rejected alone with a logged reason, and the ServerApp never raises on what a party sends."""

from types import SimpleNamespace

import numpy as np
import pytest
from flwr.app import Array, ConfigRecord, MetricRecord, RecordDict

from hf_ext.core.federated.local import _set_task_identity
from hf_ext.proto_evfl.active_party import ActiveParty, FederationAborted, _exchange
from hf_ext.proto_evfl.data import VerticalDataConfig, build_vertical_split
from hf_ext.proto_evfl.task import ProtoEvflRunConfig
from hf_ext.proto_evfl.testing import tampering_client_app
from hf_ext.proto_evfl.training import ProtoEvflTrainingArguments, run_federation


def small(**training) -> ProtoEvflRunConfig:
    args = dict(rounds=2, warmup_rounds=1, local_steps=1, unaligned_batch_size=48, aligned_batch_size=40)
    args.update(training)
    return ProtoEvflRunConfig(data=VerticalDataConfig(unseen_class=3), training=ProtoEvflTrainingArguments(**args))


def _claim(index, kinds):
    def tamper(kind, content):
        if kind in kinds:
            content["metrics"]["party-index"] = index

    return tamper


def test_two_nodes_claiming_one_party_are_both_rejected_and_the_run_ends_cleanly(caplog):
    with pytest.raises(FederationAborted, match=r"only parties \[\] of 0..1 enrolled"):
        run_federation(small(), client_app=tampering_client_app(_claim(0, ("train.local",))))
    assert "all claim party index 0" in caplog.text


def test_a_later_claim_of_another_party_is_rejected_not_routed(caplog):
    result = run_federation(small(), client_app=tampering_client_app(_claim(0, ("train.step",))))
    assert any("claims party 0" in r and "batch skipped" in r for r in result.rejections)
    assert np.isfinite(result.metrics["accuracy"])
    assert sum(result.history["skipped-batches"]) == 2 * 2  # every train.step batch, 2 per round (90 ids / 40)


@pytest.mark.parametrize(
    "tamper, match",
    [
        (
            lambda kind, c: kind == "train.step" and c.__setitem__("embeddings", ConfigRecord({"embeddings": 1})),
            "record 'embeddings'|embeddings",
        ),
        (
            lambda kind, c: kind == "train.local" and c["metrics"].__setitem__("num-examples", float("nan")),
            "metric 'num-examples' must be a finite number",
        ),
        (
            lambda kind, c: kind == "train.local" and c["metrics"].__setitem__("num-examples", 1e30),
            r"metric 'num-examples' = 1e\+30 is outside",
        ),
        (
            lambda kind, c: (
                kind == "train.step"
                and c["embeddings"].__setitem__("embeddings", Array(np.full((40, 16), 1e30, dtype=np.float32)))
            ),
            "exceeds its bound 1",
        ),
        (lambda kind, c: kind == "train.local" and c.__delitem__("prototypes"), "no 'prototypes' record"),
        (
            lambda kind, c: (
                kind == "train.local" and c["prototypes"].__setitem__("prototypes", Array(np.full((10, 16), 3.0)))
            ),
            "prototypes must be unit vectors",
        ),
    ],
    ids=[
        "config-record-for-arrays",
        "nan-count",
        "huge-count",
        "huge-embeddings",
        "missing-record",
        "non-unit-prototypes",
    ],
)
def test_each_malformed_reply_is_rejected_alone_and_the_run_finishes(tamper, match, caplog):
    result = run_federation(small(), client_app=tampering_client_app(tamper))
    assert any(__import__("re").search(match, r) for r in result.rejections), result.rejections
    assert "rejected the reply of node" in caplog.text
    assert np.isfinite(result.metrics["accuracy"]) and result.metrics["rejected_replies"] >= 1


class FakeGrid:
    """Replies as scripted: `(src_node_id, content)`; a reply only needs what `_exchange` reads of a Message."""

    def __init__(self, replies):
        self.replies = replies

    def send_and_receive(self, messages, timeout=None):
        return [SimpleNamespace(metadata=SimpleNamespace(src_node_id=node), content=content,
                                has_error=lambda: False, has_content=lambda: True)
                for node, content in self.replies]  # fmt: skip


def test_replies_from_unasked_nodes_or_twice_are_rejected_by_transport_identity():
    _set_task_identity(1)  # Message() reads its ids from the runtime's identity (LocalGrid sets it the same way)
    settings = small()
    active = ActiveParty(settings, build_vertical_split(settings.data).labels())
    good = RecordDict({"metrics": MetricRecord({"party-index": 0})})
    grid = FakeGrid([(11, good), (99, good), (11, good)])
    replies = _exchange(active, grid, {11: RecordDict(), 12: RecordDict()}, "train.step", "1.1", 5)
    assert list(replies) == [11]
    reasons = " | ".join(active.rejections)
    assert "node 99 (train.step): unexpected reply" in reasons
    assert "node 11 (train.step): unexpected reply" in reasons  # the second reply from node 11
    assert "node 12 (train.step): no reply within 5 s" in reasons
