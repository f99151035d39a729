"""The server as a training party: checkpoints that really resume, the (a, c, model hash, schedule) handshake,
NaN/Inf gradients refused with the state untouched, and closed-form checks of the parallel modes (FedAvg of the
sub-servers, client-batch reply order) and of the DP per-sample clip."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from hf_ext.fl_llama import split_llama
from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.parallel import build_setup
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.server import SplitServer
from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
from hf_ext.fl_llama.testing import hello_meta, tiny_batch
from hf_ext.fl_llama.transport import InProcessTransport, ProtocolError, decode, encode

D = 32


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=64, seed=0)


def _pair(model, server_args=None, client_args=None, a=1, c=1, stored=None, **server_kw):
    client, server_model = split_llama(copy.deepcopy(model), a, c, noise_scale=0.01, client_stored_blocks=stored)
    server = SplitServer(server_model, server_args, **server_kw)
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(server.handle_bytes), client_args)
    return split, server


def _batches(n):
    return [tiny_batch(4, 8, seed=s, vocab=64) for s in range(n)]


def test_resume_from_both_checkpoints_equals_the_uninterrupted_run(model, tmp_path):
    args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=6, seed=1)
    straight, straight_server = _pair(model, args, args)
    straight_losses = [straight.train_step(b) for b in _batches(5)]

    first, first_server = _pair(model, args, args, output_dir=tmp_path / "server")
    for b in _batches(3):
        first.train_step(b)
    assert first.save_server() == "checkpoint-3"
    first.save_checkpoint(tmp_path / "client")

    resumed, resumed_server = _pair(model, args, args)  # fresh parts from the original weights
    assert resumed_server.load_checkpoint(tmp_path / "server" / "checkpoint-3")["steps"] == 3
    resumed.load_checkpoint(tmp_path / "client")
    assert [resumed.train_step(b) for b in _batches(5)[3:]] == pytest.approx(straight_losses[3:], abs=1e-6)
    for name, value in straight_server.model.state_dict().items():
        torch.testing.assert_close(resumed_server.model.state_dict()[name], value, rtol=0, atol=0, msg=name)
    assert resumed_server._main.optimizer.last_epoch == 5
    # the schedule position was restored: the learning rate is the one of step 5 of 6
    assert resumed_server._main.optimizer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * (1 - 5 / 6))


def test_saves_are_atomic_safetensors_and_bounded(model, tmp_path):
    args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=6)
    split, server = _pair(model, args, args, output_dir=tmp_path, save_total_limit=2)
    for b in _batches(3):
        split.train_step(b)
        split.save_server()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-3"]
    files = {p.name for p in (tmp_path / "checkpoint-3").iterdir()}
    assert {"server.safetensors", "optimizer.safetensors", "trainer_state.json"} <= files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    with pytest.raises(ValueError, match="saved with a=1, this server has 2"):
        SplitServer(split_llama(copy.deepcopy(model), 2, 1)[1], args).load_checkpoint(tmp_path / "checkpoint-3")


def test_handshake_refuses_a_mismatched_partition_or_model(model):
    split, server = _pair(model, stored=2)
    server.model.set_partition(2, 1)  # the server was restarted with a = 2 under an a = 1 client
    with pytest.raises(ProtocolError, match=r"client's a is 1, this server's is 2"):
        split.train_step(_batches(1)[0])
    with pytest.raises(ProtocolError, match=r"client's a is 1, this server's is 2"):
        split.generate(torch.tensor([[4, 5, 6]]), max_new_tokens=2)
    other = tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=64, seed=1)
    stranger = FlLlamaSplitForCausalLM(split_llama(other, 1, 1)[0], InProcessTransport(_pair(model)[1].handle_bytes))
    with pytest.raises(ProtocolError, match="client's model_hash"):
        stranger.train_step(_batches(1)[0])


def test_the_schedule_length_is_agreed_at_the_handshake(model):
    fixed = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=10)
    split, server = _pair(model, fixed, FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=20))
    with pytest.raises(ProtocolError, match=r"max_steps=10, the client's over max_steps=20"):
        split.train_step(_batches(1)[0])
    assert server.steps == 0
    # a server started without a length takes the first training client's, and its schedule follows it
    split, server = _pair(model, None, FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=2))
    split.train_step(_batches(1)[0])
    assert server.args.max_steps == 2 and server._main.optimizer.scheduler.total_iters == 2
    late = FlLlamaSplitForCausalLM(split_llama(copy.deepcopy(model), 1, 1, noise_scale=0.01)[0],
                                   InProcessTransport(server.handle_bytes),
                                   FlLlamaTrainingArguments(max_steps=5), client_id="late")  # fmt: skip
    with pytest.raises(ProtocolError, match=r"max_steps=2, the client's over max_steps=5"):
        late.train_step(_batches(1)[0])
    split.train_step(_batches(2)[1])
    with warnings.catch_warnings(record=True) as caught:  # step 3 of a 2-step schedule: said, not silent
        warnings.simplefilter("always")
        split.train_step(_batches(3)[2])
    assert any("past max_steps=2" in str(w.message) for w in caught)


def test_nan_or_inf_gradients_are_refused_and_the_server_is_untouched(model):
    split, server = _pair(model, FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=4),
                          FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=4))  # fmt: skip
    split.train_step(_batches(1)[0])
    before = {k: v.clone() for k, v in server.model.state_dict().items()}
    opt_before = server._main.optimizer.state_tensors("body")
    batch = _batches(2)[1]
    for bad in (float("nan"), float("inf")):
        out = split(batch["input_ids"], batch["attention_mask"], batch["labels"])
        grad = torch.zeros(out.logits.shape[0], out.logits.shape[1], D)
        grad[0, 0, 0] = bad
        with pytest.raises(ProtocolError, match=r"'grad' holds 1 NaN/Inf"):
            split.transport.call("backward", {"grad": grad}, {"client_id": "0"})
        assert "0" in server._pending  # the forward still waits for a valid gradient
        split.zero_grad(set_to_none=True)
    assert server.steps == 1
    for k, v in before.items():
        assert torch.equal(server.model.state_dict()[k], v), k
    for k, v in opt_before.items():
        assert torch.equal(server._main.optimizer.state_tensors("body")[k], v), k
    out, _ = split.transport.call("backward", {"grad": torch.zeros(4, 8, D)}, {"client_id": "0"})
    assert out["grad"].shape == (4, 8, D) and server.steps == 2  # and then a valid one is accepted


def test_fedavg_of_sub_servers_is_the_weighted_mean_broadcast_to_all(model):
    setup = build_setup(model, 1, 1, num_clients=3, mode="server_hierarchical")
    server = setup.server
    for i, cid in enumerate(["0", "1", "2"]):
        body = server._body_for(cid)
        with torch.no_grad():
            for p in body.model.parameters():
                p.fill_(float(i + 1))  # sub-server i holds the constant i + 1
    server.aggregate({"0": 1.0, "1": 1.0, "2": 2.0})
    expected = (1 * 1 + 1 * 2 + 2 * 3) / 4  # 2.25
    for body in [server._main] + [server._subs[k] for k in "012"]:
        for name, p in body.model.named_parameters():
            assert torch.allclose(p, torch.full_like(p, expected)), name
    for cid, value in (("0", 1.0), ("1", 5.0), ("2", 3.0)):
        with torch.no_grad():
            for p in server._body_for(cid).model.parameters():
                p.fill_(value)
    server.aggregate()  # unweighted: the plain mean 3.0
    assert all(torch.allclose(p, torch.full_like(p, 3.0)) for p in server._main.model.parameters())


def test_client_batch_replies_go_to_their_own_clients_in_order(model):
    setup = build_setup(model, 1, 1, num_clients=1)
    server = setup.server
    for cid in ("a", "b"):
        server.handle("hello", {}, {**hello_meta(server.model), "client_id": cid})
    g = torch.Generator().manual_seed(0)
    msgs = []
    for cid, (b, length) in zip(("a", "b"), ((1, 6), (3, 6))):  # different sizes: a swapped reply cannot fit
        hidden = torch.randn(b, length, D, generator=g)
        msgs.append(
            (
                cid,
                hidden,
                {
                    "hidden": hidden,
                    "n_real": torch.tensor([length - i for i in range(b)]),
                    "position_ids": torch.arange(length).expand(b, -1).contiguous(),
                },
            )
        )
    alone = {cid: server.handle("forward", t, {"client_id": cid, "train": False})[0]["hidden"] for cid, _, t in msgs}
    replies = server.handle_batch([encode("forward", t, {"client_id": cid}) for cid, _, t in msgs])
    for (cid, _, _), reply in zip(msgs, replies):
        torch.testing.assert_close(decode(reply)[1]["hidden"], alone[cid], rtol=0, atol=1e-6)
    grads = [torch.randn(1, 6, D, generator=g), torch.randn(3, 6, D, generator=g)]
    back = server.handle_batch([encode("backward", {"grad": gr}, {"client_id": cid})
                                for (cid, _, _), gr in zip(msgs, grads)])  # fmt: skip
    assert [decode(r)[1]["grad"].shape[0] for r in back] == [1, 3] and server.steps == 1
    with pytest.raises(ProtocolError, match="before a training 'hello'"):
        server.handle_batch([encode("forward", msgs[0][2], {"client_id": "stranger"})])


def test_client_batch_training_matches_each_clients_own_loss(model):
    """Round 1 of client-batch: B has not stepped yet, so each client's loss is its loss against the initial B."""
    args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=4)
    batches = [[tiny_batch(2 + m, 8, seed=10 * m, vocab=64)] for m in range(2)]
    expected = []
    for m in range(2):
        reference = build_setup(copy.deepcopy(model), 1, 1, args=args).clients[0]
        with torch.no_grad():
            b = batches[m][0]
            expected.append(float(reference(b["input_ids"], b["attention_mask"], b["labels"]).loss))
    from hf_ext.fl_llama.parallel import train

    setup = build_setup(copy.deepcopy(model), 1, 1, num_clients=2, mode="client_batch", args=args)
    losses = train(setup, batches, mode="client_batch")["losses"]
    assert [ls[0] for ls in losses] == pytest.approx(expected, abs=1e-5)


def test_dp_per_sample_clip_then_noise(model):
    args = FlLlamaTrainingArguments(dp_gradient=True, dp_grad_clip=0.5)
    split, _ = _pair(model, client_args=args)
    split.client.config.noise_scale = 0.0  # σ = 0: the clip alone
    grad = torch.zeros(3, 4, D)
    grad[0, 0, 0] = 2.0  # norm 2 -> scaled to 0.5
    grad[1, :, :] = 0.01  # norm 0.01 * sqrt(128) ~ 0.113 -> unchanged
    grad[2, 1, :2] = torch.tensor([3.0, 4.0])  # norm 5 -> scaled to 0.5, direction kept
    out = split.privatize_gradient(grad)
    assert out.flatten(1).norm(dim=1).tolist() == pytest.approx([0.5, 0.01 * (4 * D) ** 0.5, 0.5], rel=1e-6)
    torch.testing.assert_close(out[1], grad[1])
    torch.testing.assert_close(out[2, 1, :2], torch.tensor([0.3, 0.4]))
    split.client.config.noise_scale = 0.2  # then N(0, σ²) with the client's σ = s·sqrt(π/2) on every entry
    noisy = split.privatize_gradient(torch.zeros(64, 16, D))
    assert noisy.std().item() == pytest.approx(0.2 * (torch.pi / 2) ** 0.5, rel=0.03)
    assert abs(noisy.mean().item()) < 0.01
