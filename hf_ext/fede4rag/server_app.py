"""FedE4RAG Flower ServerApp: thin; runs [`~hf_ext.fede4rag.strategy.run_server`] (query every node's data size,
then [`~hf_ext.fede4rag.strategy.FedE4RAGStrategy`] for `rounds` rounds, and save the result). What the server
checks, what it cannot detect, and how the secret key stays with the clients are described in `strategy.py`."""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from .strategy import refuse_secrets, run_server, server_adapter  # noqa: F401 (the names earlier callers import)

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    run_server(grid, context)
