"""H2Tune alignment, aggregation and the Flower apps on an in-process LocalGrid with 3 heterogeneous clients."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from hf_ext.h2tune.aggregation import aggregate_mean, hetlora_aggregate, update_problem
from hf_ext.h2tune.alignment import RelationMatrix, initial_global


def test_relation_matrix_closed_forms():
    p = RelationMatrix(4, 2, seed=0)
    g = torch.randn(4, 7, 3, 3)
    m = p.download(g)
    w = p.weight.detach()
    assert m.shape == (2, 7, 3, 3)
    torch.testing.assert_close(m[1, 5], sum(w[j, 1] * g[j, 5] for j in range(4)))  # M̃[l,m] = Σ_j P[j,l] G[j,m]
    up = p.upload(m)
    torch.testing.assert_close(up[3, 2], sum(w[3, l] * m[l, 2] for l in range(2)))  # G_c[j,m] = Σ_l P[j,l] M̃[l,m]
    aligned = RelationMatrix(4, 2, index_aligned=True)
    torch.testing.assert_close(aligned.download(g), g[2:])  # top layers of the deepest model
    assert not aligned.weight.requires_grad and p.weight.requires_grad
    with pytest.raises(ValueError, match="L_max"):
        p.download(torch.randn(3, 7, 3, 3))
    torch.testing.assert_close(initial_global(4, 7, 3, seed=5), initial_global(4, 7, 3, seed=5))


def test_aggregate_unweighted_mean_rejects_bad_updates(caplog):
    shape = (2, 7, 4, 4)
    good = [torch.randn(shape) for _ in range(2)]
    nan, inf = torch.randn(shape), torch.randn(shape)
    nan[0, 0, 0, 0], inf[1, 1, 1, 1] = float("nan"), float("inf")
    updates = {"a": good[0], "b": good[1], "nan": nan, "inf": inf, "shape": torch.randn(3, 7, 4, 4),
               "int": np.zeros(shape, dtype=np.int64)}
    with caplog.at_level(logging.WARNING):
        glob, rejected = aggregate_mean(updates, shape)
    torch.testing.assert_close(glob, (good[0] + good[1]) / 2)
    assert set(rejected) == {"nan", "inf", "shape", "int"}
    assert "NaN/Inf" in rejected["nan"] and "NaN/Inf" in rejected["inf"] and "shape" in rejected["shape"]
    assert "rejected update from client nan" in caplog.text
    keep = torch.ones(shape)
    assert aggregate_mean({"x": nan}, shape, current=keep)[0] is keep
    assert update_problem(good[0], shape) is None


def test_hetlora_pad_average_truncate():
    a = {"c0": torch.ones(2, 5), "c1": 3 * torch.ones(4, 5)}
    out = hetlora_aggregate(a, {"c0": 2, "c1": 4})
    torch.testing.assert_close(out["c0"], 2 * torch.ones(2, 5))
    torch.testing.assert_close(out["c1"], torch.cat([2 * torch.ones(2, 5), 1.5 * torch.ones(2, 5)]))


def test_client_sends_payload_independent_of_width_and_keeps_state():
    from hf_ext.h2tune.task import CLIENTS, H2TuneClient, RunConfig, global_shape

    run = RunConfig(local_steps=2, num_train=16, num_test=4, batch_size=8)
    g = initial_global(4, 7, 16, seed=0)
    client = H2TuneClient(CLIENTS[2], run, 4, index=2)  # GPT-2-style, 2 layers, width 32
    g_c = client.fit(g)
    assert g_c.shape == global_shape(4) and torch.isfinite(g_c).all()
    state = client.state_arrays()
    again = H2TuneClient(CLIENTS[2], run, 4, index=2)
    again.load_state_arrays(state)
    for k, v in again.state_arrays().items():
        np.testing.assert_array_equal(v, state[k], err_msg=k)


def test_flower_apps_local_grid_three_heterogeneous_clients():
    from hf_ext.core.federated import run_local
    from hf_ext.h2tune.client_app import app as client_app
    from hf_ext.h2tune.server_app import app as server_app

    run_config = {"num-server-rounds": 2, "local-steps": 2, "num-train": 16, "num-test": 4, "batch-size": 8,
                  "corrupt-partition": 1, "min-nodes": 3}
    state = run_local(server_app, client_app, num_nodes=3, run_config=run_config,
                      node_configs=[{"partition-id": i} for i in range(3)])
    g = state["arrays"]["g"].numpy()
    assert g.shape == (4, 7, 16, 16) and np.isfinite(g).all()
    summary = state["summary"]
    assert summary["rounds"] == 2 and summary["num-rejected"] == 2  # client 1's NaN update, both rounds
    assert all("NaN/Inf" in why for why in dict(state["rejected"]).values())
    assert {k.split(":")[1] for k in dict(state["rejected"])} == {"1"}
