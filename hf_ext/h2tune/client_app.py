"""H2Tune Flower ClientApp: thin; routes the message to [`~hf_ext.h2tune.task.H2TuneClient.run_round`].

The node's `partition-id` picks its client among the run config's clients (`client-models`, `client-ranks`,
`client-tasks`, `client-datasets`; the built-in three by default: see `clients.py`); the run config's `variant`
picks the compared method (H2Tune and its ablations send only G_c; HetLoRA and FLoRA send their LoRA factors;
local-only and the pooled ceiling send nothing).
The client's local state (A, B, T, S, M̃ and P_c) persists across rounds in the node's `context.state`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from .task import H2TuneClient, RunConfig

app = ClientApp()
STATE_KEY = "h2tune-client-state"


def _incoming(msg: Message) -> dict[str, np.ndarray]:
    """The server's arrays as numpy (`ValueError` for a non-ArrayRecord or undecodable bytes); the client then checks
    them against its own shapes before training ([`~hf_ext.h2tune.checks.check_global`])."""
    if "arrays" not in msg.content:
        return {}
    record = msg.content["arrays"]
    if not isinstance(record, ArrayRecord):
        raise ValueError(f"the server's 'arrays' record is a {type(record).__name__}, not an ArrayRecord")
    out = {}
    for key in record.keys():
        try:
            out[key] = record[key].numpy()
        except Exception as err:  # noqa: BLE001 (corrupt bytes: numpy raises several types)
            raise ValueError(f"the server's array {key!r} cannot be decoded ({type(err).__name__})") from err
    return out


@app.train()
def train(msg: Message, context: Context) -> Message:
    run = RunConfig.from_run_config(context.run_config)
    pid = int(context.node_config["partition-id"])
    if not 0 <= pid < len(run.clients):
        raise ValueError(f"node config partition-id={pid}, but the run config defines {len(run.clients)} clients")
    client = H2TuneClient(run.clients[pid], run, run.max_layers, index=pid)
    if STATE_KEY in context.state:
        client.load_state_arrays({k: v.numpy() for k, v in context.state[STATE_KEY].items()})
    incoming = _incoming(msg)
    outgoing = client.run_round(incoming)
    context.state[STATE_KEY] = ArrayRecord(
        {k: Array(np.ascontiguousarray(v)) for k, v in client.state_arrays().items()}
    )
    if pid == run.corrupt_partition and outgoing:  # tests: a faulty peer
        first = next(iter(outgoing))
        outgoing[first] = outgoing[first].copy()
        outgoing[first].reshape(-1)[0] = np.nan
    marker_dir = str(context.run_config.get("marker-dir", ""))
    if marker_dir:  # tests: lets a test see which node finished which round (e.g. to kill one afterwards)
        Path(marker_dir, f"round-{int(msg.content['config'].get('server-round', 0))}-partition-{pid}").touch()
    if run.save_dir and int(msg.content["config"].get("server-round", 0)) == run.rounds:
        client.save_artifact(run.save_dir)  # the final round's adapted model, as the in-process run saves it
    metrics = {"num-examples": len(client.train_pairs), "partition-id": pid, "accuracy": client.evaluate()}
    arrays = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in outgoing.items()})
    return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord(metrics)}), reply_to=msg)
