"""transformers drives the split model: `generate` (batch > 1 with left padding, generation_config, streamer, top_k,
EOS lists, the split KV cache and its server session) gives exactly the unsplit model's tokens, and `Trainer` saves
checkpoints of a split model with tied embeddings."""

from __future__ import annotations

import pytest
import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
from transformers.generation.streamers import BaseStreamer

from hf_ext.fl_llama.parallel import build_setup
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.split_model import FlLlamaSplitCache
from hf_ext.fl_llama.testing import tiny_batch, tiny_llama_config

D = 32


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=64, hidden_size=D, num_layers=5, max_positions=64, seed=0)


def _left_padded():
    ids = torch.tensor([[0, 0, 0, 5, 9, 11], [4, 8, 15, 16, 23, 42], [0, 7, 3, 30, 31, 9]])
    return ids, (ids != 0).long()


class _Collect(BaseStreamer):
    def __init__(self):
        self.chunks = []

    def put(self, value):
        self.chunks.append(value.clone())

    def end(self):
        self.chunks.append("end")


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generate_equals_the_unsplit_model_on_a_left_padded_batch(model, use_cache):
    setup = build_setup(model, 2, 1)
    split, server = setup.clients[0], setup.server
    ids, mask = _left_padded()
    cfg = GenerationConfig(max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=0)
    streamer = _Collect()
    out = split.generate(input_ids=ids, attention_mask=mask, generation_config=cfg, streamer=streamer,
                         use_cache=use_cache)  # fmt: skip
    ref = model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)
    assert out.shape == (3, 16) and torch.equal(out, ref)
    # the streamer saw the prompt, then each new token of every row, then the end
    assert torch.equal(streamer.chunks[0], ids) and streamer.chunks[-1] == "end"
    assert torch.equal(torch.stack(streamer.chunks[1:-1], 1), out[:, 6:])
    stats = split.transport.stats.messages
    if use_cache:  # the prompt once, then one B x 1 x d message per token, and the server session is freed
        assert stats["prefill"] == 1 and stats["decode"] == 9 and stats["end"] == 1 and stats.get("forward", 0) == 0
    else:
        assert stats["forward"] == 10 and "prefill" not in stats
    assert not server._sessions


def test_top_k_one_sampling_is_greedy_and_top_k_is_passed_through(model):
    split = build_setup(model, 1, 1).clients[0]
    ids, mask = _left_padded()
    greedy = split.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False, eos_token_id=None)
    torch.manual_seed(0)
    top1 = split.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=True, top_k=1,
                          temperature=5.0, eos_token_id=None)  # fmt: skip
    assert torch.equal(top1, greedy)  # top_k = 1 leaves only the arg-max, whatever the temperature
    torch.manual_seed(0)
    free = split.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=True, top_k=0,
                          temperature=5.0, eos_token_id=None)  # fmt: skip
    assert not torch.equal(free, greedy)  # without the top-k cut, a hot temperature samples other tokens


def test_eos_comes_from_the_generation_config_and_may_be_a_list(model):
    split = build_setup(model, 1, 1).clients[0]
    prompt = torch.tensor([[4, 8, 15, 16]])
    free = split.generate(prompt, max_new_tokens=8, do_sample=False, eos_token_id=None)
    stop = int(free[0, 4 + 3])  # the 4th generated token
    earlier = set(free[0, 4:7].tolist())
    assert stop not in earlier  # (so generation must stop exactly there)
    split.generation_config.eos_token_id = [63, stop]  # a list of EOS ids, the second one is hit
    out = split.generate(prompt, max_new_tokens=8, do_sample=False)
    assert torch.equal(out, free[:, :8])
    model.generation_config.eos_token_id = [63, stop]
    try:
        assert torch.equal(out, model.generate(prompt, max_new_tokens=8, do_sample=False))
    finally:
        model.generation_config.eos_token_id = 2


def test_a_caller_owned_cache_keeps_its_server_session_until_ended(model):
    setup = build_setup(model, 1, 1)
    split, server = setup.clients[0], setup.server
    cache = FlLlamaSplitCache(session="chat")
    prompt = torch.tensor([[4, 8, 15, 16]])
    out = split.generate(prompt, max_new_tokens=3, do_sample=False, eos_token_id=None, cache=cache)
    key = next(iter(server._sessions))
    assert key[1] == "chat" and server._sessions[key][1].shape == (1, 6)  # prompt + 2 decoded tokens cached
    assert cache.get_seq_length() == 6 and out.shape == (1, 7)
    split.end_session(cache)
    assert not server._sessions


def test_right_padding_is_refused_with_a_clear_error(model):
    split = build_setup(model, 1, 1).clients[0]
    ids = torch.tensor([[5, 9, 11, 0], [4, 8, 15, 16]])
    with pytest.raises(ValueError, match="must be left padded"):
        split.generate(input_ids=ids, attention_mask=(ids != 0).long(), max_new_tokens=2)
    with pytest.raises(ValueError, match="must be left padded"):
        split(ids, (ids != 0).long())


def test_server_decode_checks_every_rows_position(model):
    setup = build_setup(model, 1, 1)
    server = setup.server
    n_real = torch.tensor([2, 4])
    server.handle("prefill", {"hidden": torch.randn(2, 4, D), "n_real": n_real}, {"session": "s"})
    from hf_ext.fl_llama.transport import ProtocolError

    with pytest.raises(ProtocolError, match=r"decode position \[4, 4\] does not follow the cached \[2, 4\]"):
        server.handle("decode", {"hidden": torch.randn(2, 1, D), "position_ids": torch.tensor([[4], [4]])},
                      {"session": "s"})  # fmt: skip
    out, _ = server.handle("decode", {"hidden": torch.randn(2, 1, D), "position_ids": torch.tensor([[2], [4]])},
                           {"session": "s"})  # fmt: skip
    assert out["hidden"].shape == (2, 1, D) and server._sessions[("0", "s")][1].sum(-1).tolist() == [3, 5]


def test_trainer_saves_and_resumes_a_split_model_with_tied_embeddings(tmp_path):
    """SmolLM2 ties `lm_head` to the embeddings: a checkpoint stores the matrix once, and resuming continues."""
    from datasets import Dataset
    from safetensors.torch import load_file
    from transformers import Trainer, TrainingArguments

    from hf_ext.fl_llama import split_llama
    from hf_ext.fl_llama.server import SplitServer
    from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
    from hf_ext.fl_llama.transport import InProcessTransport

    torch.manual_seed(0)
    full = LlamaForCausalLM(LlamaConfig(**{**tiny_llama_config(), "tie_word_embeddings": True}))
    client, server_model = split_llama(full, 1, 1)
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(SplitServer(server_model).handle_bytes))
    assert split.client.lm_head.weight is split.client.embed_tokens.weight
    ds = Dataset.from_dict({k: v.tolist() for k, v in tiny_batch(8, seed=1).items()})

    def trainer(steps):
        args = TrainingArguments(output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=4,
                                 learning_rate=1e-2, use_cpu=True, report_to="none", save_strategy="steps",
                                 save_steps=1, disable_tqdm=True, dataloader_num_workers=0, seed=0)  # fmt: skip
        return Trainer(model=split, args=args, train_dataset=ds)

    trainer(1).train()
    saved = load_file(str(tmp_path / "checkpoint-1" / "model.safetensors"))
    assert "client.embed_tokens.weight" in saved and "client.lm_head.weight" not in saved  # stored once
    for name, value in split.client.state_dict().items():
        torch.testing.assert_close(saved.get(f"client.{name}", saved["client.embed_tokens.weight"]), value,
                                   rtol=0, atol=0, msg=name)  # fmt: skip
    trainer(2).train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))
    assert (tmp_path / "checkpoint-2" / "model.safetensors").is_file()
    assert split.client.lm_head.weight is split.client.embed_tokens.weight  # still tied after the reload
