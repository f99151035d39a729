"""ServerApp of the toy app: the core's `GuardedStrategy` with its default hooks (FedAvg weighted by
`num-examples`); a run in which any reply was rejected or failed raises, naming each, so tests see why."""

from __future__ import annotations

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from hf_ext.core.federated import GuardedStrategy, save_result
from hfext_fedtest.task import FedTestConfig, initial_arrays

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = FedTestConfig.from_run_config(context.run_config)
    # Wait for every node: on the deployment engine SuperNodes may still be registering when the run starts.
    strategy = GuardedStrategy(
        fraction_train=1.0,
        fraction_evaluate=0.0,
        min_train_nodes=config.min_nodes,
        min_available_nodes=config.min_nodes,
    )
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord({k: Array(v) for k, v in initial_arrays().items()}),
        num_rounds=config.num_rounds,
        train_config=ConfigRecord(),
        timeout=120,
    )
    summary = MetricRecord({"num-nodes": len(list(grid.get_node_ids())), "rounds": len(strategy.aggregated)})
    save_result(context, {"arrays": result.arrays, "summary": summary, **strategy.result_records()})
    problems = [
        f"round {r}: node {n}: {why}"
        for r, rec in sorted(strategy.records.items())
        for n, why in {**rec.rejected, **rec.failed}.items()
    ]
    if problems:
        raise ValueError("; ".join(problems))
