"""H2Tune's Flower apps on an in-process LocalGrid with 3 heterogeneous clients (two Llama-style, one GPT-2-style
without k/v/gate modules), through the tests' own app (`flower_app/h2tune_fedapp`: the shipped server and client code
plus test-only client hooks): a faulty peer, one dishonest client (values just under the absolute bound; a replayed
old reply), and an honest run in which the global G must change every round and be the per-slot mean of the
clients' uploads."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hf_ext.core.federated import run_local
from hf_ext.h2tune.aggregation import aggregate_mean, slot_presence
from hf_ext.h2tune.model import MODULE_SLOTS

APP_DIR = Path(__file__).parent / "flower_app"
SMALL = {"local-steps": 2, "num-train": 16, "num-test": 4, "batch-size": 8, "min-nodes": 3}
K, GATE, Q = MODULE_SLOTS.index("k"), MODULE_SLOTS.index("gate"), MODULE_SLOTS.index("q")


@pytest.fixture(scope="module")
def apps():
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(APP_DIR))
        yield SimpleNamespace(
            server=importlib.import_module("h2tune_fedapp.server_app").app,
            client=importlib.import_module("h2tune_fedapp.client_app").app,
        )


def _run(apps, rounds=2, **config):
    run_config = {"num-server-rounds": rounds, **SMALL, **config}
    return run_local(
        apps.server,
        apps.client,
        num_nodes=3,
        run_config=run_config,
        node_configs=[{"partition-id": i} for i in range(3)],
    )


def _load(folder: Path, kind: str, server_round: int, pid: int) -> np.ndarray:
    return np.load(folder / f"{kind}-{server_round}-{pid}.npy")


def test_shipped_apps_carry_no_test_hooks():
    import hf_ext.h2tune.client_app as client_app
    import hf_ext.h2tune.server_app as server_app
    import hf_ext.h2tune.task as task
    from hf_ext.h2tune.task import RunConfig

    for module in (client_app, server_app, task):
        text = Path(module.__file__).read_text()
        assert not any(hook in text for hook in ("corrupt-partition", "corrupt_partition", "marker-dir", "dishonest"))
    with pytest.raises(
        ValueError, match=r"unknown RunConfig run-config key\(s\) \['corrupt-partition', 'marker-dir'\]"
    ):
        RunConfig.from_run_config({"corrupt-partition": 1, "marker-dir": "/tmp"})


def test_a_faulty_peer_is_rejected_by_node_id(apps):
    state = _run(apps, **{"corrupt-partition": 1})
    g = state["arrays"]["g"].numpy()
    assert g.shape == (4, 7, 16, 16) and np.isfinite(g).all()
    summary = state["summary"]
    assert summary["rounds"] == 2 and summary["num-rejected"] == 2  # client 1's NaN update, both rounds
    assert all("NaN/Inf" in why for why in dict(state["rejected"]).values())
    # keyed by the transport's node id (LocalGrid: 101 + partition), not by the partition-id the client claims
    assert {k.split(":")[1] for k in dict(state["rejected"])} == {"102"}
    assert dict(state["partitions"]) == {"101": 0, "102": 1, "103": 2}


def test_a_dishonest_client_just_under_the_bound_is_excluded_named_and_the_run_completes(apps, tmp_path):
    """The issue's attack: 9.9e5 everywhere (under the absolute 1e6 cap) used to move the global mean from ~0.02 to
    ~3e5. Now it is excluded each round, named by node id, and G is the per-slot mean of the two honest uploads."""
    state = _run(apps, **{"dishonest-partition": 1, "dishonest-mode": "large", "marker-dir": str(tmp_path)})
    assert state["summary"]["rounds"] == 2
    rejected = dict(state["rejected"])
    assert set(rejected) == {"1:102", "2:102"} and all("outlier" in why for why in rejected.values())
    assert dict(state["partitions"])["102"] == 1 and dict(state["accepted"]) == {"1": "101,103", "2": "101,103"}
    received = _load(tmp_path, "received", 2, 0)
    honest = {str(p): _load(tmp_path, "sent", 1, p) for p in (0, 2)}
    expected, _ = aggregate_mean(honest, received.shape)
    np.testing.assert_allclose(received, expected.numpy(), rtol=1e-6, atol=1e-7)
    assert float(np.abs(state["arrays"]["g"].numpy()).max()) < 10.0


def test_a_replayed_old_reply_is_refused_and_named(apps, tmp_path):
    state = _run(apps, **{"dishonest-partition": 2, "dishonest-mode": "replay", "marker-dir": str(tmp_path)})
    assert state["summary"]["rounds"] == 2
    rejected = dict(state["rejected"])
    assert set(rejected) == {"2:103"} and "stale or replayed" in rejected["2:103"]
    # the replayed bytes are the round-1 upload, which round 1 did accept
    assert dict(state["accepted"]) == {"1": "101,102,103", "2": "101,102"}
    np.testing.assert_array_equal(_load(tmp_path, "sent", 2, 2), _load(tmp_path, "sent", 1, 2))


def test_honest_run_global_g_changes_every_round_and_is_the_per_slot_mean(apps, tmp_path):
    """A server that keeps the old G (or averages the GPT-2 client's zeros into k/v/gate) fails this test."""
    rounds = 3
    state = _run(apps, rounds=rounds, **{"marker-dir": str(tmp_path)})
    assert state["summary"]["rounds"] == rounds and not dict(state["rejected"]) and not dict(state["failed"])
    for r in range(1, rounds + 1):
        first = _load(tmp_path, "received", r, 0)
        for p in (1, 2):  # every client receives the same G
            np.testing.assert_array_equal(_load(tmp_path, "received", r, p), first)
        sent = {p: _load(tmp_path, "sent", r, p) for p in range(3)}
        assert slot_presence(sent[2]).tolist() == [s not in ("k", "v", "gate") for s in MODULE_SLOTS]
        assert slot_presence(sent[0]).all() and slot_presence(sent[1]).all()
        following = _load(tmp_path, "received", r + 1, 0) if r < rounds else state["arrays"]["g"].numpy()
        assert not np.allclose(following, first), f"G did not change in round {r}"
        # the per-slot mean: q over all three clients, k and gate over the two Llama clients only
        np.testing.assert_allclose(following[:, Q], (sent[0][:, Q] + sent[1][:, Q] + sent[2][:, Q]) / 3, rtol=1e-5)
        for slot in (K, GATE):
            np.testing.assert_allclose(following[:, slot], (sent[0][:, slot] + sent[1][:, slot]) / 2, rtol=1e-5)


def test_per_slot_mean_ignores_a_clients_absent_slots_and_keeps_slots_nobody_has():
    shape = (2, 7, 3, 3)
    llama = [torch.randn(shape), torch.randn(shape)]
    gpt2 = torch.randn(shape)
    gpt2[:, [K, GATE]] = 0.0  # what a client without k / gate modules uploads
    glob, rejected = aggregate_mean({"a": llama[0], "b": llama[1], "gpt2": gpt2}, shape)
    assert not rejected
    torch.testing.assert_close(glob[:, Q], (llama[0][:, Q] + llama[1][:, Q] + gpt2[:, Q]) / 3)
    torch.testing.assert_close(glob[:, K], (llama[0][:, K] + llama[1][:, K]) / 2)  # not shrunk by a third
    # a slot that no client has keeps the server's previous value
    current = torch.randn(shape)
    glob, _ = aggregate_mean({"gpt2": gpt2}, shape, current=current)
    torch.testing.assert_close(glob[:, K], current[:, K])
    torch.testing.assert_close(glob[:, Q], gpt2[:, Q])
