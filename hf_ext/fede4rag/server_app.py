"""FedE4RAG Flower ServerApp: thin; asks every node its data size, then runs [`make_strategy`] for `rounds` rounds.

With `encrypt` on, the server reads only the *public* CKKS context (`he-public-path`): it adds ciphertexts and
scales by 1/K but cannot decrypt; the final global adapter it stores is ciphertext.
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp

from hf_ext.core.federated import check_reply, save_result

from .strategy import make_strategy
from .task import RunConfig

app = ServerApp()


def _node_sizes(grid: Grid) -> tuple[dict[int, int], int]:
    nodes = sorted(grid.get_node_ids())
    messages = [Message(RecordDict({}), dst_node_id=n, message_type=MessageType.QUERY) for n in nodes]
    sizes, n_params = {}, set()
    for reply in grid.send_and_receive(messages):
        check_reply(reply, arrays_key=None, require=("num-examples", "num-params"))
        sizes[reply.metadata.src_node_id] = int(reply.content["metrics"]["num-examples"])
        n_params.add(int(reply.content["metrics"]["num-params"]))
    if len(n_params) != 1:
        raise ValueError(f"clients report different adapter sizes {sorted(n_params)}: not the same model")
    return sizes, n_params.pop()


@app.main()
def main(grid: Grid, context: Context) -> None:
    run = RunConfig.from_run_config(context.run_config)
    sizes, n_params = _node_sizes(grid)
    public = Path(str(context.run_config["he-public-path"])).read_bytes() if run.encrypt else None
    # encrypted: the strategy derives the ciphertext count from n_values and the public context's slot count
    strategy = make_strategy(encrypt=run.encrypt, public_context=public, n_values=n_params if run.encrypt else None,
                             one_client=run.one_client, node_sizes=sizes, seed=run.seed, min_available_nodes=1,
                             min_train_nodes=1)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=run.rounds,
                            train_config=ConfigRecord(), timeout=float(context.run_config.get("timeout", 3600)))
    rejected = {f"{r}:{who}": why for r, v in strategy.rejected.items() for who, why in v.items()}
    sampled = {f"round-{r}": ",".join(map(str, nodes)) for r, nodes in strategy.sampled.items()}
    summary = {"num-rejected": len(rejected), "rounds": run.rounds, "num-params": n_params}
    save_result(context, {"arrays": result.arrays, "summary": MetricRecord(summary),
                          "rejected": ConfigRecord(rejected), "sampled": ConfigRecord(sampled)})
