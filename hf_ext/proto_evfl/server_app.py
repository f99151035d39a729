"""The active party's Flower `ServerApp`: labels, top model and the bi-level schedule (`active_party.run_server`)."""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from .active_party import run_server
from .task import single_thread

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    with single_thread():
        run_server(grid, context)
