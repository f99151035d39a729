"""The memory mechanism: attention pooling against a direct formula, the faiss bank, its safetensors round trip and
its errors."""

import math

import pytest
import torch

from hf_ext.tinyalign.memory import MemoryBank, MemoryBankError, attention_pool, encode_caption_bytes


def _pool_reference(v, t, alpha):
    """k = wᵀF with F = [α V̂; (1−α) T̂], A = softmax(F Fᵀ) row-wise, w = mean of A's rows (one sample)."""
    rows = [alpha * x / x.norm() for x in v] + [(1 - alpha) * x / x.norm() for x in t]
    n = len(rows)
    w = [0.0] * n
    for i in range(n):
        s = [float(rows[i] @ rows[j]) for j in range(n)]
        z = sum(math.exp(x) for x in s)
        for j in range(n):
            w[j] += math.exp(s[j]) / z / n
    return sum(w[j] * rows[j] for j in range(n))


def test_attention_pool_matches_reference_and_ignores_masked_tokens():
    g = torch.Generator().manual_seed(0)
    v, t = torch.randn(2, 3, 5, generator=g), torch.randn(2, 4, 5, generator=g)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    out = attention_pool(v, t, mask, 0.4)
    torch.testing.assert_close(out[0], _pool_reference(v[0], t[0], 0.4))
    torch.testing.assert_close(out[1], _pool_reference(v[1], t[1, :2], 0.4))
    # changing a masked-out token changes nothing; changing a kept one does
    t2 = t.clone()
    t2[1, 3] += 10
    torch.testing.assert_close(attention_pool(v, t2, mask, 0.4), out)
    t2[1, 0] += 10
    assert not torch.allclose(attention_pool(v, t2, mask, 0.4)[1], out[1])


def test_alpha_one_is_mean_of_normalised_visual_tokens_when_they_are_orthogonal():
    v = torch.eye(3)[None] * torch.tensor([2.0, 5.0, 7.0])[None, :, None]  # orthogonal, different norms
    out = attention_pool(v, torch.randn(1, 2, 3), None, 1.0)
    # F rows: e1, e2, e3 (α = 1) and two zero rows; every softmax row is symmetric in e1..e3 → equal weights
    assert torch.allclose(out[0], torch.full((3,), float(out[0, 0])))
    assert float(out[0, 0]) > 0


def test_bank_search_gather_and_roundtrip(tmp_path):
    keys = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0]])
    values = torch.arange(4 * 2 * 3, dtype=torch.float32).reshape(4, 2, 3)
    bank = MemoryBank(keys, values, ["a", "b", "c", "d"])
    scores, ids = bank.search(torch.tensor([[2.0, 0.1, 0]]), k=2)
    assert ids.tolist() == [[0, 3]]
    assert scores[0, 0] > scores[0, 1]
    gathered = bank.gather(ids)
    assert gathered.shape == (1, 4, 3)  # k·L tokens along the token axis
    torch.testing.assert_close(gathered[0, :2], values[0])
    torch.testing.assert_close(gathered[0, 2:], values[3])
    bank.save(tmp_path)
    again = MemoryBank.load(tmp_path / "memory_bank.safetensors")
    assert again.captions == ["a", "b", "c", "d"]
    assert again.search(torch.tensor([[2.0, 0.1, 0]]), k=2)[1].tolist() == [[0, 3]]
    torch.testing.assert_close(again.values, values)


def test_bank_errors_name_the_problem():
    with pytest.raises(MemoryBankError, match="empty"):
        MemoryBank(torch.zeros(0, 3), torch.zeros(0, 2, 3))
    bank = MemoryBank(torch.eye(3), torch.zeros(3, 2, 3))
    with pytest.raises(MemoryBankError, match="top_k=4 is larger than the memory bank \\(3"):
        bank.search(torch.ones(1, 3), k=4)
    with pytest.raises(MemoryBankError, match="query width 5 does not match the bank's key width 3"):
        bank.search(torch.ones(1, 5), k=1)


def test_caption_bytes_are_perceiver_byte_ids():
    ids = encode_caption_bytes(["ab", "é"], 4)
    assert ids.tolist() == [[97 + 6, 98 + 6, 0, 0], [0xC3 + 6, 0xA9 + 6, 0, 0]]


def test_approximate_hnsw_bank_finds_clustered_neighbours_and_roundtrips(tmp_path):
    """`index_factory="HNSW32"`: on clustered keys (like real ones) it returns the exact neighbours, and the saved
    bank restores the same graph index (not a flat one); a bad factory string or an index that needs training fails
    with the reason."""
    import faiss

    g = torch.Generator().manual_seed(0)
    centres = torch.randn(50, 16, generator=g)
    keys = centres.repeat_interleave(40, 0) + 0.05 * torch.randn(2000, 16, generator=g)
    values = torch.arange(2000, dtype=torch.float32).reshape(2000, 1, 1)
    queries = centres + 0.05 * torch.randn(50, 16, generator=g)
    exact = MemoryBank(keys, values).search(queries, 5)[1]
    approx = MemoryBank(keys, values, index_factory="HNSW32")
    assert isinstance(approx.index, faiss.IndexHNSWFlat)
    assert torch.equal(approx.search(queries, 5)[1].sort(-1).values, exact.sort(-1).values)
    again = MemoryBank.load(approx.save(tmp_path))
    assert isinstance(again.index, faiss.IndexHNSWFlat) and again.index.hnsw.efSearch == 128
    assert torch.equal(again.search(queries, 5)[1], approx.search(queries, 5)[1])
    with pytest.raises(MemoryBankError, match="index_factory='NoSuchIndex'"):
        MemoryBank(keys, values, index_factory="NoSuchIndex")
    with pytest.raises(MemoryBankError, match="needs training"):
        MemoryBank(keys, values, index_factory="IVF16,Flat")


def _tiny_setup(monkeypatch):
    """`reproduce.setup()` replaced by tiny splits (with an `index` column, as the digits splits have) and tiny frozen
    parts, so `build_model` runs its real bank-building path in a second."""
    from datasets import DatasetDict

    from hf_ext.tinyalign import reproduce
    from hf_ext.tinyalign.modeling_tinyalign import TinyAlignForConditionalGeneration
    from hf_ext.tinyalign.processing_tinyalign import build_tokenizer
    from hf_ext.tinyalign.testing import TINY_CAPTIONS, tiny_config, tiny_data

    config = tiny_config(use_retrieval=False)
    parts = TinyAlignForConditionalGeneration(config)
    splits = {}
    for i, (name, n) in enumerate((("memory", 12), ("train", 10), ("test", 6))):
        rows = tiny_data(n, seed=i)
        splits[name] = rows.add_column("index", list(range(100 * i, 100 * i + n)))
    data = DatasetDict(splits)
    lms = {"small": (parts.language_model.state_dict(), {"text_config": config.text_config.to_dict()})}
    monkeypatch.setattr(reproduce, "VISION_CONFIG", config.vision_config.to_dict())
    monkeypatch.setattr(
        reproduce, "setup", lambda: (data, build_tokenizer(TINY_CAPTIONS), parts.vision_tower.state_dict(), {}, lms)
    )
    return data


def test_the_honest_memory_bank_shares_no_row_with_training(monkeypatch):
    """TinyAlign's honest bank is built from the memory split only: no id of the training split is in it. The
    released (leaky) variant's bank holds the training rows: the positive control that the check can fail."""
    from hf_ext.tinyalign import reproduce
    from hf_ext.tinyalign.data import memory_source

    data = _tiny_setup(monkeypatch)
    train_ids = set(data["train"]["index"])
    model, _ = reproduce.build_model("small", "k1", seed=0)
    bank_ids = model.memory_bank.source_ids
    assert bank_ids is not None and len(bank_ids) == len(model.memory_bank) == len(data["memory"])
    assert train_ids.isdisjoint(bank_ids)
    leaky, _ = reproduce.build_model("small", "released-k1", seed=0)
    assert train_ids <= set(leaky.memory_bank.source_ids)
    assert train_ids.isdisjoint(memory_source(data, "k4")["index"])
    assert train_ids <= set(memory_source(data, "released-k4")["index"])


def test_keys_and_queries_go_through_the_connector_snapshot_taken_when_the_bank_is_built():
    """A deliberate choice, pinned: `build_memory_bank` freezes a copy of the connector (`retrieval_connector`) and
    both the bank's keys and every later query go through that copy. Training the connector afterwards (what stage 1
    does) moves neither, so an (image, prompt) pair retrieves the same rows before and after; a query through the
    live connector (the released code's drift) would retrieve other rows: the positive control that the change of
    weights matters."""
    import torch

    from hf_ext.tinyalign.testing import tiny_batch, tiny_data, tiny_model, tiny_processor

    model = tiny_model().eval()
    for a, b in zip(model.connector.state_dict().values(), model.retrieval_connector.state_dict().values()):
        assert torch.equal(a, b)  # the snapshot is the connector at build time
    assert not any(p.requires_grad for p in model.retrieval_connector.parameters())
    # the keys are the pooled keys through the snapshot (build_memory_bank's rows: tiny_data(24, seed=100))
    rows, processor = tiny_data(24, seed=100), tiny_processor(model.config)
    ids, mask = processor.key_text(rows["caption"])
    with torch.no_grad():
        feats = model.image_features(processor.pixel_values(rows["pixel_values"]))
        keys = model.fused_key(feats, model.get_input_embeddings()(ids), mask, connector=model.retrieval_connector)
    torch.testing.assert_close(model.memory_bank.keys, torch.nn.functional.normalize(keys, dim=-1))
    batch = tiny_batch(model.config, n=8)
    with torch.no_grad():
        before = model(**batch).retrieved_ids
        snapshot = {k: v.clone() for k, v in model.retrieval_connector.state_dict().items()}
        for p in model.connector.parameters():  # the connector trains on: a large move
            p.add_(torch.randn_like(p) * 3.0)
        after = model(**batch).retrieved_ids
        for k, v in model.retrieval_connector.state_dict().items():
            assert torch.equal(v, snapshot[k])
        # positive control: queries through the live (trained) connector against the same keys retrieve other rows
        model.retrieval_connector.load_state_dict(model.connector.state_dict())
        live = model(**batch).retrieved_ids
    assert torch.equal(before, after)
    assert not torch.equal(live, after)
