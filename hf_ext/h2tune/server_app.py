"""H2Tune Flower ServerApp: thin; runs [`~hf_ext.h2tune.task.server_main`] (the common seeded G⁰, then each round
what [`~hf_ext.h2tune.strategy.H2TuneStrategy`] makes of the replies; a run that aggregated fewer rounds than
`min-rounds` fails with [`~hf_ext.core.federated.TooFewRounds`] after saving its result)."""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from .task import server_main

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    server_main(grid, context)
