"""H2Tune over Flower's deployment engine: a SuperLink and 3 SuperNodes on 127.0.0.1; one SuperNode is killed after
round 1 and the run still finishes round 2 with the other two (policy: the server waits up to `timeout` seconds for a
round's replies, then aggregates those that arrived; the SuperLink answers for a dead node once it missed its
heartbeats, ~60 s, so a generous `timeout` does not slow the round down). `min-rounds = 2`: a run that aggregated
fewer rounds (e.g. round 1 timed out on a loaded machine) fails instead of exiting 0 with the initial model."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hf_ext.core import federated as fed

APP_DIR = Path(__file__).parent / "flower_app"


@pytest.mark.slow
def test_loopback_deployment_survives_killed_supernode(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    config = {"num-server-rounds": 2, "min-nodes": 2, "min-rounds": 2, "timeout": 300.0, "marker-dir": str(markers)}
    result, error = {}, []
    with fed.LoopbackFederation(num_supernodes=3) as federation:

        def run():
            try:
                result.update(federation.run(APP_DIR, run_config=config, timeout=700))
            except BaseException as err:  # surfaced below
                error.append(err)

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 400
        while not (markers / "round-1-partition-2").exists():
            assert time.monotonic() < deadline and thread.is_alive(), f"round 1 did not finish: {error}"
            time.sleep(0.5)
        victim = federation._processes[3]  # SuperLink first, then SuperNodes 0, 1, 2
        os.killpg(victim.pid, signal.SIGKILL)
        thread.join(timeout=720)
        assert not thread.is_alive(), "the run did not finish after a SuperNode was killed"
    assert not error, error
    g = result["arrays"]["g"].numpy()
    assert g.shape == (4, 7, 16, 16) and np.isfinite(g).all()
    assert result["summary"]["rounds"] == 2
    assert not (markers / "round-2-partition-2").exists()
    assert (markers / "round-2-partition-0").exists() and (markers / "round-2-partition-1").exists()
