"""The split itself: the parts compute exactly the centralized LlamaForCausalLM, re-partition the same stored
weights, round-trip as separate artifacts, and reject bad partitions."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from hf_ext.fl_llama import FlLlamaClientConfig, FlLlamaServerModel, merge_parts, split_llama
from hf_ext.fl_llama.modeling_fl_llama import (
    causal_mask_4d,
    padding_mask_from_counts,
    position_ids_from_mask,
    to_additive,  # fmt: skip
)
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.testing import tiny_batch, tiny_llama_config


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=64, hidden_size=32, num_layers=6, max_positions=64, seed=0)


def _split_logits(client, server, batch):
    mask = batch["attention_mask"].bool()
    m4, pos = causal_mask_4d(mask, mask.shape[1]), position_ids_from_mask(mask)
    h = client.head(batch["input_ids"], m4, pos)
    rebuilt = causal_mask_4d(padding_mask_from_counts(mask.sum(-1), mask.shape[1]), mask.shape[1])
    return client.tail(server.body(h, rebuilt, pos), m4, pos).logits


@pytest.mark.parametrize("a,c", [(1, 1), (2, 3), (4, 1)])
def test_split_equals_centralized_on_real_tokens(model, a, c):
    batch = tiny_batch(4, 10, vocab=64)
    client, server = split_llama(model, a, c)
    mask = batch["attention_mask"].bool()
    with torch.no_grad():
        ref = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    position_ids=position_ids_from_mask(mask)).logits  # fmt: skip
        out = _split_logits(client, server, batch)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)  # pad rows included


def test_mask_compression_rebuilds_the_same_mask():
    mask = tiny_batch(4, 7)["attention_mask"].bool()
    assert torch.equal(padding_mask_from_counts(mask.sum(-1), 7), mask)
    m4 = causal_mask_4d(mask, 7)
    assert m4.shape == (4, 1, 7, 7) and m4.dtype == torch.bool
    assert not m4[1, 0, 3, 4] and m4[1, 0, 4, 1]  # causal; real key visible
    assert not m4[2, 0, 5, 1]  # padded key column hidden from a real query
    assert not m4[3, 0, 0].any()  # a pad query sees nothing (SDPA gives 0, as in the centralized model)
    additive = to_additive(m4)
    assert additive[1, 0, 4, 1] == 0 and additive[1, 0, 3, 4] == torch.finfo(torch.float32).min


def test_repartition_reuses_stored_weights(model):
    batch = tiny_batch(2, 8, vocab=64)
    client, server = split_llama(model, 1, 1, client_stored_blocks=3)
    fresh_client, fresh_server = split_llama(model, 3, 2)
    client.set_partition(3, 2)
    server.set_partition(3, 2)
    with torch.no_grad():
        moved = _split_logits(client, server, batch)
        torch.testing.assert_close(moved, _split_logits(fresh_client, fresh_server, batch))
    merged = merge_parts(client, server)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in merged.state_dict().items())


def test_bad_partitions_are_rejected(model):
    with pytest.raises(ValueError, match="a \\+ c must be < the number of layers"):
        split_llama(model, 3, 3)
    with pytest.raises(ValueError, match=">= 1"):
        FlLlamaClientConfig(llama_config=tiny_llama_config(), num_input_blocks=0)
    client, _ = split_llama(model, 1, 1, client_stored_blocks=2)
    with pytest.raises(ValueError, match="client_stored_blocks=2"):
        client.set_partition(3, 1)
    assert client.config.num_input_blocks == 1  # unchanged after the rejected move


def test_parts_save_and_load_separately(model, tmp_path):
    client, server = split_llama(model, 2, 2, noise_scale=0.05)
    client.save_pretrained(tmp_path / "client")
    server.save_pretrained(tmp_path / "server")
    c2 = AutoModel.from_pretrained(tmp_path / "client")
    s2 = AutoModel.from_pretrained(tmp_path / "server")
    assert isinstance(s2, FlLlamaServerModel) and type(c2) is type(client)
    assert c2.config.noise_scale == 0.05 and s2.config.num_input_blocks == 2
    # each side holds only its own blocks: no lm_head or embeddings on the server, no middle block on the client
    assert not any("embed" in k or "lm_head" in k for k in s2.state_dict())
    assert len(c2.head_layers) == len(c2.tail_layers) == 2 and len(s2.layers) == 4
    batch = tiny_batch(2, 6, vocab=64)
    with torch.no_grad():
        torch.testing.assert_close(_split_logits(c2, s2, batch), _split_logits(client, server, batch))


def test_tied_embeddings_split(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**{**tiny_llama_config(), "tie_word_embeddings": True})).eval()
    client, server = split_llama(model, 1, 1)
    assert client.lm_head.weight is client.embed_tokens.weight
    batch = tiny_batch(2, 6)
    with torch.no_grad():
        ref = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    position_ids=position_ids_from_mask(batch["attention_mask"])).logits  # fmt: skip
        out = _split_logits(client, server, batch)
    mask = batch["attention_mask"].bool()
    torch.testing.assert_close(out[mask], ref[mask], rtol=0, atol=1e-5)


def test_save_parts_writes_two_artifacts_with_their_own_cards(model, tmp_path):
    from hf_ext.fl_llama.artifacts import save_parts

    client, server = split_llama(model, 1, 2, client_stored_blocks=2)
    c_dir, s_dir = save_parts(client, server, tmp_path)
    c_card, s_card = (c_dir / "README.md").read_text(), (s_dir / "README.md").read_text()
    assert "holds the **client** part" in c_card and "blocks `[0, 2)` and `[4, 6)`" in c_card
    assert "holds the **server** part" in s_card and "blocks `[1, 5)`" in s_card
    assert not any(p.suffix in (".bin", ".pt", ".pkl") for p in [*c_dir.iterdir(), *s_dir.iterdir()])
    assert isinstance(AutoModel.from_pretrained(s_dir), FlLlamaServerModel)
