"""Flower's simulation engine (Ray): [`run_simulation`] (part of [`hf_ext.core.federated`]; "the module docstring"
below is that package's docstring).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from hf_ext.core.federated.results import Record

# --- Simulation engine (Ray) ------------------------------------------------------------------------------------------


def _with_run_config(
    client_app: ClientApp, run_config: Mapping[str, Any], node_config: Mapping[str, Any] | None = None
) -> ClientApp:
    """A `ClientApp` that passes the wrapped app a node context with `run_config` (and `node_config`) added.

    `flwr.simulation.run_simulation` gives nodes an empty run config; this is how [`run_simulation`] passes one, and
    how it passes client-only settings (e.g. a secret key's path) that the ServerApp never sees.
    The class is made here, not at module level, so Ray's cloudpickle ships it by value: a worker then does not
    import `hf_ext` (which pulls in torch and transformers, several seconds per worker).
    """
    extra, extra_node = dict(run_config), dict(node_config or {})

    class WithRunConfig(ClientApp):
        def __call__(self, message: Message, context: Context) -> Message:
            # The simulation engine refuses a node context whose run config changed, so the app gets a view that
            # shares everything else (its `state` object included, so state updates persist).
            view = Context(
                run_id=context.run_id,
                node_id=context.node_id,
                node_config={**context.node_config, **extra_node},
                state=context.state,
                run_config={**context.run_config, **extra},
                series_id=context.series_id,
            )
            return client_app(message, view)

    return WithRunConfig()


def _disable_flwr_telemetry() -> None:
    os.environ["FLWR_TELEMETRY_ENABLED"] = "0"  # Ray workers and any later import read the environment
    # Flower reads the variable once, when `flwr.supercore.telemetry` is first imported (already done by
    # `import flwr.app`), so a process that did not set it beforehand still has telemetry on: switch it off here.
    from flwr.supercore import telemetry

    telemetry.FLWR_TELEMETRY_ENABLED = "0"


def run_simulation(
    server_app: ServerApp,
    client_app: ClientApp,
    *,
    num_supernodes: int,
    run_config: Mapping[str, Any] | None = None,
    backend_config: Mapping[str, Any] | None = None,
    verbose_logging: bool = False,
    node_config: Mapping[str, Any] | None = None,
) -> dict[str, Record]:
    """Run a `ServerApp` with its `ClientApp`s on Flower's simulation engine (Ray) and return its result.

    Wraps `flwr.simulation.run_simulation` (deprecated in Flower 1.42 in favour of `flwr run`, but the only
    in-process entry point). The ServerApp runs in a thread of this process, so its `context.state` is read
    directly at the end (see the module docstring). A ServerApp exception propagates; a ClientApp exception reaches
    the ServerApp as an error reply (a [`GuardedStrategy`] records it as failed). Telemetry is switched off for
    the whole process.

    Args:
        server_app (`ServerApp`): the server app.
        client_app (`ClientApp`): the client app; Ray pickles it, so define it in a module the workers can
            import (Flower passes this process's `sys.path` to them).
        num_supernodes (`int`): number of virtual SuperNodes (node configs `partition-id`, `num-partitions`).
        run_config (`Mapping`, *optional*): the run config of the server and of every node (Flower's Python API
            takes none; it is injected into the contexts).
        backend_config (`Mapping`, *optional*): Ray backend config; defaults to one CPU and no GPU per client.
        verbose_logging (`bool`, defaults to `False`): Flower DEBUG logs.
        node_config (`Mapping`, *optional*): extra node config of every node (client-only: the ServerApp never
            receives it, unlike `run_config`); e.g. the path of a secret key.

    Returns:
        `dict[str, ArrayRecord | MetricRecord | ConfigRecord]`: the ServerApp's `context.state` at the end.
    """
    _disable_flwr_telemetry()
    # Ray's workers inherit this process's environment: no per-actor progress bars or advisory warnings from
    # transformers / datasets flooding the driver's log (a variable the caller already set wins).
    for key, value in (
        ("TRANSFORMERS_VERBOSITY", "error"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("HF_DATASETS_DISABLE_PROGRESS_BARS", "1"),
    ):
        os.environ.setdefault(key, value)
    from flwr.simulation import run_simulation as flwr_run_simulation

    run_config = dict(run_config or {})
    finished: dict[str, Context] = {}
    wrapper = ServerApp()

    @wrapper.main()
    def _main(grid: Grid, context: Context) -> None:
        context.run_config.update(run_config)
        finished["context"] = context
        server_app(grid, context)

    if backend_config is None:
        backend_config = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}}
    flwr_run_simulation(
        server_app=wrapper,
        client_app=(_with_run_config(client_app, run_config, node_config) if run_config or node_config else client_app),
        num_supernodes=num_supernodes,
        backend_config=copy.deepcopy(dict(backend_config)),
        verbose_logging=verbose_logging,
    )
    if "context" not in finished:
        raise RuntimeError("the simulation ended without running the ServerApp")
    return dict(finished["context"].state)
