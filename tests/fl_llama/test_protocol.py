"""The training and generation protocol over the in-process transport: exactness against centralized training,
noise, what crosses the wire and how many bytes, malformed messages, checkpoints, LoRA."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from hf_ext.fl_llama import merge_parts
from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.parallel import build_setup, train, train_centralized
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.testing import tiny_batch
from hf_ext.fl_llama.transport import ProtocolError, decode, encode

L, D = 10, 32


@pytest.fixture
def model():
    return tiny_llama(vocab_size=64, hidden_size=D, num_layers=5, max_positions=64, seed=0)


def _batches(n=5):
    return [tiny_batch(4, L, seed=s, vocab=64) for s in range(n)]


@pytest.mark.parametrize("a,c", [(1, 1), (2, 2)])
def test_sigma_zero_split_training_matches_centralized(model, a, c):
    args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=5, max_grad_norm=None)
    reference = copy.deepcopy(model)
    setup = build_setup(model, a, c, 0.0, args=args)
    split_losses = train(setup, [_batches()])["losses"][0]
    central_losses = train_centralized(reference.train(), _batches(), args)
    assert split_losses == pytest.approx(central_losses, abs=1e-5)
    merged = merge_parts(setup.clients[0].client, setup.server.model).state_dict()
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(merged[name], value, rtol=0, atol=1e-5, msg=name)
    assert setup.server.steps == 5


def test_noise_scale_and_what_the_server_sees(model):
    setup = build_setup(model, 1, 1, noise_scale=0.3)
    seen = {}
    handler = setup.server.handle_bytes

    def spy(data):
        method, tensors, meta = decode(data)
        seen.setdefault(method, (tensors, meta))
        return handler(data)

    setup.clients[0].transport.handler = spy
    batch = tiny_batch(4, L, vocab=64)
    setup.clients[0].train_step(batch)
    tensors, meta = seen["forward"]
    assert set(tensors) == {"hidden", "n_real", "position_ids"}  # no ids, no labels, no mask
    assert tensors["n_real"].tolist() == batch["attention_mask"].sum(-1).tolist()
    assert set(seen["backward"][0]) == {"grad"}
    # σ = s·sqrt(π/2) makes E|ε| = s: recover ε from a second forward of the same (unchanged) head
    client = setup.clients[0]
    assert client.config.noise_std == pytest.approx(0.3 * math.sqrt(math.pi / 2))
    h_sent = client.add_noise(torch.zeros(200, 50, D))
    assert float(h_sent.abs().mean()) == pytest.approx(0.3, rel=0.03)


def test_mask_compression_saves_the_l_by_l_mask(model):
    batch = tiny_batch(4, L, vocab=64)
    sent = {}
    for compress in (True, False):
        setup = build_setup(copy.deepcopy(model), 1, 1, compress_mask=compress)
        setup.clients[0].train_step(batch)
        sent[compress] = setup.clients[0].transport.stats.sent["forward"]
    # B x 1 x L x L float32 replaces B int64 (plus a few header bytes for the tensor name)
    assert sent[False] - sent[True] == pytest.approx(4 * L * L * 4 - 4 * 8, abs=64)


@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_generation_with_and_without_cache(model, noise):
    setup = build_setup(model, 2, 1, noise_scale=noise, compress_mask=False)  # no-cache baseline as FL-GLM: the mask
    split = setup.clients[0]
    prompt = torch.tensor([[4, 8, 15, 16, 23, 42]])
    split.transport.stats.reset()
    cached = split.generate(prompt, max_new_tokens=12)
    stats = split.transport.stats
    assert stats.messages["prefill"] == 1 and stats.messages["decode"] == 11
    per_token, cached_bytes = stats.sent["decode"] / 11, stats.client_bytes
    assert per_token < D * 4 + 400  # one d-vector (plus the header), whatever the context length
    split.transport.stats.reset()
    split.noise_generator.manual_seed(0)
    nocache = split.generate(prompt, max_new_tokens=12, use_cache=False)
    assert split.transport.stats.messages["forward"] == 12
    # without caches every step resends T x d hidden floats and the T x T float mask (T = 6 .. 17)
    resent = sum(t * D * 4 + t * t * 4 for t in range(6, 18))
    # (16 tokens of a d = 32 model: the per-message header is a large share of a cached step; the ratio grows with T)
    assert split.transport.stats.client_bytes >= resent > 4 * cached_bytes
    if noise == 0:
        assert torch.equal(cached, nocache)
        assert torch.equal(cached, model.generate(prompt, max_new_tokens=12, do_sample=False))


def test_malformed_messages_are_rejected_and_state_kept(model):
    setup = build_setup(model, 1, 1)
    server = setup.server
    state = {k: v.clone() for k, v in server.model.state_dict().items()}
    setup.clients[0].handshake()
    bad = [
        ("forward", {"hidden": torch.zeros(2, 5, D + 1), "n_real": torch.tensor([5, 5]),
                     "position_ids": torch.zeros(2, 5, dtype=torch.long)}, "expected size 32 in dim 2"),
        ("forward", {"hidden": torch.zeros(2, 5, D, dtype=torch.float64), "n_real": torch.tensor([5, 5]),
                     "position_ids": torch.zeros(2, 5, dtype=torch.long)}, "dtype torch.float64"),
        ("forward", {"hidden": torch.zeros(2, 5, D), "n_real": torch.tensor([5, 9]),
                     "position_ids": torch.zeros(2, 5, dtype=torch.long)}, "n_real must lie in"),
        ("backward", {"grad": torch.zeros(2, 5, D)}, "without a pending forward"),
        ("decode", {"hidden": torch.zeros(1, 1, D)}, "unknown session"),
        ("steal_labels", {}, "unknown method"),
    ]  # fmt: skip
    for method, tensors, message in bad:
        with pytest.raises(ProtocolError, match=message):
            setup.clients[0].transport.call(method, tensors, {"client_id": "0"})
    reply = decode(server.handle_bytes(b"not a message at all"))
    assert reply[0] == "error" and "not an FL-LLaMA message" in reply[2]["message"]
    assert all(torch.equal(v, server.model.state_dict()[k]) for k, v in state.items())


def test_rejected_step_leaves_client_unchanged_and_checkpoint_resumes(model, tmp_path):
    args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=10)
    setup = build_setup(copy.deepcopy(model), 1, 1, noise_scale=0.01, args=args)
    twin = build_setup(copy.deepcopy(model), 1, 1, noise_scale=0.01, args=args)
    split, b = setup.clients[0], _batches(4)
    for batch in b[:2]:
        split.train_step(batch)
        twin.clients[0].train_step(batch)
    split.save_checkpoint(tmp_path / "ckpt")
    before = {k: v.clone() for k, v in split.client.state_dict().items()}
    original = split.transport.handler
    split.transport.handler = lambda data: encode("error", meta={"kind": "protocol", "message": "shape mismatch"})
    with pytest.raises(ProtocolError, match="shape mismatch"):
        split.train_step(b[2])
    assert all(torch.equal(v, split.client.state_dict()[k]) for k, v in before.items())
    # a new client object resumed from the checkpoint continues exactly like the uninterrupted twin
    resumed = build_setup(copy.deepcopy(model), 1, 1, noise_scale=0.01, args=args).clients[0]
    resumed.transport.handler = original
    resumed.load_checkpoint(tmp_path / "ckpt")
    for batch in b[2:]:
        assert resumed.train_step(batch) == pytest.approx(twin.clients[0].train_step(batch), abs=1e-6)
    for p, q in zip(resumed.client.parameters(), twin.clients[0].client.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)
    with pytest.raises(FileNotFoundError, match="not an FL-LLaMA checkpoint"):
        resumed.load_checkpoint(tmp_path)


def test_lora_on_each_part_trains_only_adapters(model):
    setup = build_setup(model, 1, 1, lora_rank=4, lora_alpha=8.0, lora_dropout=0.0,
                        args=FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=5))  # fmt: skip
    client, server = setup.clients[0], setup.server
    names = [n for n, p in client.client.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    assert any(n.startswith("head_layers.0.") for n in names) and any(n.startswith("tail_layers.") for n in names)
    server_names = [n for n, p in server.model.named_parameters() if p.requires_grad]
    assert server_names and all("lora_" in n for n in server_names)
    frozen = {k: v.clone() for k, v in server.model.state_dict().items() if "lora_" not in k}
    lora_b = {n: p.clone() for n, p in server.model.named_parameters() if "lora_B" in n}
    for batch in _batches(3):
        client.train_step(batch)
    assert all(torch.equal(v, server.model.state_dict()[k]) for k, v in frozen.items())
    assert all(not torch.equal(p, lora_b[n]) for n, p in server.model.named_parameters() if "lora_B" in n)


def _part(name: str) -> str:
    """Which part a client or server parameter belongs to (a = c = 1 and client_stored_blocks = 1 here)."""
    if name.startswith(("head_layers.", "embed_tokens.")):
        return "head"
    return "tail" if name.startswith(("tail_layers.", "norm.", "lm_head.")) else "body"


@pytest.mark.parametrize("parts", [["head", "body", "tail"], ["body", "tail"], ["tail"], ["head", "tail"], ["body"]])
def test_lora_parts_train_listed_adapters_and_freeze_the_rest(model, parts, tmp_path):
    args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=5)
    setup = build_setup(model, 1, 1, 0.0, lora_rank=2, lora_dropout=0.0, lora_parts=parts, args=args)
    client, server = setup.clients[0], setup.server
    named = {**dict(client.client.named_parameters()), **dict(server.model.named_parameters())}
    before = {n: p.detach().clone() for n, p in named.items()}
    # adapters exist exactly on the listed parts, and they are all that requires grad
    assert {_part(n) for n in named if "lora_" in n} == set(parts)
    assert {n for n, p in named.items() if p.requires_grad} == {n for n in named if "lora_" in n}
    for batch in _batches(2):
        client.train_step(batch)
    changed = {n for n, p in named.items() if not torch.equal(p, before[n])}
    # two steps move every adapter of a listed part (lora_B by its gradient, lora_A from step 2) and nothing else:
    # no base weight of any part, no part left out of lora_parts (the server too, e.g. for ["head", "tail"])
    assert changed == {n for n in named if "lora_" in n}
    assert server.steps == 2
    # an empty part's optimiser is skipped but still counts steps, so a checkpoint resumes the schedule
    client.save_checkpoint(tmp_path / "ckpt")
    resumed = build_setup(copy.deepcopy(model), 1, 1, 0.0, lora_rank=2, lora_dropout=0.0, lora_parts=parts,
                          args=args).clients[0]  # fmt: skip
    resumed.load_checkpoint(tmp_path / "ckpt")
    assert resumed.head_optimizer.last_epoch == resumed.tail_optimizer.last_epoch == 2
    for name, p in resumed.client.named_parameters():
        assert torch.equal(p, dict(client.client.named_parameters())[name]), name


def test_lora_parts_are_ignored_without_lora(model):
    """`lora_rank = 0`: every part is fully fine-tuned whatever `lora_parts` says (σ = 0 split == centralized)."""
    args = FlLlamaTrainingArguments(learning_rate=1e-2, max_steps=3, max_grad_norm=None)
    reference = copy.deepcopy(model)
    setup = build_setup(model, 1, 1, 0.0, args=args, lora_parts=["tail"])
    split_losses = train(setup, [_batches(3)])["losses"][0]
    assert split_losses == pytest.approx(train_centralized(reference.train(), _batches(3), args), abs=1e-5)
    merged = merge_parts(setup.clients[0].client, setup.server.model).state_dict()
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(merged[name], value, rtol=0, atol=1e-5, msg=name)


@pytest.mark.parametrize("method,name,match", [
    ("forward", "hidden", r"reply to 'forward' is malformed: tensor 'hidden' has shape \(4, 10, 33\)"),
    ("forward", "dtype", r"reply to 'forward' is malformed: tensor 'hidden' has dtype torch.int64"),
    ("backward", "grad", r"reply to 'backward' is malformed: tensor 'grad' has shape \(4, 9, 32\)"),
    ("forward", "missing", r"reply to 'forward' is malformed: message lacks tensor 'hidden'"),
])  # fmt: skip
def test_client_rejects_malformed_server_replies(model, method, name, match):
    setup = build_setup(model, 1, 1)
    split, handler = setup.clients[0], setup.server.handle_bytes

    def fake_server(data):  # answers `method` like the real server, then corrupts the reply
        reply = handler(data)
        got, tensors, meta = decode(reply)
        if got != method:
            return reply
        key = "grad" if method == "backward" else "hidden"
        t = tensors[key]
        bad = {"hidden": {key: torch.zeros(t.shape[0], t.shape[1], t.shape[2] + 1)},
               "grad": {key: t[:, :-1]}, "dtype": {key: t.long()}, "missing": {}}[name]  # fmt: skip
        return encode(got, bad, meta)

    split.transport.handler = fake_server
    before = {k: v.clone() for k, v in split.client.state_dict().items()}
    with pytest.raises(ProtocolError, match=match):
        split.train_step(tiny_batch(4, L, vocab=64))
    assert all(torch.equal(v, split.client.state_dict()[k]) for k, v in before.items())


def test_client_rejects_a_malformed_decode_reply(model):
    setup = build_setup(model, 1, 1)
    split, handler = setup.clients[0], setup.server.handle_bytes

    def fake_server(data):  # a decode reply of two positions instead of one
        got, tensors, meta = decode(handler(data))
        return encode(got, {"hidden": tensors["hidden"].repeat(1, 2, 1)} if got == "decode" else tensors, meta)

    split.transport.handler = fake_server
    with pytest.raises(ProtocolError, match=r"reply to 'decode' is malformed: .*expected size 1 in dim 1"):
        split.generate(torch.tensor([[4, 8, 15]]), max_new_tokens=3)


def test_logits_to_keep_takes_the_loss_over_the_kept_positions_only(model):
    """The cloze runs keep two positions (the answer's logit and its target): with every other label -100 the loss
    and the training step equal the full-sequence ones; with labels everywhere the loss is the mean over the kept
    positions' next-token targets, not the kept logits paired with the start of the label row."""
    import torch.nn.functional as F

    batch = tiny_batch(4, L, seed=3, vocab=64)
    cloze = dict(batch, labels=torch.full_like(batch["labels"], -100))
    cloze["labels"][:, -1] = batch["input_ids"][:, -1]
    a, b = build_setup(copy.deepcopy(model), 1, 1, 0.0), build_setup(copy.deepcopy(model), 1, 1, 0.0)
    full = a.clients[0](cloze["input_ids"], cloze["attention_mask"], cloze["labels"])
    kept = b.clients[0](cloze["input_ids"], cloze["attention_mask"], cloze["labels"], logits_to_keep=2)
    assert kept.logits.shape[1] == 2
    torch.testing.assert_close(kept.loss, full.loss, rtol=0, atol=1e-6)
    torch.testing.assert_close(kept.logits, full.logits[:, -2:], rtol=0, atol=1e-6)
    la = [a.clients[0].train_step(cloze) for _ in range(2)]
    lb = [b.clients[0].train_step(cloze, logits_to_keep=2) for _ in range(2)]
    assert lb == pytest.approx(la, abs=1e-6)
    for (name, p), q in zip(a.clients[0].client.named_parameters(), b.clients[0].client.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=1e-6, msg=name)
    # labels at every position: the kept loss is CE(logits[:, -3], ids[:, -2]) and CE(logits[:, -2], ids[:, -1])
    out = b.clients[0](batch["input_ids"], batch["attention_mask"], batch["labels"], logits_to_keep=3)
    want = F.cross_entropy(out.logits[:, :-1].reshape(-1, 64), batch["labels"][:, -2:].reshape(-1))
    torch.testing.assert_close(out.loss, want, rtol=0, atol=1e-6)
