"""H2Tune Flower ClientApp: thin; routes the instruction to [`~hf_ext.h2tune.task.client_train`] and answers with a
reply that echoes the server's round nonce ([`~hf_ext.core.federated.guarded_reply`]).

The node's `partition-id` picks its client among the run config's clients; the run config's `variant` picks the
compared method (H2Tune and its ablations send only G_c; HetLoRA and FLoRA their LoRA factors; local-only and the
pooled ceiling nothing). Test-only behaviour (faulty or misbehaving peers, round markers) lives in the tests' own app
(`tests/h2tune/flower_app`), never here.
"""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from hf_ext.core.federated import guarded_reply

from .task import STATE_KEY, client_train

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    return guarded_reply(msg, client_train(msg, context))


__all__ = ["STATE_KEY", "app", "train"]
