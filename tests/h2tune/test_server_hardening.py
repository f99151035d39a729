"""H2Tune's server trusts the transport, not the payload: updates keyed by node id (a spoofed `partition-id` cannot
replace another client's update), malformed replies rejected alone with a reason, never a ServerApp crash, and a
run that aggregates too few rounds fails. Fake ClientApps (no training) keep these tests fast."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from hf_ext.core.federated import TooFewRounds, guarded_reply, run_local
from hf_ext.core.federated.local import _set_task_identity
from hf_ext.h2tune.strategy import H2TuneStrategy
from hf_ext.h2tune.task import global_shape

SHAPE = global_shape(4)


def _reply(node: int, content: RecordDict) -> Message:
    _set_task_identity(1)
    return Message(content, reply_to=Message(RecordDict({}), dst_node_id=node, message_type="train"))


def _good(node: int, pid: int, value: float = 1.0, n: int = 8, **metrics) -> Message:
    arrays = ArrayRecord({"g": Array(np.full(SHAPE, value, np.float32))})
    return _reply(
        node,
        RecordDict(
            {
                "arrays": arrays,
                "metrics": MetricRecord({"num-examples": n, "partition-id": pid, "accuracy": 0.5, **metrics}),
            }
        ),
    )


def _strategy():
    # replies built by hand carry no round nonce; replay protection is tested with nonces in test_federated.py
    return H2TuneStrategy(SHAPE, num_partitions=3, replay_protection=False, fraction_train=1.0, fraction_evaluate=0.0)


def test_a_spoofed_partition_id_cannot_replace_another_clients_update():
    strategy = _strategy()
    arrays, _ = strategy.aggregate_train(1, [_good(101, 0, 1.0), _good(102, 1, 3.0)])
    np.testing.assert_allclose(arrays["g"].numpy(), 2.0)
    # round 2: node 103 claims partition 0 (node 101's) with a poisoned update; 101 and 102 are honest
    arrays, metrics = strategy.aggregate_train(2, [_good(101, 0, 1.0), _good(102, 1, 3.0), _good(103, 0, 1e5)])
    np.testing.assert_allclose(arrays["g"].numpy(), 2.0)  # the spoofer's update is not in the mean
    assert set(strategy.rejected[2]) == {"103"} and "which node 101 holds" in strategy.rejected[2]["103"]
    assert metrics["num-accepted"] == 2 and metrics["num-rejected"] == 1
    # a node cannot change its own claim either
    strategy.aggregate_train(3, [_good(101, 2, 1.0), _good(102, 1, 3.0)])
    assert "earlier claimed 0" in strategy.rejected[3]["101"]


def test_updates_are_keyed_by_node_even_with_the_same_claimed_payload():
    """Two nodes, both honest, same values: each counts once, and a duplicate reply from one node is refused."""
    strategy = _strategy()
    arrays, _ = strategy.aggregate_train(1, [_good(101, 0, 1.0), _good(101, 0, 9.0), _good(102, 1, 3.0)])
    assert "more than one reply" in strategy.rejected[1]["101"]
    np.testing.assert_allclose(arrays["g"].numpy(), 3.0)


def _corrupt_bytes(node):
    bad = Array(dtype="float32", shape=SHAPE, stype="numpy.ndarray", data=b"\x93NUMPY garbage")
    return _reply(
        node,
        RecordDict(
            {"arrays": ArrayRecord({"g": bad}), "metrics": MetricRecord({"num-examples": 8, "partition-id": 2})}
        ),
    )


MALFORMED = {
    "corrupt array bytes": (_corrupt_bytes, "cannot be decoded|contradicts"),
    "config record as arrays": (
        lambda n: _reply(
            n,
            RecordDict(
                {"arrays": ConfigRecord({"g": "x"}), "metrics": MetricRecord({"num-examples": 8, "partition-id": 2})}
            ),
        ),
        "not an ArrayRecord",
    ),
    "no arrays": (
        lambda n: _reply(n, RecordDict({"metrics": MetricRecord({"num-examples": 8, "partition-id": 2})})),
        "no 'arrays'",
    ),
    "no metrics": (lambda n: _reply(n, RecordDict({"arrays": ArrayRecord()})), "no MetricRecord"),
    "huge values": (lambda n: _good(n, 2, 1e30), "bound"),
    "NaN values": (lambda n: _good(n, 2, float("nan")), "NaN"),
    "NaN num-examples": (lambda n: _good(n, 2, n=float("nan")), "num-examples.*finite"),
    "negative num-examples": (lambda n: _good(n, 2, n=-3), "num-examples"),
    "partition out of range": (lambda n: _good(n, 7), "partition-id"),
    "accuracy out of range": (lambda n: _good(n, 2, accuracy=7.0), "accuracy"),
    "extra key": (
        lambda n: _reply(
            n,
            RecordDict(
                {
                    "arrays": ArrayRecord({"g": Array(np.ones(SHAPE, np.float32)), "h": Array(np.ones(2, np.float32))}),
                    "metrics": MetricRecord({"num-examples": 8, "partition-id": 2}),
                }
            ),
        ),
        "unexpected",
    ),
    "wrong shape": (
        lambda n: _reply(
            n,
            RecordDict(
                {
                    "arrays": ArrayRecord({"g": Array(np.ones((2, 7, 16, 16), np.float32))}),
                    "metrics": MetricRecord({"num-examples": 8, "partition-id": 2}),
                }
            ),
        ),
        "shape",
    ),
    "float64": (
        lambda n: _reply(
            n,
            RecordDict(
                {
                    "arrays": ArrayRecord({"g": Array(np.ones(SHAPE))}),
                    "metrics": MetricRecord({"num-examples": 8, "partition-id": 2}),
                }
            ),
        ),
        "dtype",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_reply_is_rejected_alone_with_a_reason(case, caplog):
    make, match = MALFORMED[case]
    strategy = _strategy()
    arrays, metrics = strategy.aggregate_train(1, [_good(101, 0, 1.0), _good(102, 1, 3.0), make(103)])
    np.testing.assert_allclose(arrays["g"].numpy(), 2.0)
    assert set(strategy.rejected[1]) == {"103"}
    assert pytest.importorskip("re").search(match, strategy.rejected[1]["103"]), strategy.rejected[1]["103"]
    assert "node 103" in caplog.text and np.isfinite(metrics["accuracy"])


def test_zero_num_examples_everywhere_does_not_divide_by_zero():
    arrays, metrics = _strategy().aggregate_train(1, [_good(101, 0, n=0), _good(102, 1, n=0)])
    assert metrics["accuracy"] == 0.5 and np.isfinite(arrays["g"].numpy()).all()


# ---- the ServerApp with fake ClientApps -------------------------------------------------------------------------

BEHAVIOUR: dict[int, str] = {}
fake = ClientApp()


@fake.train()
def _train(msg: Message, context) -> Message:
    pid = int(context.node_config["partition-id"])
    kind = BEHAVIOUR.get(pid, "good")
    g = msg.content["arrays"]["g"].numpy()
    if kind == "good":
        return guarded_reply(
            msg,
            {
                "arrays": ArrayRecord({"g": Array(g + 1.0)}),
                "metrics": MetricRecord({"num-examples": 4, "partition-id": pid, "accuracy": 0.25}),
            },
        )
    if kind == "crash":
        raise RuntimeError("client crashed")
    make, _ = MALFORMED[kind]
    bad = make(0)
    return guarded_reply(msg, {k: bad.content[k] for k in bad.content.keys()})


def _run(rounds=2, **config):
    from hf_ext.h2tune.server_app import app as server_app

    return run_local(
        server_app,
        fake,
        num_nodes=3,
        client_errors="reply",
        run_config={"num-server-rounds": rounds, "min-nodes": 3, **config},
    )


def test_server_app_survives_every_malformed_reply_and_keys_rejections_by_node():
    BEHAVIOUR.clear()
    BEHAVIOUR.update({1: "corrupt array bytes", 2: "config record as arrays"})
    state = _run()
    assert state["summary"]["rounds"] == 2 and state["summary"]["num-rejected"] == 4
    assert set(dict(state["rejected"])) == {"1:102", "1:103", "2:102", "2:103"}
    g0 = __import__("hf_ext.h2tune.alignment", fromlist=["x"]).initial_global(4, 7, 16, seed=0).numpy()
    np.testing.assert_allclose(state["arrays"]["g"].numpy(), g0 + 2.0, rtol=1e-6)  # only node 101's updates


def test_a_run_that_aggregates_no_round_fails():
    BEHAVIOUR.clear()
    BEHAVIOUR.update({0: "crash", 1: "NaN values", 2: "huge values"})
    with pytest.raises(TooFewRounds, match="aggregated 0 of 2 rounds"):
        _run()


def test_a_run_below_the_configured_minimum_fails_and_min_rounds_relaxes_it():
    BEHAVIOUR.clear()
    BEHAVIOUR.update({0: "crash", 1: "crash", 2: "crash"})
    with pytest.raises(TooFewRounds):
        _run(rounds=1, **{"min-rounds": 1})
    BEHAVIOUR.clear()
    state = _run(rounds=1, **{"min-rounds": 1})
    assert state["summary"]["rounds"] == 1
