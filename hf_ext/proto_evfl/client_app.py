"""The parties' Flower `ClientApp`: routes the active party's messages to `party.py` (see `active_party.py` for
the protocol). Every feature block, the active party's own included, runs this app on its own SuperNode."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from .party import handle_evaluate, handle_local, handle_step
from .task import single_thread

app = ClientApp()


@app.train("local")
def local(message: Message, context: Context) -> Message:
    """Lower level on the party's unaligned data; replies with local prototypes and prior."""
    with single_thread():
        return handle_local(message, context)


@app.train("step")
def step(message: Message, context: Context) -> Message:
    """Upper level: gradients of the previous aligned batch in, embeddings of the next one out."""
    with single_thread():
        return handle_step(message, context)


@app.evaluate()
def evaluate(message: Message, context: Context) -> Message:
    """Embeddings of the aligned test entities."""
    with single_thread():
        return handle_evaluate(message, context)
