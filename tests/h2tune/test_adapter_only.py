"""The adapter-only control ("H2Tune adapter, no sharing"): every client trains the H2Tune adapter locally and never
aggregates, so H2Tune − adapter-only measures the effect of sharing and adapter-only − local-only LoRA the effect of
the adapter form. Pinned here: it is the H2Tune adapter (not plain LoRA), it is identical to an H2Tune client after
round 1 (same seeded G⁰, same step), it sends nothing, and no server message ever changes its weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from hf_ext.h2tune.alignment import initial_global
from hf_ext.h2tune.model import MODULE_SLOTS, h2tune_modules
from hf_ext.h2tune.task import CLIENTS, VARIANTS, H2TuneClient, RunConfig, global_shape

RUN = RunConfig(local_steps=2, num_train=16, num_test=4, batch_size=8)
L_MAX = max(c.layers for c in CLIENTS)


def _client(variant: str, index: int = 0) -> H2TuneClient:
    return H2TuneClient(CLIENTS[index], RUN.for_variant(variant), L_MAX, index=index)


def _weights(client: H2TuneClient) -> dict[str, torch.Tensor]:
    state = {k: torch.as_tensor(v).clone() for k, v in client.state_arrays().items()}
    assert state, "the client keeps no state"
    return state


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)


def _random_global(seed: int) -> dict[str, np.ndarray]:
    g = torch.randn(global_shape(L_MAX), generator=torch.Generator().manual_seed(seed))
    return {"g": g.numpy().astype(np.float32)}


def test_adapter_only_trains_the_h2tune_adapter_and_sends_nothing():
    run = RUN.for_variant("adapter-only")
    assert VARIANTS["adapter-only"]["mode"] == "local" and run.h2tune_adapter and run.mode == "local"
    client = _client("adapter-only")
    assert not client.plain_lora
    assert len(list(h2tune_modules(client.model))) > 0  # T, S and the shared matrix exist: the H2Tune adapter
    assert client.run_round(None) == {}  # nothing leaves the client
    assert client.prev_t is not None  # round 2 will run the two-pass step with this T_prev
    # the plain-LoRA baselines are unaffected
    assert _client("local-only").plain_lora and not RUN.for_variant("local-only").h2tune_adapter


def test_adapter_only_equals_h2tune_after_round_one_and_then_ignores_every_server_message():
    """Round 1: an H2Tune client that downloads the seeded G⁰ and an adapter-only client end in the same state (the
    control differs from H2Tune only by what sharing does afterwards). From then on the adapter-only client's state is
    the same whatever the server sends (nothing, a random G, a different random G), while the H2Tune client's
    depends on it."""
    g0 = {"g": initial_global(L_MAX, len(MODULE_SLOTS), 16, seed=RUN.seed).numpy()}
    fed, alone, alone_msg = _client("h2tune"), _client("adapter-only"), _client("adapter-only")
    fed.run_round(g0)
    alone.run_round(None)
    alone_msg.run_round(_random_global(1))  # a message in round 1 is ignored too
    _assert_same(_weights(fed), _weights(alone))
    _assert_same(_weights(alone), _weights(alone_msg))
    # round 2: the server sends different G's; the adapter-only clients stay equal, and H2Tune moves away
    alone.run_round(None)
    alone_msg.run_round(_random_global(2))
    fed.run_round(_random_global(2))
    after = _weights(alone)
    _assert_same(after, _weights(alone_msg))
    fed_after = _weights(fed)
    assert any(not torch.equal(after[k], fed_after[k]) for k in after), "the H2Tune client ignored G as well"


def test_adapter_only_round_two_keeps_its_own_middle_matrices_not_g0(monkeypatch):
    """With local training off, round 2 must leave M̃ as round 1 left it (no re-download of G⁰ or of anything the
    server sends): a client rebuilt from its saved state (as the Flower ClientApp does every round) also keeps it."""
    from hf_ext.h2tune.model import get_middle, set_middle

    client = _client("adapter-only")
    client.run_round(None)
    moved = get_middle(client.model) + 0.5  # as if round 1's training had moved M̃
    set_middle(client.model, moved)
    monkeypatch.setattr(H2TuneClient, "train_local", lambda self: None)
    client.run_round(_random_global(3))
    torch.testing.assert_close(get_middle(client.model), moved)
    rebuilt = _client("adapter-only")
    rebuilt.load_state_arrays(client.state_arrays())
    rebuilt.run_round(None)
    torch.testing.assert_close(get_middle(rebuilt.model), moved)


def test_adapter_only_is_a_flower_variant_with_no_run_config_key_of_its_own():
    run = RunConfig.from_run_config({**RUN.to_run_config(), "variant": "adapter-only"})
    assert run.h2tune_adapter and run.mode == "local"
    assert "h2tune-adapter" not in RunConfig().to_run_config()
    assert dataclasses.replace(run, variant="h2tune").for_variant("h2tune").h2tune_adapter is False
