"""The server-side reply checks of hf_ext.core.federated.guard: every reply judged against the server's own reference,
senders named by the transport's node id, and a run with too few aggregated rounds fails."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from hf_ext.core.federated import TooFewRounds, reply_arrays, reply_metric, require_rounds
from hf_ext.core.federated.local import _set_task_identity


def reply(node: int, content: RecordDict) -> Message:
    """A reply as the SuperLink delivers it: its src node id is the node the instruction went to."""
    _set_task_identity(1)
    ins = Message(RecordDict({}), dst_node_id=node, message_type="train")
    return Message(content, reply_to=ins)


REF = {"w": ((2, 3), np.float32)}


def _arrays(**arrays):
    return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in arrays.items()})


def test_reply_arrays_accepts_the_reference_and_names_the_node():
    good = np.ones((2, 3), np.float32)
    out = reply_arrays(reply(7, RecordDict({"arrays": _arrays(w=good)})), REF)
    np.testing.assert_array_equal(out["w"], good)
    with pytest.raises(ValueError, match="node 7"):
        reply_arrays(reply(7, RecordDict({"arrays": _arrays(w=good[:1])})), REF)


@pytest.mark.parametrize(
    "arrays,match",
    [
        ({"w": np.ones((3, 2), np.float32)}, "shape"),
        ({"w": np.ones((2, 3), np.float64)}, "dtype"),
        ({"w": np.full((2, 3), np.nan, np.float32)}, "NaN"),
        ({"w": np.full((2, 3), 1e30, np.float32)}, "bound"),
        ({"w": np.ones((2, 3), np.float32), "x": np.ones(1, np.float32)}, "unexpected"),
        ({}, "missing"),
    ],
)
def test_reply_arrays_rejects_against_the_server_reference(arrays, match):
    with pytest.raises(ValueError, match=match):
        reply_arrays(reply(3, RecordDict({"arrays": _arrays(**arrays)})), REF)


def test_corrupt_bytes_and_config_record_are_value_errors():
    bad = Array(dtype="float32", shape=(2, 3), stype="numpy.ndarray", data=b"\x00garbage")
    with pytest.raises(ValueError, match="cannot be decoded|contradicts"):
        reply_arrays(reply(3, RecordDict({"arrays": ArrayRecord({"w": bad})})), REF)
    with pytest.raises(ValueError, match="ConfigRecord, not an ArrayRecord"):
        reply_arrays(reply(3, RecordDict({"arrays": ConfigRecord({"w": "x"})})), REF)
    with pytest.raises(ValueError, match="no 'arrays'"):
        reply_arrays(reply(3, RecordDict({})), REF)


@pytest.mark.parametrize("value,match", [(float("nan"), "finite"), (-1, r"\[0"), (2.5, "integer")])
def test_reply_metric_refuses_nan_negative_and_fractional_counts(value, match):
    msg = reply(4, RecordDict({"metrics": MetricRecord({"num-examples": value})}))
    with pytest.raises(ValueError, match=match):
        reply_metric(msg, "num-examples", integer=True)
    assert reply_metric(reply(4, RecordDict({"metrics": MetricRecord({"num-examples": 5})})), "num-examples") == 5


def test_require_rounds():
    require_rounds(2, 2, 2)
    with pytest.raises(TooFewRounds, match="0 of 3 rounds"):
        require_rounds(0, 0, 3)  # a minimum of 0 still needs one aggregated round
    with pytest.raises(TooFewRounds, match="1 of 3"):
        require_rounds(1, 2, 3)


def test_simulation_passes_client_only_node_config():
    """`run_simulation(node_config=...)` reaches the ClientApps' node config, not the run config the server gets."""
    from flwr.app import Context
    from flwr.clientapp import ClientApp

    from hf_ext.core.federated.simulation import _with_run_config

    seen = {}
    app = ClientApp()

    @app.query()
    def _query(msg, context):
        seen.update(node=dict(context.node_config), run=dict(context.run_config))
        return Message(RecordDict({}), reply_to=msg)

    wrapped = _with_run_config(app, {"rounds": 1}, {"he-secret-path": "/keys/secret.ctx"})
    _set_task_identity(1)
    msg = Message(RecordDict({}), dst_node_id=5, message_type="query")
    msg.metadata.__dict__["_message_id"] = "m1"
    ctx = Context(run_id=1, node_id=5, node_config={"partition-id": 0}, state=RecordDict(), run_config={})
    wrapped(msg, ctx)
    assert seen["node"] == {"partition-id": 0, "he-secret-path": "/keys/secret.ctx"}
    assert seen["run"] == {"rounds": 1}
