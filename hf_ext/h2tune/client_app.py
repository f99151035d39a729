"""H2Tune Flower ClientApp: thin; routes the message to [`~hf_ext.h2tune.task.H2TuneClient`].

The node's `partition-id` picks its client (decoder family, depth, width, rank, task). The client's local state
(A, B, T, S, M̃ and P_c) persists across rounds in the node's `context.state`; only G_c is sent.
"""

from __future__ import annotations

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from .task import CLIENTS, H2TuneClient, RunConfig

app = ClientApp()
STATE_KEY = "h2tune-client-state"


@app.train()
def train(msg: Message, context: Context) -> Message:
    run = RunConfig.from_run_config(context.run_config)
    pid = int(context.node_config["partition-id"])
    client = H2TuneClient(CLIENTS[pid], run, max(c.layers for c in CLIENTS), index=pid)
    if STATE_KEY in context.state:
        client.load_state_arrays({k: v.numpy() for k, v in context.state[STATE_KEY].items()})
    g_c = client.fit(torch.from_numpy(msg.content["arrays"]["g"].numpy().copy()))
    context.state[STATE_KEY] = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in
                                            client.state_arrays().items()})
    g_c = g_c.numpy().astype(np.float32)
    if pid == run.corrupt_partition:
        g_c[0, 0, 0, 0] = np.nan
    marker_dir = str(context.run_config.get("marker-dir", ""))
    if marker_dir:  # tests: lets a test see which node finished which round (e.g. to kill one afterwards)
        from pathlib import Path

        Path(marker_dir, f"round-{int(msg.content['config'].get('server-round', 0))}-partition-{pid}").touch()
    metrics = {"num-examples": len(client.train_pairs), "partition-id": pid, "accuracy": client.evaluate()}
    return Message(RecordDict({"arrays": ArrayRecord({"g": Array(g_c)}), "metrics": MetricRecord(metrics)}),
                   reply_to=msg)
