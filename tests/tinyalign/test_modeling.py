"""The model: layout of memory tokens, honest vs leaky queries, save/load with the bank, generation, bad input."""

import pytest
import torch

from hf_ext.tinyalign import MemoryBank, MemoryBankError, TinyAlignForConditionalGeneration
from hf_ext.tinyalign.testing import tiny_batch, tiny_config, tiny_data, tiny_model, tiny_processor


@pytest.fixture(scope="module")
def model():
    return tiny_model().eval()


def test_inputs_hold_image_then_memory_tokens_and_labels_only_on_the_caption():
    config = tiny_config()
    batch = tiny_batch(config, n=2)
    ids = batch["input_ids"][0].tolist()
    nv, nm = config.num_image_tokens, config.num_memory_tokens
    assert nm == config.memory_top_k * config.value_num_latents == 8
    assert ids[1 : 1 + nv] == [config.image_token_id] * nv
    assert ids[1 + nv : 1 + nv + nm] == [config.rag_token_id] * nm
    labelled = (batch["labels"][0] != -100).nonzero().flatten()
    assert labelled.min() > 1 + nv + nm  # never on placeholders or the prompt


def test_memory_tokens_change_the_logits_and_depend_on_retrieved_values(model):
    batch = tiny_batch(model.config)
    with torch.no_grad():
        out = model(**batch)
        bank = model.memory_bank
        model.memory_bank = MemoryBank(bank.keys, bank.values * 3.0, bank.captions)
        out2 = model(**batch)
        model.memory_bank = bank
        replay = model(**batch, memory_ids=out.retrieved_ids)  # same entries without searching: same logits
        other = model(**batch, memory_ids=(out.retrieved_ids + 1) % len(bank))
    torch.testing.assert_close(replay.logits, out.logits)
    assert not torch.allclose(other.logits, out.logits)
    assert out.retrieved_ids.shape == (4, 2)
    assert torch.equal(out.retrieved_ids, out2.retrieved_ids)
    assert not torch.allclose(out.logits, out2.logits)


def test_honest_query_ignores_answer_tokens_and_released_ablation_does_not(model):
    batch = tiny_batch(model.config)
    query = model.text_query_mask(batch["input_ids"], batch["attention_mask"], batch["labels"])
    assert not query[batch["labels"] != -100].any()
    model.config.query_includes_answer = True
    try:
        leaky = model.text_query_mask(batch["input_ids"], batch["attention_mask"], batch["labels"])
    finally:
        model.config.query_includes_answer = False
    assert leaky[batch["labels"] != -100].all()
    # the honest training query equals the inference query (prompt only): same neighbours with or without labels
    with torch.no_grad():
        train_ids = model(**batch).retrieved_ids
        ignored = batch["labels"][0] == -100
        prompt_len = int(ignored.sum()) - int(ignored.flip(0).cumprod(0).sum())  # drop trailing padding
        infer = {k: batch[k][:, :prompt_len] for k in ("input_ids", "attention_mask")}
        infer_ids = model(**infer, pixel_values=batch["pixel_values"]).retrieved_ids
    assert torch.equal(train_ids, infer_ids)


def test_from_pretrained_restores_bank_neighbours_and_generation(model, tmp_path):
    from transformers import AutoModelForImageTextToText

    batch = tiny_batch(model.config)
    prompt = tiny_processor(model.config)(batch["pixel_values"])
    with torch.no_grad():
        before = model(**batch)
        gen = model.generate(**prompt, max_new_tokens=5, do_sample=False)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "memory_bank.safetensors").is_file()
    again = AutoModelForImageTextToText.from_pretrained(tmp_path)
    assert isinstance(again, TinyAlignForConditionalGeneration) and len(again.memory_bank) == 24
    with torch.no_grad():
        after = again(**batch)
        gen2 = again.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert torch.equal(before.retrieved_ids, after.retrieved_ids)
    assert torch.equal(gen, gen2)
    assert prompt["input_ids"].shape[1] < gen.shape[1] <= prompt["input_ids"].shape[1] + 5


def test_generate_with_cache_matches_without_cache(model):
    prompt = tiny_processor(model.config)(tiny_data(2, seed=5)["pixel_values"])
    with torch.no_grad():
        a = model.generate(**prompt, max_new_tokens=4, do_sample=False)
        # without cache the prefix is re-run; the first step's query is the same, later ones see generated tokens,
        # so only the first new token is guaranteed to agree
        b = model.generate(**prompt, max_new_tokens=1, do_sample=False, use_cache=False)
    assert torch.equal(a[:, : b.shape[1]], b)


def test_bad_inputs_raise_clear_errors(model):
    batch = tiny_batch(model.config)
    with pytest.raises(ValueError, match=r"pixel_values must have shape \(batch, 1, 8, 8\).*got \(4, 3, 8, 8\)"):
        model(**{**batch, "pixel_values": batch["pixel_values"].repeat(1, 3, 1, 1)})
    with pytest.raises(ValueError, match=r"got \(4, 1, 16, 16\)"):
        model(**{**batch, "pixel_values": torch.rand(4, 1, 16, 16)})
    bank = model.memory_bank
    with pytest.raises(MemoryBankError, match="key width 7 does not match the model's hidden size 16"):
        model.set_memory_bank(MemoryBank(torch.randn(5, 7), bank.values[:5]))
    with pytest.raises(MemoryBankError, match="empty"):
        model.set_memory_bank(MemoryBank(torch.zeros(0, 16), torch.zeros(0, 4, 8)))
    with pytest.raises(MemoryBankError, match="top_k=2 is larger than the memory bank \\(1 entries\\)"):
        model.set_memory_bank(MemoryBank(bank.keys[:1], bank.values[:1]))
    with pytest.raises(MemoryBankError, match="values have shape \\(3, 8\\)"):
        model.set_memory_bank(MemoryBank(bank.keys[:3], torch.zeros(3, 3, 8)))
    assert model.memory_bank is bank
    short = tiny_processor(tiny_config(memory_top_k=1))(batch["pixel_values"])
    with pytest.raises(ValueError, match=r"\[4, 4, 4, 4\] memory placeholder tokens per row but the model produces 8"):
        model(**short)


def test_baseline_has_no_memory_branch_and_refuses_a_bank():
    config = tiny_config(use_retrieval=False)
    model = TinyAlignForConditionalGeneration(config)
    assert not hasattr(model, "connector2") and config.num_memory_tokens == 0
    out = model(**tiny_batch(config))
    assert out.retrieved_ids is None and torch.isfinite(out.loss)
    with pytest.raises(MemoryBankError, match="use_retrieval=False"):
        model.set_memory_bank(MemoryBank(torch.randn(3, 16), torch.zeros(3, 4, 8)))


def test_stage1_trains_connectors_only():
    from hf_ext.tinyalign.testing import _trainer

    model = tiny_model().freeze_for_stage1()
    trainable = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"connector", "connector2"}
    lm_before = {n: p.clone() for n, p in model.language_model.named_parameters()}
    import tempfile

    _trainer(model, tempfile.mkdtemp()).train()
    assert all(torch.equal(p, lm_before[n]) for n, p in model.language_model.named_parameters())


def test_any_hf_vision_encoder_vit_drops_cls():
    config = tiny_config(vision_config={"model_type": "vit", "image_size": 8, "patch_size": 2, "num_channels": 1,
                                        "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                                        "intermediate_size": 16}, vision_feature_layer=-2)
    model = tiny_model(config)
    assert model.image_features(torch.rand(2, 1, 8, 8)).shape == (2, 16, 8)
    assert torch.isfinite(model(**tiny_batch(config)).loss)
