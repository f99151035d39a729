"""Client and server as two processes on 127.0.0.1 (gRPC): 3 training steps and 16 generated tokens with KV caches
must match the in-process run exactly; a server that dies mid-run gives a clear error and the client resumes from
its last checkpoint against a fresh server."""

from __future__ import annotations

import pytest
import torch

from hf_ext.fl_llama import FlLlamaClientModel, FlLlamaServerModel, split_llama
from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.auth import generate_tokens, read_token
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.server import SplitServer
from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
from hf_ext.fl_llama.testing import start_serve, tiny_batch
from hf_ext.fl_llama.transport import GrpcTransport, InProcessTransport, PeerDisconnected

ARGS = dict(learning_rate=1e-2, max_steps=10, seed=3)


def _start_server(server_dir, tokens, *extra, timeout=240):
    return start_serve(
        server_dir,
        "--lr",
        "1e-2",
        "--max-steps",
        "10",
        "--tokens",
        tokens / "server_tokens.json",
        *extra,
        timeout=timeout,
    )


def _run(split: FlLlamaSplitForCausalLM, batches, prompt):
    losses = [split.train_step(b) for b in batches]
    tokens = split.generate(prompt, max_new_tokens=16, use_cache=True)
    return losses, tokens


@pytest.fixture(scope="module")
def saved_parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("fl_llama_parts")
    model = tiny_llama(vocab_size=64, hidden_size=32, num_layers=4, max_positions=64, seed=0)
    client, server = split_llama(model, 1, 2, noise_scale=0.01)
    client.save_pretrained(root / "client")
    server.save_pretrained(root / "server")
    generate_tokens(root / "tokens", ["alice"])  # the documented flow: `hf-ext fl_llama tokens DIR --clients alice`
    return root


def test_two_processes_match_in_process_and_resume_from_the_servers_checkpoint(saved_parts, tmp_path):
    batches = [tiny_batch(4, 8, seed=s, vocab=64) for s in range(4)]
    prompt = torch.tensor([[5, 9, 11, 3, 17]])
    args = FlLlamaTrainingArguments(**ARGS)

    ref_server = SplitServer(FlLlamaServerModel.from_pretrained(saved_parts / "server"), args)
    ref = FlLlamaSplitForCausalLM(FlLlamaClientModel.from_pretrained(saved_parts / "client"),
                                  InProcessTransport(ref_server.handle_bytes), args)  # fmt: skip
    ref_losses, ref_tokens = _run(ref, batches[:3], prompt)

    token = read_token(saved_parts / "tokens" / "clients" / "alice.token")
    out_dir = tmp_path / "server_out"
    proc, port = _start_server(saved_parts / "server", saved_parts / "tokens", "--output-dir", out_dir)
    try:
        transport = GrpcTransport(f"127.0.0.1:{port}", token=token)
        split = FlLlamaSplitForCausalLM(FlLlamaClientModel.from_pretrained(saved_parts / "client"), transport, args)
        losses, tokens = _run(split, batches[:3], prompt)
        assert losses == pytest.approx(ref_losses, abs=1e-6)
        assert torch.equal(tokens, ref_tokens)
        for (name, p), q in zip(split.client.named_parameters(), ref.client.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-6, msg=name)
        # bytes were counted per message, in both directions, and generation sent one vector per new token
        stats = transport.stats
        assert stats.messages["forward"] == 3 and stats.messages["backward"] == 3 and stats.messages["decode"] == 15
        assert stats.sent["decode"] < 15 * (32 * 4 + 600)
        assert stats.as_dict() == ref.transport.stats.as_dict()

        # both parties checkpoint; then the server dies mid-run: a clear error, the client's weights untouched
        assert split.save_server() == "checkpoint-3"
        split.save_checkpoint(tmp_path / "ckpt")
        saved = {k: v.clone() for k, v in split.client.state_dict().items()}
        proc.terminate()
        proc.wait(timeout=30)
        with pytest.raises(PeerDisconnected, match="disconnected|no FL-LLaMA server"):
            split.train_step(batches[3])
        assert all(torch.equal(v, split.client.state_dict()[k]) for k, v in saved.items())
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sorted(p.name for p in out_dir.iterdir()) == ["checkpoint-3"]
    # resume: a fresh client from its checkpoint and a fresh server process from part B's checkpoint continue
    # exactly like the uninterrupted in-process pair (its 4th step: same loss, same weights on both sides)
    ref_loss4 = ref.train_step(batches[3])
    proc2, port2 = _start_server(saved_parts / "server", saved_parts / "tokens", "--output-dir", out_dir,
                                 "--resume-from", out_dir / "checkpoint-3")  # fmt: skip
    try:
        resumed = FlLlamaSplitForCausalLM(FlLlamaClientModel.from_pretrained(saved_parts / "client"),
                                          GrpcTransport(f"127.0.0.1:{port2}", token=token), args)  # fmt: skip
        resumed.load_checkpoint(tmp_path / "ckpt")
        assert resumed.steps == 3
        assert resumed.train_step(batches[3]) == pytest.approx(ref_loss4, abs=1e-6)
        for (name, p), q in zip(resumed.client.named_parameters(), ref.client.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-6, msg=name)
        proc2.terminate()  # on SIGTERM after a step the server saves once more
        proc2.wait(timeout=60)
    finally:
        if proc2.poll() is None:
            proc2.kill()
    reloaded = SplitServer(FlLlamaServerModel.from_pretrained(saved_parts / "server"))
    assert reloaded.load_checkpoint(out_dir / "checkpoint-4")["steps"] == 4 and reloaded.args.max_steps == 10
    for name, value in ref_server.model.state_dict().items():
        torch.testing.assert_close(reloaded.model.state_dict()[name], value, rtol=0, atol=1e-6, msg=name)
