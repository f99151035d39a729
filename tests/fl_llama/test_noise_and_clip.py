"""Issue 40: the noise is in every message that carries `h̃_A` (training forward, prefill, every decode step;
in-process and over gRPC), and the global-norm clip makes `s = 0` equal centralised training with clipping on.

The noise check compares what arrives at the server with the clean `h_A` that part A computed for the same call:
`std(h̃_A − h_A)` must be `σ = s·sqrt(π/2)` (within sampling error) and the noise must be fresh in every message. A
client that sent `h_A` unnoised on any path would give 0 there and fail.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from hf_ext.fl_llama import merge_parts, split_llama
from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.parallel import build_setup, train, train_centralized
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.server import SplitServer
from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
from hf_ext.fl_llama.testing import tiny_batch
from hf_ext.fl_llama.transport import GrpcTransport, InProcessTransport, decode, serve_grpc

D, S = 32, 0.5
SIGMA = S * math.sqrt(math.pi / 2)


@pytest.fixture
def model():
    return tiny_llama(vocab_size=64, hidden_size=D, num_layers=5, max_positions=64, seed=0)


def _record(split, server, over_grpc):
    """Wires `split` to `server` through a spy that keeps every message's `hidden`, and records the clean `h_A` of
    every call of part A; returns (sent, clean) lists of (method, tensor) and a closer."""
    sent, clean = [], []

    def spy(data, *principal):
        method, tensors, _ = decode(data)
        if "hidden" in tensors:
            sent.append((method, tensors["hidden"].clone()))
        return server.handle_bytes(data, *principal)

    closer = lambda: None  # noqa: E731
    if over_grpc:
        grpc_server, port = serve_grpc(spy, insecure=True)
        split.transport = GrpcTransport(f"127.0.0.1:{port}", wait_ready=10)
        closer = lambda: grpc_server.stop(grace=0.5)  # noqa: E731
    else:
        split.transport = InProcessTransport(spy)
    head = split.client.head

    def recording_head(*args, **kwargs):
        out = head(*args, **kwargs)
        clean.append(out.detach().clone())
        return out

    split.client.head = recording_head
    return sent, clean, closer


@pytest.mark.parametrize("over_grpc", [False, True], ids=["in_process", "grpc"])
def test_noise_is_in_every_message_train_prefill_decode(model, over_grpc):
    client, server_model = split_llama(copy.deepcopy(model), 1, 1, noise_scale=S)
    server = SplitServer(server_model, FlLlamaTrainingArguments(learning_rate=1e-3))
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(server.handle_bytes), FlLlamaTrainingArguments())
    sent, clean, close = _record(split, server, over_grpc)
    try:
        split.train_step(tiny_batch(4, 10, seed=1, vocab=64))
        prompt = torch.tensor([[0, 0, 5, 9, 11], [3, 4, 5, 6, 7]])
        split.generate(prompt, attention_mask=(prompt != 0).long(), max_new_tokens=8, do_sample=False,
                       pad_token_id=0, eos_token_id=None)  # fmt: skip
    finally:
        close()
    methods = [m for m, _ in sent]
    assert methods[0] == "forward" and methods[1] == "prefill" and methods[2:] == ["decode"] * 7
    assert len(clean) == len(sent)
    by_method: dict[str, list[torch.Tensor]] = {}
    for (method, h_tilde), h in zip(sent, clean):
        assert h_tilde.shape == h.shape
        diff = (h_tilde - h).flatten()
        assert diff.abs().min() > 0, method  # every element is noised, in every message
        by_method.setdefault(method, []).append(diff)
    for method, diffs in by_method.items():
        eps = torch.cat(diffs)
        n = eps.numel()  # the sample SD of n normal draws has a relative SE of about 1/sqrt(2n)
        assert abs(float(eps.std()) / SIGMA - 1) < 5 / math.sqrt(2 * n), (method, float(eps.std()), n)
        assert abs(float(eps.mean())) < 5 * SIGMA / math.sqrt(n), method
    assert not torch.equal(by_method["decode"][0], by_method["decode"][1])  # fresh noise per step, not one offset


def test_global_clip_makes_sigma_zero_equal_centralized_with_clipping(model):
    """A clip that bites (max_grad_norm far below the gradient norm): the global clip over A, B and C reproduces the
    centralised run; the official per-part clip does not (so this test can tell them apart)."""
    batches = [tiny_batch(4, 10, seed=s, vocab=64) for s in range(5)]
    central = copy.deepcopy(model).train()
    central_losses = train_centralized(
        central, batches, FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=5, max_grad_norm=0.05)
    )

    gaps = {}
    for global_clip in (True, False):
        args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=5, max_grad_norm=0.05, global_clip=global_clip)
        setup = build_setup(copy.deepcopy(model), 1, 1, 0.0, args=args)
        losses = train(setup, [batches])["losses"][0]
        merged = merge_parts(setup.clients[0].client, setup.server.model).state_dict()
        gaps[global_clip] = max(
            max(abs(a - b) for a, b in zip(losses, central_losses)),
            max(float((merged[k] - v).abs().max()) for k, v in central.state_dict().items()),
        )
        assert setup.server.steps == 5
    assert gaps[True] < 1e-5, gaps
    assert gaps[False] > 1e-4, gaps  # the per-part clip is a different optimiser


def test_global_clip_step_message_is_checked(model):
    from hf_ext.fl_llama.transport import ProtocolError

    setup = build_setup(copy.deepcopy(model), 1, 1, 0.0, args=FlLlamaTrainingArguments(global_clip=True))
    split = setup.clients[0]
    split.handshake()
    with pytest.raises(ProtocolError, match="without a global-clip backward"):
        split.transport.call("step", {}, {"client_id": "0", "clip_coef": 0.5})
    for bad in (0.0, 1.5, "0.5", None, float("nan")):
        with pytest.raises(ProtocolError, match="clip_coef"):
            split.transport.call("step", {}, {"client_id": "0", "clip_coef": bad})
    split.train_step(tiny_batch(2, 6, vocab=64))
    assert setup.server.steps == 1 and not setup.server._awaiting_step and setup.server._turn_owner is None
