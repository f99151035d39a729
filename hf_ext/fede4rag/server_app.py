"""FedE4RAG Flower ServerApp: thin; asks every node its data size, then runs [`make_strategy`] for `rounds` rounds.

The server trusts the transport, not the payload. It builds the seeded round-0 adapter itself (the same seed every
client uses), so its own copy is the reference every plaintext reply is checked against and its own parameter count
fixes the ciphertext layout; a node whose query reply reports another `num-params` (another model) is left out of
every round, alone, with a logged reason.

Key separation by construction: with `encrypt` on, the server reads only the *public* CKKS context
(`he-public-path`): it adds ciphertexts and scales by 1/K but cannot decrypt; the final global adapter it stores is
ciphertext. The secret context lives only in the client processes, named by their *node* config
(`he-secret-path`), which the server never receives; a run config that names a secret (any key with "secret" in it)
is refused before anything runs, and so is a public context that holds a secret key. A run that aggregated fewer
rounds than `min-rounds` (default: all) fails after saving its result.
"""

from __future__ import annotations

import logging
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp

from hf_ext.core.federated import reply_metric, require_rounds, save_result

from .strategy import make_strategy
from .task import RunConfig

app = ServerApp()
logger = logging.getLogger(__name__)


def refuse_secrets(run_config) -> None:
    """`ValueError` when the run config (which the server receives) names a secret: it belongs in the clients' node
    configs only."""
    named = sorted(k for k in run_config if "secret" in str(k).lower())
    if named:
        raise ValueError(
            f"the run config names {named}: the ServerApp receives the run config, so secret keys "
            "must only appear in the SuperNodes' node config (e.g. `--node-config "
            "he-secret-path=...`)"
        )


def server_adapter(run: RunConfig) -> dict:
    """The server's own copy of the seeded round-0 adapter (name → float32 array), built like every client's."""
    from .encoder import adapter_arrays
    from .task import build_model

    return adapter_arrays(build_model(run)[0])


def node_sizes(grid: Grid, n_params: int) -> tuple[dict[int, int], dict[str, str]]:
    """Data size of each node whose query reply is well formed and reports the server's adapter size; the others
    are returned as node → reason (they are never sampled)."""
    nodes = sorted(grid.get_node_ids())
    messages = [Message(RecordDict({}), dst_node_id=n, message_type=MessageType.QUERY) for n in nodes]
    sizes, refused = {}, {}
    for reply in grid.send_and_receive(messages):
        node = reply.metadata.src_node_id
        try:
            if node in sizes or f"node {node}" in refused:
                raise ValueError(f"node {node} sent more than one query reply")
            size = int(reply_metric(reply, "num-examples", integer=True))
            theirs = int(reply_metric(reply, "num-params", integer=True))
            if theirs != n_params:
                raise ValueError(
                    f"node {node} reports an adapter of {theirs} parameters, the server's has "
                    f"{n_params}: not the same model"
                )
        except ValueError as err:
            logger.warning("fede4rag: left out %s", err)
            refused[f"node {node}"] = str(err)
            sizes.pop(node, None)
            continue
        sizes[node] = size
    return sizes, refused


@app.main()
def main(grid: Grid, context: Context) -> None:
    refuse_secrets(context.run_config)
    run = RunConfig.from_run_config(context.run_config)
    reference = server_adapter(run)
    n_params = int(sum(v.size for v in reference.values()))
    sizes, refused = node_sizes(grid, n_params)
    if not sizes:
        raise RuntimeError(f"no node answered the query with this model's adapter: {refused}")
    public = Path(str(context.run_config["he-public-path"])).read_bytes() if run.encrypt else None
    # encrypted: the strategy derives the ciphertext count from the server's n_params and the public context's slots
    strategy = make_strategy(
        encrypt=run.encrypt,
        public_context=public,
        n_values=n_params if run.encrypt else None,
        one_client=run.one_client,
        node_sizes=sizes,
        seed=run.seed,
        min_available_nodes=1,
        min_train_nodes=1,
        reference=None if run.encrypt else reference,
        allowed_nodes=sorted(sizes),
    )
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(),
        num_rounds=run.rounds,
        train_config=ConfigRecord(),
        timeout=float(context.run_config.get("timeout", 3600)),
    )
    rejected = {f"{r}:{who}": why for r, v in strategy.rejected.items() for who, why in v.items()}
    rejected.update({f"0:{who}": why for who, why in refused.items()})  # round 0: the query
    sampled = {f"round-{r}": ",".join(map(str, nodes)) for r, nodes in strategy.sampled.items()}
    summary = {"num-rejected": len(rejected), "rounds": len(strategy.aggregated), "num-params": n_params}
    stats = {f"{r}:{k}": v for r, row in strategy.round_stats.items() for k, v in row.items()}
    save_result(
        context,
        {
            "arrays": result.arrays,
            "summary": MetricRecord(summary),
            "rejected": ConfigRecord(rejected),
            "sampled": ConfigRecord(sampled),
            "round-stats": MetricRecord(stats),
        },
    )
    require_rounds(len(strategy.aggregated), int(context.run_config.get("min-rounds", run.rounds)), run.rounds)
