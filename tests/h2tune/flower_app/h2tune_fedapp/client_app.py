"""Test-only H2Tune ClientApp: the shipped one (`hf_ext.h2tune.task.client_train` + `guarded_reply`) plus the test
hooks that must never ship. It removes its own run-config keys before the shipped code parses the rest (the shipped
parser refuses unknown keys):

* `corrupt-partition` (int, -1: none): that partition sends a NaN in its first array (a faulty peer).
* `dishonest-partition` (int, -1: none) and `dishonest-mode`: that partition is dishonest: `"large"` sends
  finite values just under the server's absolute bound (9.9e5) instead of its G_c; `"replay"` answers every round
  after the first with its previous round's reply, byte for byte (old nonce included).
* `marker-dir` (str): touches `round-<r>-partition-<p>` after each round, and saves the G the node received
  (`received-<r>-<p>.npy`) and the one it sent (`sent-<r>-<p>.npy`), so a test can follow the rounds (or kill a node).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from hf_ext.core.federated import guarded_reply
from hf_ext.h2tune.task import client_train

app = ClientApp()
TEST_KEYS = {"corrupt-partition": -1, "dishonest-partition": -1, "dishonest-mode": "large", "marker-dir": ""}
REPLAYED = ("arrays", "metrics", "guard")


def split_test_keys(context: Context) -> tuple[dict, Context]:
    """(the test knobs, a context with only the shipped app's run-config keys; same node state)."""
    knobs = {k: context.run_config.get(k, default) for k, default in TEST_KEYS.items()}
    rest = {k: v for k, v in context.run_config.items() if k not in TEST_KEYS}
    shipped = Context(
        run_id=context.run_id,
        node_id=context.node_id,
        node_config=context.node_config,
        state=context.state,
        run_config=rest,
    )
    return knobs, shipped


@app.train()
def train(msg: Message, context: Context) -> Message:
    knobs, shipped = split_test_keys(context)
    pid = int(context.node_config["partition-id"])
    server_round = int(msg.content["config"].get("server-round", 0))
    marker_dir = str(knobs["marker-dir"])
    if marker_dir and "arrays" in msg.content and "g" in msg.content["arrays"]:
        np.save(Path(marker_dir, f"received-{server_round}-{pid}.npy"), msg.content["arrays"]["g"].numpy())
    records = client_train(msg, shipped)
    outgoing = records["arrays"]
    if pid == int(knobs["corrupt-partition"]) and len(outgoing):
        first = next(iter(outgoing.keys()))
        bad = outgoing[first].numpy().copy()
        bad.reshape(-1)[0] = np.nan
        outgoing[first] = Array(bad)
    dishonest = pid == int(knobs["dishonest-partition"])
    if dishonest and knobs["dishonest-mode"] == "large" and len(outgoing):
        records["arrays"] = ArrayRecord({k: Array(np.full_like(v.numpy(), 9.9e5)) for k, v in outgoing.items()})
    reply = guarded_reply(msg, records)
    if dishonest and knobs["dishonest-mode"] == "replay":
        old = {k: context.state[f"replay-{k}"] for k in REPLAYED if f"replay-{k}" in context.state}
        for k in REPLAYED:
            context.state[f"replay-{k}"] = reply.content[k]  # what it sent this round ...
        if len(old) == len(REPLAYED):  # ... and it answers with the round before's, byte for byte
            reply = Message(RecordDict(old), reply_to=msg)
    if marker_dir:
        if "arrays" in reply.content and "g" in reply.content["arrays"]:
            np.save(Path(marker_dir, f"sent-{server_round}-{pid}.npy"), reply.content["arrays"]["g"].numpy())
        Path(marker_dir, f"round-{server_round}-partition-{pid}").touch()
    return reply
