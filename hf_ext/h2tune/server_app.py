"""H2Tune Flower ServerApp: thin; sends the common seeded G⁰ (H2Tune variants) or nothing (baselines), then each
round what [`~hf_ext.h2tune.aggregation.server_update`] makes of the clients' replies.

Every reply is checked against the server's own G (see [`~hf_ext.h2tune.aggregation`]); a run that aggregated fewer
rounds than `min-rounds` (default: all of them) fails with [`~hf_ext.core.federated.TooFewRounds`] after saving
its result, so `flwr run` reports an error instead of exiting 0 with the initial model."""

from __future__ import annotations

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from hf_ext.core.federated import require_rounds, save_result

from .aggregation import make_strategy
from .alignment import initial_global
from .clients import base_group
from .model import MODULE_SLOTS
from .task import GLOBAL_RANK, RunConfig, global_shape

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    run = RunConfig.from_run_config(context.run_config)
    clients = run.clients  # the run config's client list (the built-in three by default): same on every node
    min_nodes = int(context.run_config.get("min-nodes", len(clients)))
    min_rounds = int(context.run_config.get("min-rounds", run.rounds))
    max_layers = run.max_layers
    # LoRA factors are (r × d_in) / (d_out × r): no client's exceeds 4 × its width (GPT-2's MLP; SmolLM2's MLP is
    # 2.67×) or its rank
    max_dim = max(max(4 * c.hidden, c.rank) for c in clients)
    strategy = make_strategy(
        global_shape(max_layers),
        mode=run.mode,
        num_partitions=len(clients),
        base_groups={i: base_group(clients, i) for i in range(len(clients))},
        hetlora_bounds={"max_layers": max_layers, "num_slots": len(MODULE_SLOTS), "max_dim": max_dim},
        fraction_train=1.0,
        fraction_evaluate=0.0,
        min_train_nodes=min_nodes,
        min_available_nodes=min_nodes,
    )
    initial = ArrayRecord()
    if run.mode == "h2tune":
        initial = ArrayRecord(
            {"g": Array(initial_global(max_layers, len(MODULE_SLOTS), GLOBAL_RANK, seed=run.seed).numpy())}
        )
    result = strategy.start(
        grid=grid,
        initial_arrays=initial,
        num_rounds=run.rounds,
        train_config=ConfigRecord(),
        timeout=float(context.run_config.get("timeout", 600)),
    )
    rejected = sum(len(v) for v in strategy.rejected.values())
    summary = MetricRecord(
        {
            "num-rejected": rejected,
            "rounds": len(strategy.aggregated),
            **{f"round-{r}": float(m.get("accuracy", float("nan"))) for r, m in result.train_metrics_clientapp.items()},
        }
    )
    save_result(
        context,
        {
            "arrays": result.arrays,
            "summary": summary,
            # per round and node id (the transport's, not a claimed partition): why its reply was refused
            "rejected": ConfigRecord({f"{r}:{c}": why for r, v in strategy.rejected.items() for c, why in v.items()}),
            # per round and partition: the accuracy each client measured after its local training
            "client-accuracy": MetricRecord(
                {f"{r}:{c}": a for r, v in strategy.client_accuracy.items() for c, a in v.items()}
            ),
            "bytes-received": MetricRecord({str(r): b for r, b in strategy.bytes_received.items()}),
            "partitions": MetricRecord({str(node): pid for node, pid in strategy.partitions.items()}),
        },
    )
    require_rounds(len(strategy.aggregated), min_rounds, run.rounds)
