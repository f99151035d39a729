"""One federated FedE4RAG setting run through the Flower apps (`server_app.app` + `client_app.app`): on Flower's
simulation engine (Ray; what `hf-ext reproduce` and `hf-ext train` use) or on the in-process grid (`engine="local"`,
for tests). The run config selects the setting, the data and the rounds, exactly as `flwr run` would pass it.

With CKKS on, this process plays the key authority: it writes a fresh key pair, gives the ServerApp only the public
context's path (run config) and the clients the secret one (node config), and decrypts the final global adapter
with the secret context as any client would.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from .task import FEDERATED, RunConfig, with_setting

ENGINES = ("simulation", "local")


def _keys(folder: Path) -> tuple[dict, dict, object]:
    from .he import make_keys

    keys = make_keys()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "secret.ctx").write_bytes(keys.secret)
    (folder / "public.ctx").write_bytes(keys.public)
    return {"he-public-path": str(folder / "public.ctx")}, {"he-secret-path": str(folder / "secret.ctx")}, keys


def _round_stats(state) -> list[dict[str, float]]:
    rows: dict[int, dict[str, float]] = {}
    for key, value in dict(state.get("round-stats", {})).items():
        r, _, name = key.partition(":")
        rows.setdefault(int(r), {})[name] = float(value)
    return [rows[r] for r in sorted(rows)]


def run_federated(
    setting: str,
    run: RunConfig,
    *,
    engine: str = "simulation",
    extra_config: dict | None = None,
) -> dict:
    """Trains `setting` (one of [`~hf_ext.fede4rag.task.FEDERATED`]) on Flower and returns the final global adapter
    (decrypted), the server's per-round statistics (steps, HE costs), the sampled nodes and the rejections.

    Args:
        setting (`str`): the federated setting.
        run ([`RunConfig`]): the run (its `client_companies` decide how many nodes there are).
        engine (`str`, defaults to `"simulation"`): `"simulation"` (Flower's Ray engine) or `"local"` (in-process).
        extra_config (`dict`, *optional*): further run-config keys (`timeout`, `min-rounds`, ...).
    """
    from hf_ext.core.federated import run_local, run_simulation

    from .client_app import app as client_app
    from .server_app import app as server_app

    if setting not in FEDERATED:
        raise ValueError(f"{setting!r} is not a federated setting; choose from {FEDERATED}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose from {ENGINES}")
    run = with_setting(run, setting)
    n_nodes = len(run.companies)
    config = {**run.to_run_config(), "client-threads": 1, **(extra_config or {})}
    with tempfile.TemporaryDirectory(prefix="fede4rag_keys_") as tmp:
        node_config, keys = {}, None
        if run.encrypt:
            public, node_config, keys = _keys(Path(tmp))
            config.update(public)
        if engine == "simulation":
            state = run_simulation(
                server_app, client_app, num_supernodes=n_nodes, run_config=config, node_config=node_config
            )
        else:
            state = run_local(
                server_app,
                client_app,
                num_nodes=n_nodes,
                run_config=config,
                node_configs=[{"partition-id": i, **node_config} for i in range(n_nodes)],
            )
    arrays = state["arrays"]
    if keys is not None:
        from .encoder import adapter_arrays
        from .he import ClientCipher, flatten_state, unflatten_state
        from .strategy import record_to_chunks
        from .task import build_model, check_global_canary

        flat, layout = flatten_state(adapter_arrays(build_model(run)[0]))
        values, canaries = ClientCipher(keys.secret, keys.public).decrypt(
            record_to_chunks(arrays), flat.size, canary=True
        )
        check_global_canary(canaries, {"he-canary": state["global-canary"]})  # as a client would on receipt
        adapter = unflatten_state(values, layout)
    else:
        adapter = {k: arrays[k].numpy() for k in arrays.keys()}
    return {
        "adapter": {k: np.asarray(v, dtype=np.float32) for k, v in adapter.items()},
        "round_stats": _round_stats(state),
        "sampled": dict(state.get("sampled", {})),
        "rejected": dict(state.get("rejected", {})),
        "summary": dict(state["summary"]),
    }


__all__ = ["ENGINES", "run_federated"]
