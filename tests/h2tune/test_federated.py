"""H2Tune alignment, aggregation and the Flower apps on an in-process LocalGrid with 3 heterogeneous clients."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from peft import LoraConfig, get_peft_model

from hf_ext.h2tune.aggregation import aggregate_mean, update_problem
from hf_ext.h2tune.alignment import RelationMatrix, initial_global
from hf_ext.h2tune.baselines import hetlora_mean, hetlora_payload
from hf_ext.h2tune.task import RunConfig
from hf_ext.h2tune.testing import tiny_base, tiny_base_config


def test_relation_matrix_closed_forms():
    p = RelationMatrix(4, 2, seed=0)
    g = torch.randn(4, 7, 3, 3)
    m = p.download(g)
    w = p.weight.detach()
    assert m.shape == (2, 7, 3, 3)
    torch.testing.assert_close(m[1, 5], sum(w[j, 1] * g[j, 5] for j in range(4)))  # M̃[l,m] = Σ_j P[j,l] G[j,m]
    up = p.upload(m)
    torch.testing.assert_close(up[3, 2], sum(w[3, k] * m[k, 2] for k in range(2)))  # G_c[j,m] = Σ_l P[j,l] M̃[l,m]
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
    updates = {
        "a": good[0],
        "b": good[1],
        "nan": nan,
        "inf": inf,
        "shape": torch.randn(3, 7, 4, 4),
        "int": np.zeros(shape, dtype=np.int64),
    }
    with caplog.at_level(logging.WARNING):
        glob, rejected = aggregate_mean(updates, shape)
    torch.testing.assert_close(glob, (good[0] + good[1]) / 2)
    assert set(rejected) == {"nan", "inf", "shape", "int"}
    assert "NaN/Inf" in rejected["nan"] and "NaN/Inf" in rejected["inf"] and "shape" in rejected["shape"]
    assert "rejected update from client nan" in caplog.text
    keep = torch.ones(shape)
    assert aggregate_mean({"x": nan}, shape, current=keep)[0] is keep
    assert update_problem(good[0], shape) is None


def test_hetlora_pads_the_rank_only_and_averages_within_a_feature_space(caplog):
    ok0 = {"A:0:0": np.ones((2, 6), np.float32)}
    ok1 = {"A:0:0": 3 * np.ones((4, 6), np.float32), "A:1:0": np.ones((4, 6), np.float32)}
    other_width = {"A:0:0": 5 * np.ones((4, 5), np.float32)}  # another base (d_in 5): never mixed with d_in 6
    bad = {"A:0:0": np.full((2, 6), np.nan, np.float32)}
    mean, rejected = hetlora_mean(
        {"c0": ok0, "c1": ok1, "cw": other_width, "c2": bad, "c3": {"weird": np.ones((1, 1))}}
    )
    expected = np.full((4, 6), 1.5, np.float32)
    expected[:2] = 2.0  # (1 + 3) / 2 in c0's rank rows; c0's zero rank padding below
    np.testing.assert_allclose(mean["A:0:0:6"], expected)
    np.testing.assert_allclose(mean["A:0:0:5"], other_width["A:0:0"])  # alone in its feature space: unchanged
    np.testing.assert_allclose(mean["A:1:0:6"], np.ones((4, 6)))  # only c1 has layer 1
    assert "NaN/Inf" in rejected["c2"] and "malformed key" in rejected["c3"]
    assert "rejected update from client c2" in caplog.text


def test_hetlora_and_flora_never_mix_two_bases_even_of_one_feature_size():
    """A GPT-2 MLP and a Llama MLP of the same width share d_out: the server's base groups keep them apart."""
    from hf_ext.h2tune.aggregation import server_update
    from hf_ext.h2tune.baselines import load_hetlora, lora_factors
    from hf_ext.h2tune.clients import CLIENTS, base_group

    assert [base_group(CLIENTS, i) for i in range(3)] == ["base0", "base0", "base2"]  # clients 0, 1 share a base
    same = {"A:0:0": np.ones((2, 6), np.float32), "B:0:0": np.ones((6, 2), np.float32)}
    payloads = {"0": same, "1": {k: 3 * v for k, v in same.items()}, "2": {k: 7 * v for k, v in same.items()}}
    groups = {"0": "base0", "1": "base0", "2": "base2"}
    mean, _ = server_update("hetlora", payloads, (1, 7, 16, 16), groups=groups)
    np.testing.assert_allclose(mean["base0/A:0:0:6"], 2.0)  # (1 + 3) / 2: clients 0 and 1 only
    np.testing.assert_allclose(mean["base2/A:0:0:6"], 7.0)  # client 2 alone on its base: its own factors back
    stacked, _ = server_update("flora", payloads, (1, 7, 16, 16), groups=groups)
    assert stacked["A:base0/0:0:6x6"].shape == (4, 6) and stacked["A:base2/0:0:6x6"].shape == (2, 6)
    np.testing.assert_allclose(stacked["B:base2/0:0:6x6"], 7.0)  # a mean over one client
    with pytest.raises(KeyError, match="no base group"):
        server_update("hetlora", payloads, (1, 7, 16, 16), groups={"0": "base0"})
    # the client loads only its own group's means
    model = get_peft_model(tiny_base(tiny_base_config("llama", 1, 8, 16)), LoraConfig(r=2, target_modules=["q_proj"]))
    (layer, slot), (a, b) = next(iter(lora_factors(model).items()))
    key = f"A:{layer}:{slot}:{a.shape[1]}"
    load_hetlora(
        model,
        {f"base0/{key}": np.full(a.shape, 5.0, np.float32), f"base2/{key}": np.full(a.shape, 9.0, np.float32)},
        group="base2",
    )
    np.testing.assert_allclose(a.detach().numpy(), 9.0)


def test_flora_stacking_is_the_exact_mean_of_the_updates_and_restarts_lora():
    """FLoRA: B_stack·A_stack = (1/N)·Σ_c (α/r_c)·B_c·A_c across different ranks; the client adds it to its base
    and restarts its adapter (B = 0), so its function is base + mean ΔW."""
    from peft import LoraConfig, get_peft_model

    from hf_ext.h2tune.baselines import apply_flora, flora_stack, lora_factors
    from hf_ext.h2tune.model import module_slot
    from hf_ext.h2tune.testing import tiny_base, tiny_base_config, tiny_inputs

    cfg = dict(target_modules="all-linear", init_lora_weights=False, lora_alpha=16)
    models = [get_peft_model(tiny_base(tiny_base_config("llama", 2, 32)), LoraConfig(r=r, **cfg)) for r in (2, 4)]
    deltas = [
        {k: (16 / r) * b.detach() @ a.detach() for k, (a, b) in lora_factors(m).items()} for m, r in zip(models, (2, 4))
    ]
    stacked, rejected = flora_stack({str(i): hetlora_payload(m, scaled=True) for i, m in enumerate(models)})
    assert not rejected and stacked["A:0:0:32x32"].shape == (6, 32)  # q of layer 0: ranks 2 + 4 stacked
    for (layer, slot), delta in deltas[0].items():
        group = f"{layer}:{slot}:{delta.shape[1]}x{delta.shape[0]}"
        want = (delta + deltas[1][(layer, slot)]) / 2
        np.testing.assert_allclose(stacked[f"B:{group}"] @ stacked[f"A:{group}"], want.numpy(), rtol=1e-5, atol=1e-6)
    ids = tiny_inputs()["input_ids"]
    fresh = tiny_base(tiny_base_config("llama", 2, 32))
    with torch.no_grad():
        for name, module in fresh.named_modules():
            if isinstance(module, torch.nn.Linear) and name != "lm_head":
                key = module_slot(name)
                module.weight += (deltas[0][key] + deltas[1][key]) / 2
        want = fresh(input_ids=ids).logits
    apply_flora(models[0], stacked)
    assert all(not b.any() for _, b in lora_factors(models[0]).values())
    models[0].eval()
    with torch.no_grad():
        torch.testing.assert_close(models[0](input_ids=ids).logits, want, rtol=1e-4, atol=1e-5)


def test_client_sends_payload_independent_of_width_and_keeps_state():
    from hf_ext.h2tune.task import CLIENTS, H2TuneClient, RunConfig, global_shape

    run = RunConfig(local_steps=2, num_train=16, num_test=4, batch_size=8)
    g = initial_global(4, 7, 16, seed=0)
    client = H2TuneClient(CLIENTS[2], run, 4, index=2)  # GPT-2-style, 2 layers, width 32
    g_c = client.fit(g)
    assert g_c.shape == global_shape(4) and torch.isfinite(g_c).all()
    # P_c lives outside the model, so Trainer does not zero its gradient: the callback must (no accumulation)
    assert client.relation.weight.grad is None
    state = client.state_arrays()
    again = H2TuneClient(CLIENTS[2], run, 4, index=2)
    again.load_state_arrays(state)
    for k, v in again.state_arrays().items():
        np.testing.assert_array_equal(v, state[k], err_msg=k)


def _assert_same_run(a: dict, b: dict):
    assert a["accuracy"] == b["accuracy"]
    assert a["bytes_sent_per_round"] == b["bytes_sent_per_round"]
    if a["final_message"] is None:
        assert b["final_message"] is None
        return
    assert a["final_message"].keys() == b["final_message"].keys()
    for key in a["final_message"]:
        np.testing.assert_allclose(a["final_message"][key], b["final_message"][key], rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("variant", ["h2tune", "hetlora", "adapter-only", "flora"])
def test_flower_apps_reproduce_the_in_process_run(variant):
    """The reproduction's in-process loop and the Flower apps are the same computation (same G / HetLoRA means; for
    the adapter-only control, a ClientApp rebuilt from its saved state each round keeps its own M̃, as in-process;
    for FLoRA, a rebuilt client keeps every global ΔW merged into its base so far, which takes three rounds to
    see: the round-2 merge is lost only when round 3 rebuilds the base)."""
    from hf_ext.h2tune.reproduce import run_variant, run_variant_flower

    run = RunConfig(rounds=3 if variant == "flora" else 2, local_steps=2, num_train=16, num_test=8, batch_size=8)
    inproc = run_variant(variant, run)
    flower = run_variant_flower(variant, run, engine="local")
    _assert_same_run(inproc, flower)
    if variant == "hetlora":  # every client sends all its A and B factors (float32)
        assert inproc["bytes_sent_per_round"] == sum(
            4 * a.size for c in inproc["clients"] for a in hetlora_payload(c.model).values()
        )


@pytest.mark.slow
def test_simulation_engine_reproduces_the_in_process_run():
    from hf_ext.h2tune.reproduce import run_variant, run_variant_flower

    run = RunConfig(rounds=2, local_steps=2, num_train=16, num_test=8, batch_size=8)
    _assert_same_run(run_variant("h2tune", run), run_variant_flower("h2tune", run, engine="simulation"))


def test_a_flower_reproduction_refuses_a_round_that_lost_a_client(monkeypatch):
    """A round aggregated without one client's reply (timed out on a busy machine: Ray runs its actors at a lower
    priority) is not the computation the reproduction compares: the run stops, naming the round and the client,
    instead of reporting the federation; and the simulation's rounds wait a day, not a deployment's 600 s."""
    from flwr.app import MetricRecord

    from hf_ext.core import federated
    from hf_ext.h2tune.reproduce import REPRODUCE_ROUND_TIMEOUT_S, run_variant_flower

    seen = {}

    def fake_run_local(server_app, client_app, num_nodes, run_config, node_configs):
        seen["timeout"] = run_config["timeout"]
        accuracy = {f"{r}:{c}": 0.5 for r in (1, 2) for c in range(num_nodes) if (r, c) != (1, 2)}
        return {"client-accuracy": MetricRecord(accuracy), "bytes-received": MetricRecord({"1": 0, "2": 0})}

    monkeypatch.setattr(federated, "run_local", fake_run_local)
    with pytest.raises(RuntimeError, match=r"local-only seed 0 on the local engine: no accepted reply from round 1: "):
        run_variant_flower("local-only", RunConfig(rounds=2), engine="local")
    assert seen["timeout"] == REPRODUCE_ROUND_TIMEOUT_S
