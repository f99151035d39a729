"""Client-batch and server-hierarchical modes over gRPC: two authenticated clients, each on its own channel (threads
here; `hf-ext fl_llama serve --mode ... --clients 2` serves separate processes the same way), train exactly like the
in-process reference of the same mode."""

from __future__ import annotations

import copy
import dataclasses
import threading

import pytest
import torch

from hf_ext.fl_llama import split_llama
from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.auth import TokenStore, generate_tokens
from hf_ext.fl_llama.parallel import ClientBatchHub, HierarchicalSync, build_setup, train
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.server import SplitServer
from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
from hf_ext.fl_llama.testing import tiny_batch
from hf_ext.fl_llama.transport import GrpcTransport, serve_grpc

ARGS = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=8)
STEPS, SYNC = 4, 2


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=64, hidden_size=32, num_layers=4, max_positions=64, seed=0)


def _batches():
    return [[tiny_batch(2 + m, 8, seed=10 * m + s, vocab=64) for s in range(STEPS)] for m in range(2)]


def _over_grpc(model, mode, tmp_path):
    tokens = generate_tokens(tmp_path / "tokens", ["alice", "bob"])
    client, server_model = split_llama(copy.deepcopy(model), 1, 1)
    server = SplitServer(server_model, ARGS, hierarchical=mode == "server_hierarchical")
    hub = ClientBatchHub(server, 2) if mode == "client_batch" else HierarchicalSync(server, 2, SYNC)
    grpc_server, port = serve_grpc(hub.handle_bytes, max_workers=4, serialize=False,
                                   tokens=TokenStore.load(tmp_path / "tokens" / "server_tokens.json"))  # fmt: skip
    splits = [FlLlamaSplitForCausalLM(client if m == 0 else copy.deepcopy(client),
                                      GrpcTransport(f"127.0.0.1:{port}", token=tokens[name], wait_ready=10),
                                      dataclasses.replace(ARGS, seed=ARGS.seed + m), client_id=name)
              for m, name in enumerate(["alice", "bob"])]  # fmt: skip
    losses, errors = [[], []], []

    def run(m):
        try:
            for b in _batches()[m]:
                losses[m].append(splits[m].train_step(b))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    finally:
        grpc_server.stop(grace=0.5)
    assert not errors, errors
    return losses, server, splits


@pytest.mark.parametrize("mode", ["client_batch", "server_hierarchical"])
def test_parallel_modes_over_grpc_equal_the_in_process_reference(model, mode, tmp_path):
    setup = build_setup(copy.deepcopy(model), 1, 1, num_clients=2, mode=mode, args=ARGS)
    ref = train(setup, _batches(), mode=mode, sync_every=SYNC)["losses"]
    losses, server, splits = _over_grpc(model, mode, tmp_path)
    assert losses[0] == pytest.approx(ref[0], abs=1e-5) and losses[1] == pytest.approx(ref[1], abs=1e-5)
    assert server.steps == setup.server.steps == (STEPS if mode == "client_batch" else 2 * STEPS)
    for name, value in setup.server.model.state_dict().items():
        torch.testing.assert_close(server.model.state_dict()[name], value, rtol=0, atol=1e-5, msg=name)
    for split, reference in zip(splits, setup.clients):
        for (name, p), q in zip(split.client.named_parameters(), reference.client.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-5, msg=name)
    if mode == "server_hierarchical":
        assert set(server._subs) == {"alice", "bob"}  # one sub-server per authenticated client
