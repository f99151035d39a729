"""The FedE4RAG federation on Flower's deployment engine: a SuperLink and two SuperNodes (PepsiCo, P&G) on 127.0.0.1
run the shipped ServerApp and ClientApp (`examples/fede4rag_app`) and reach exactly the in-process result. The same
apps with the same run config run in-process (`run_local`) in the fast test below, which checks the behaviour the slow
one repeats over gRPC: two aggregated rounds from two nodes, no rejection, the adapter trained."""

import os

# Before anything imports flwr: Flower reads FLWR_TELEMETRY_ENABLED once, at import.
os.environ.update({"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"})

import tomllib  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from hf_ext.fede4rag.task import RunConfig  # noqa: E402

APP_DIR = Path(__file__).parents[2] / "examples" / "fede4rag_app"


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    from hf_ext.fede4rag.testing import tiny_federation

    run, _ = tiny_federation(tmp_path_factory.mktemp("deploy"), rounds=2)
    return {**run.to_run_config(), "client-companies": "0,1", "kd-lambda": 100.0, "timeout": 300.0, "min-rounds": 2}


def _in_process(config):
    from hf_ext.core.federated import run_local
    from hf_ext.fede4rag.client_app import app as client_app
    from hf_ext.fede4rag.server_app import app as server_app

    return run_local(
        server_app, client_app, num_nodes=2, run_config=config, node_configs=[{"partition-id": i} for i in range(2)]
    )


def test_the_app_declares_every_run_config_key_with_its_default():
    app = tomllib.loads((APP_DIR / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert app["components"] == {
        "serverapp": "hf_ext.fede4rag.server_app:app",
        "clientapp": "hf_ext.fede4rag.client_app:app",
    }
    defaults = RunConfig().to_run_config()
    assert set(app["config"]) == set(defaults)
    assert {k: v for k, v in app["config"].items() if k != "cache-dir"} == {
        k: v for k, v in defaults.items() if k != "cache-dir"
    }
    RunConfig.from_run_config(app["config"])  # the shipped parser accepts the app's config


def test_two_nodes_in_process_aggregate_two_rounds(config):
    from hf_ext.fede4rag.encoder import adapter_arrays
    from hf_ext.fede4rag.task import build_model

    state = _in_process(config)
    assert state["summary"]["rounds"] == 2 and state["summary"]["num-rejected"] == 0
    stats = dict(state["round-stats"])
    assert stats["1:num-clients"] == 2 and stats["2:num-clients"] == 2
    init = adapter_arrays(build_model(RunConfig.from_run_config(config))[0])
    final = {k: state["arrays"][k].numpy() for k in state["arrays"].keys()}
    assert set(final) == set(init) and any(not np.allclose(final[k], init[k]) for k in init)


# About a minute on two shared cores (each ClientApp process imports torch, transformers and Flower): marked slow; the
# in-process test above runs the same apps and run config message by message.
@pytest.mark.slow
def test_superlink_and_two_supernodes_match_the_in_process_run(config):
    from hf_ext.core.federated import LoopbackFederation

    with LoopbackFederation(num_supernodes=2) as federation:
        result = federation.run(APP_DIR, run_config=config, timeout=600)
        assert len(federation.pids) == 3  # SuperLink + one SuperNode per company
    assert result["summary"]["rounds"] == 2 and result["summary"]["num-rejected"] == 0
    local = _in_process(config)
    keys = sorted(local["arrays"].keys())
    assert sorted(result["arrays"].keys()) == keys
    for k in keys:
        np.testing.assert_allclose(result["arrays"][k].numpy(), local["arrays"][k].numpy(), atol=1e-6, err_msg=k)
    assert dict(result["round-stats"])["2:steps-total"] == dict(local["round-stats"])["2:steps-total"]
