"""Many trainers on one FL-LLaMA server (issue 38): interleaved forwards and backwards of different clients.

What "the same steps taken one client at a time" means for the shared part B: the server gives the part to one
training step at a time (forward, backward, optimiser step) and records the order in `SplitServer.step_log`. Taking
the same steps one client at a time in that order — a fresh copy of every party, in-process, each client running its
next batch when its name comes up in the log — must give bit-identical parameters of part B and of every client's
parts A and C, and the same losses. (Any order is a valid serial schedule; the log pins which one ran.)
"""

from __future__ import annotations

import copy
import dataclasses
import threading

import pytest
import torch

from hf_ext.fl_llama import split_llama
from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.auth import TokenStore, generate_tokens
from hf_ext.fl_llama.modeling_fl_llama import FlLlamaServerModel
from hf_ext.fl_llama.parallel import HierarchicalSync
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.server import ServerLimits, SplitServer
from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
from hf_ext.fl_llama.testing import hello_meta, tiny_batch
from hf_ext.fl_llama.transport import GrpcTransport, InProcessTransport, ProtocolError, serve_grpc

D = 32
CLIENTS, STEPS = 16, 3
ARGS = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=CLIENTS * STEPS)


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=64, seed=0)


def _names(n):
    return [f"c{m:02d}" for m in range(n)]


def _batches(m):
    return [tiny_batch(2 + m % 3, 8, seed=100 * m + s, vocab=64) for s in range(STEPS)]


def _clients(client_model, transports, names):
    return {name: FlLlamaSplitForCausalLM(copy.deepcopy(client_model), transports[name],
                                          dataclasses.replace(ARGS, seed=m), client_id=name)
            for m, name in enumerate(names)}  # fmt: skip


def _replay(model, step_log, names):
    """The same steps one client at a time, in the server's order, on fresh in-process parties."""
    client_model, server_model = split_llama(copy.deepcopy(model), 1, 1, noise_scale=0.05)
    server = SplitServer(server_model, ARGS)
    clients = _clients(client_model, {n: InProcessTransport(server.handle_bytes) for n in names}, names)
    done = dict.fromkeys(names, 0)
    losses = {n: [] for n in names}
    for name in step_log:
        losses[name].append(clients[name].train_step(_batches(names.index(name))[done[name]]))
        done[name] += 1
    return server, clients, losses


def test_sixteen_clients_interleaving_over_grpc_equal_the_same_steps_one_at_a_time(model, tmp_path):
    names = _names(CLIENTS)
    tokens = generate_tokens(tmp_path / "tokens", names)
    client_model, server_model = split_llama(copy.deepcopy(model), 1, 1, noise_scale=0.05)
    server = SplitServer(server_model, ARGS)
    grpc_server, port = serve_grpc(server.handle_bytes, max_workers=CLIENTS + 4,
                                   tokens=TokenStore.load(tmp_path / "tokens" / "server_tokens.json"))  # fmt: skip
    transports = {n: GrpcTransport(f"127.0.0.1:{port}", token=tokens[n], wait_ready=10) for n in names}
    clients = _clients(client_model, transports, names)
    losses, errors = {n: [] for n in names}, []
    start = threading.Barrier(CLIENTS, timeout=120)  # every step starts with all 16 forwards in flight at once

    def run(m, name):
        try:
            for batch in _batches(m):
                start.wait()
                losses[name].append(clients[name].train_step(batch))
        except BaseException as exc:  # noqa: BLE001
            errors.append((name, exc))
            start.abort()

    threads = [threading.Thread(target=run, args=(m, n)) for m, n in enumerate(names)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
    finally:
        grpc_server.stop(grace=0.5)
    assert errors == []  # 0 failed steps
    assert server.steps == CLIENTS * STEPS and sorted(server.step_log) == sorted(names * STEPS)
    assert len(set(server.step_log[:CLIENTS])) == CLIENTS  # the barrier made every client's first step contend

    ref_server, ref_clients, ref_losses = _replay(model, server.step_log, names)
    assert losses == ref_losses
    for key, value in ref_server.model.state_dict().items():
        assert torch.equal(server.model.state_dict()[key], value), key
    for name in names:
        for (key, p), q in zip(clients[name].client.named_parameters(), ref_clients[name].client.parameters()):
            assert torch.equal(p, q), (name, key)


def test_a_second_forward_waits_for_the_first_clients_backward(model):
    """The interleaving that used to fail (A forward, B forward, A backward, B backward), at the wire level."""
    _, server_model = split_llama(copy.deepcopy(model), 1, 1)
    server = SplitServer(server_model, ARGS)
    for name in ("A", "B"):
        server.handle("hello", {}, {**hello_meta(server_model, ARGS.max_steps), "client_id": name})

    def fwd(name, seed):
        g = torch.Generator().manual_seed(seed)
        tensors = {"hidden": torch.randn(2, 5, D, generator=g), "n_real": torch.full((2,), 5),
                   "position_ids": torch.arange(5).expand(2, -1).contiguous()}  # fmt: skip
        return server.handle("forward", tensors, {"client_id": name, "train": True})[0]["hidden"]

    grad = torch.ones(2, 5, D) * 1e-2
    fwd("A", 0)
    replies = {}
    b_thread = threading.Thread(target=lambda: replies.setdefault("B", fwd("B", 1)))
    b_thread.start()
    for _ in range(2000):  # B is queued behind A's step (not computing on B's weights that A is about to change)
        with server._lock:
            if list(server._queue) == ["B"]:
                break
        threading.Event().wait(0.005)
    assert list(server._queue) == ["B"] and "B" not in replies and server._turn_owner == "A"
    server.handle("backward", {"grad": grad}, {"client_id": "A"})
    b_thread.join(timeout=60)
    server.handle("backward", {"grad": grad}, {"client_id": "B"})
    assert server.step_log == ["A", "B"] and server.steps == 2

    # the same two steps one at a time give the same part B and the same h_B for B
    _, ref_model = split_llama(copy.deepcopy(model), 1, 1)
    ref = SplitServer(ref_model, ARGS)
    ref.handle("hello", {}, {**hello_meta(ref_model, ARGS.max_steps), "client_id": "A"})
    server, saved = ref, server  # fwd() talks to `server`
    fwd("A", 0)
    ref.handle("backward", {"grad": grad}, {"client_id": "A"})
    ref.handle("hello", {}, {**hello_meta(ref_model, ARGS.max_steps), "client_id": "B"})
    assert torch.equal(fwd("B", 1), replies["B"])
    ref.handle("backward", {"grad": grad}, {"client_id": "B"})
    for key, value in ref.model.state_dict().items():
        assert torch.equal(saved.model.state_dict()[key], value), key


def test_a_stalled_client_loses_its_turn_and_a_waiting_one_is_refused_by_name(model):
    _, server_model = split_llama(copy.deepcopy(model), 1, 1)
    tensors = {"hidden": torch.randn(1, 4, D), "n_real": torch.full((1,), 4),
               "position_ids": torch.arange(4)[None].contiguous()}  # fmt: skip
    server = SplitServer(server_model, ARGS, limits=ServerLimits(step_timeout=0.2, queue_timeout=30))
    for name in ("A", "B"):
        server.handle("hello", {}, {**hello_meta(server_model, ARGS.max_steps), "client_id": name})
    server.handle("forward", tensors, {"client_id": "A"})
    server.handle("forward", tensors, {"client_id": "B"})  # runs once A's turn has expired (A never answered)
    with pytest.raises(ProtocolError, match=r"'A'.s step expired.*step_timeout"):
        server.handle("backward", {"grad": torch.zeros(1, 4, D)}, {"client_id": "A"})
    server.handle("backward", {"grad": torch.zeros(1, 4, D)}, {"client_id": "B"})
    assert server.step_log == ["B"]

    server = SplitServer(copy.deepcopy(server_model), ARGS, limits=ServerLimits(step_timeout=60, queue_timeout=0.2))
    for name in ("A", "B"):
        server.handle("hello", {}, {**hello_meta(server_model, ARGS.max_steps), "client_id": name})
    server.handle("forward", tensors, {"client_id": "A"})
    with pytest.raises(ProtocolError, match=r"queue_timeout.*held by 'A'"):
        server.handle("forward", tensors, {"client_id": "B"})
    assert set(server._pending) == {"A"} and not server._queue


def _meet_inside_body(monkeypatch, parties):
    """Makes the first `parties` calls of part B's forward wait for each other *inside* the computation: if the
    server ran them one at a time the barrier would break (a serialised server cannot pass this)."""
    barrier = threading.Barrier(parties, timeout=30)
    original = FlLlamaServerModel.body
    seen = set()

    def body(self, *args, **kwargs):
        me = threading.get_ident()
        if me not in seen and len(seen) < parties:
            seen.add(me)
            barrier.wait()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FlLlamaServerModel, "body", body)


def test_server_hierarchical_sub_servers_compute_in_parallel_over_grpc(model, tmp_path, monkeypatch):
    names = _names(2)
    tokens = generate_tokens(tmp_path / "tokens", names)
    client_model, server_model = split_llama(copy.deepcopy(model), 1, 1)
    server = SplitServer(server_model, ARGS, hierarchical=True)
    hub = HierarchicalSync(server, 2, sync_every=2)
    grpc_server, port = serve_grpc(hub.handle_bytes, max_workers=6,
                                   tokens=TokenStore.load(tmp_path / "tokens" / "server_tokens.json"))  # fmt: skip
    clients = _clients(client_model, {n: GrpcTransport(f"127.0.0.1:{port}", token=tokens[n]) for n in names}, names)
    for split in clients.values():
        split.handshake()
    _meet_inside_body(monkeypatch, 2)
    errors = []

    def run(m, name):
        try:
            for batch in _batches(m)[:2]:
                clients[name].train_step(batch)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m, n)) for m, n in enumerate(names)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        grpc_server.stop(grace=0.5)
    assert errors == [] and server.steps == 4 and hub.rounds == 1


def test_generation_sessions_compute_in_parallel(model, monkeypatch):
    _, server_model = split_llama(copy.deepcopy(model), 1, 1)
    server = SplitServer(server_model, ARGS)
    _meet_inside_body(monkeypatch, 2)
    out, errors = {}, []

    def prefill(name):
        try:
            out[name] = server.handle("prefill", {"hidden": torch.randn(1, 4, D)}, {"client_id": name})[0]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=prefill, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and set(out) == {"x", "y"}


def test_training_is_refused_at_the_handshake_by_a_server_that_could_not_save(model, tmp_path):
    _, server_model = split_llama(copy.deepcopy(model), 1, 1)
    server = SplitServer(server_model, ARGS, require_output_dir=True)
    with pytest.raises(ProtocolError, match=r"handshake refused.*without --output-dir"):
        server.handle("hello", {}, {**hello_meta(server_model, ARGS.max_steps), "client_id": "A"})
    server.handle("hello", {}, {**hello_meta(server_model, purpose="generate"), "client_id": "A"})  # generation ok
    missing = SplitServer(server_model, ARGS, require_output_dir=True, output_dir=tmp_path / "gone")
    with pytest.raises(ProtocolError, match="not a writable folder"):
        missing.handle("hello", {}, {**hello_meta(server_model, ARGS.max_steps), "client_id": "A"})
    split = FlLlamaSplitForCausalLM(split_llama(copy.deepcopy(model), 1, 1)[0], InProcessTransport(server.handle_bytes),
                                    ARGS, client_id="A")  # fmt: skip
    with pytest.raises(ProtocolError, match="--output-dir"):
        split.train_step(_batches(0)[0])
    assert server.steps == 0 and not server._pending
