"""The parties as separate processes: Flower's deployment engine (a SuperLink and two SuperNodes on 127.0.0.1)
runs the active party's ServerApp and one ClientApp per party, and reaches exactly the in-process result."""

import os

# Before anything imports flwr: Flower reads FLWR_TELEMETRY_ENABLED once, at import.
os.environ.update({"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"})

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from hf_ext.core.federated import LoopbackFederation  # noqa: E402
from hf_ext.proto_evfl.task import ProtoEvflRunConfig  # noqa: E402
from hf_ext.proto_evfl.training import run_federation  # noqa: E402

APP_DIR = Path(__file__).parents[2] / "examples" / "proto_evfl_app"
# One round, one aligned batch: two messages per party, each of which starts a ClientApp process.
RUN = {"rounds": 1, "warmup-rounds": 0, "local-steps": 1, "aligned-batch-size": 100, "unseen-class": 3}


# About 50 s on two shared cores (each ClientApp process imports torch and transformers): marked slow. The same
# ServerApp and ClientApp run in-process in tests/proto_evfl/test_protocol.py, message by message.
@pytest.mark.slow
def test_two_parties_as_processes_match_the_in_process_run():
    with LoopbackFederation(num_supernodes=2) as federation:
        result = federation.run(APP_DIR, run_config=RUN, timeout=240)
        pids = federation.pids
    assert len(pids) == 3  # SuperLink + one SuperNode per party
    local = run_federation(ProtoEvflRunConfig.from_run_config(RUN))
    metrics = dict(result["metrics"])
    for key, value in local.metrics.items():
        if key != "seconds":
            assert metrics[key] == value, key
    state = local.top_model.state_dict()
    for key in result["top-model"].keys():
        np.testing.assert_array_equal(result["top-model"][key].numpy(), state[key].numpy(), err_msg=key)
    assert result["history"]["selected-fraction"][0] > 0  # the lower level ran (OT selection on the parties)
