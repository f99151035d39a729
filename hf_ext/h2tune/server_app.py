"""H2Tune Flower ServerApp: thin; sends the common seeded G⁰, then the unweighted mean of the clients' G_c."""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from hf_ext.core.federated import save_result

from .aggregation import make_strategy
from .alignment import initial_global
from .model import MODULE_SLOTS
from .task import CLIENTS, GLOBAL_RANK, RunConfig, global_shape

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    run = RunConfig.from_run_config(context.run_config)
    min_nodes = int(context.run_config.get("min-nodes", len(CLIENTS)))
    max_layers = max(c.layers for c in CLIENTS)
    strategy = make_strategy(
        global_shape(max_layers), fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=min_nodes,
        min_available_nodes=min_nodes,
    )
    g0 = initial_global(max_layers, len(MODULE_SLOTS), GLOBAL_RANK, seed=run.seed).numpy()
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord({"g": Array(g0)}), num_rounds=run.rounds,
                            train_config=ConfigRecord(), timeout=float(context.run_config.get("timeout", 600)))
    rejected = sum(len(v) for v in strategy.rejected.values())
    accuracy = {f"round-{r}": float(m.get("accuracy", np.nan)) for r, m in result.train_metrics_clientapp.items()}
    summary = MetricRecord({"num-rejected": rejected, "rounds": len(result.train_metrics_clientapp), **accuracy})
    save_result(context, {"arrays": result.arrays, "summary": summary,
                          "rejected": ConfigRecord({f"{r}:{c}": why for r, v in strategy.rejected.items()
                                                    for c, why in v.items()})})
