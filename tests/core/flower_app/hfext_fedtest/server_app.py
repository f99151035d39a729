"""ServerApp of the toy app: FedAvg whose aggregation goes through `hf_ext.core.federated`."""

from __future__ import annotations

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from hf_ext.core.federated import aggregate_replies, save_result
from hfext_fedtest.task import FedTestConfig, initial_arrays

app = ServerApp()


class StrictFedAvg(FedAvg):
    """FedAvg that refuses malformed or failed replies instead of dropping them."""

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        arrays = aggregate_replies(replies, arrays_key=self.arrayrecord_key, weight_key=self.weighted_by_key)
        metrics = self.train_metrics_aggr_fn([r.content for r in replies], self.weighted_by_key)
        return arrays, metrics


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = FedTestConfig.from_run_config(context.run_config)
    # Wait for every node: on the deployment engine SuperNodes may still be registering when the run starts.
    strategy = StrictFedAvg(
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
    summary = MetricRecord({"num-nodes": len(list(grid.get_node_ids()))})
    save_result(context, {"arrays": result.arrays, "summary": summary})
