"""FedE4RAG Flower ClientApp: thin; routes each message to its handler in [`hf_ext.fede4rag.task`] (`query`: data
and adapter size; `train`: one round from the received global adapter; `query.canary`: decrypt the other senders'
masked canaries for the server's key check). Key separation, the nonce and the checks on the received global adapter
are described there."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from .task import handle_canary, handle_query, handle_train, node_company

app = ClientApp()


@app.query()
def query(msg: Message, context: Context) -> Message:
    return handle_query(msg, context)


@app.query("canary")
def canary(msg: Message, context: Context) -> Message:
    return handle_canary(msg, context)


@app.train()
def train(msg: Message, context: Context) -> Message:
    return handle_train(msg, context)


_company = node_company  # the name tests/fede4rag/test_loco.py imports
