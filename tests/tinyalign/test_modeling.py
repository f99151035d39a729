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
        model.train()  # the released leak is a training-time behaviour
        leaky = model.text_query_mask(batch["input_ids"], batch["attention_mask"], batch["labels"])
        model.eval()
        at_eval = model.text_query_mask(batch["input_ids"], batch["attention_mask"], batch["labels"])
    finally:
        model.config.query_includes_answer = False
        model.eval()
    assert leaky[batch["labels"] != -100].all()
    torch.testing.assert_close(at_eval, query)
    # the honest training query equals the inference query (prompt only): same neighbours with or without labels
    with torch.no_grad():
        train_ids = model(**batch).retrieved_ids
        ignored = batch["labels"][0] == -100
        prompt_len = int(ignored.sum()) - int(ignored.flip(0).cumprod(0).sum())  # drop trailing padding
        infer = {k: batch[k][:, :prompt_len] for k in ("input_ids", "attention_mask")}
        infer_ids = model(**infer, pixel_values=batch["pixel_values"]).retrieved_ids
    assert torch.equal(train_ids, infer_ids)


def _prompt_length(batch) -> int:
    """Length of the prompt (everything before the first labelled token)."""
    return int((batch["labels"][0] != -100).nonzero()[0])


def test_honest_query_is_positional_and_needs_no_labels(model):
    """A forward with the caption in `input_ids` but no `labels` must not pool the caption into the query."""
    batch = tiny_batch(model.config)
    n = _prompt_length(batch)
    mask = model.text_query_mask(batch["input_ids"], batch["attention_mask"])
    assert not mask[:, n:].any()  # nothing after the prompt
    ids, cfg = batch["input_ids"], model.config
    placeholder = (ids == cfg.image_token_id) | (ids == cfg.rag_token_id)
    assert torch.equal(mask[:, :n], ~placeholder[:, :n])  # BOS and the 7 prompt words, every row
    assert int(mask[0].sum()) == 1 + model.config.query_prompt_length
    with torch.no_grad():
        no_labels = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], pixel_values=batch["pixel_values"]
        ).retrieved_ids
        prompt_only = model(
            input_ids=batch["input_ids"][:, :n],
            attention_mask=batch["attention_mask"][:, :n],
            pixel_values=batch["pixel_values"],
        ).retrieved_ids
        # the old label-based mask, which pools the caption when labels are absent, retrieves differently here
        old_mask = ~placeholder & batch["attention_mask"].bool()
        feats = model.image_features(batch["pixel_values"])
        embeds = model.get_input_embeddings()(batch["input_ids"].masked_fill(placeholder, 0))
        leaky_ids = model.retrieve(model.fused_key(feats, embeds, old_mask))[1]
    assert torch.equal(no_labels, prompt_only)
    assert not torch.equal(leaky_ids, prompt_only)


def test_processor_rejects_a_wrong_prompt_length():
    with pytest.raises(ValueError, match="has 7 tokens but config.query_prompt_length is 6"):
        tiny_processor(tiny_config(query_prompt_length=6))


def test_released_ablation_leaks_in_training_only_and_evaluation_uses_the_prompt_query():
    """`query_includes_answer=True` pools the caption in training-mode forwards; evaluation (teacher-forced and
    generation) must retrieve exactly the neighbours of the prompt-only query."""
    from hf_ext.tinyalign.evaluation import evaluate_captions

    leaky = tiny_model(tiny_config(query_includes_answer=True))
    batch = tiny_batch(leaky.config, n=8)
    n = _prompt_length(batch)
    with torch.no_grad():
        leaky.eval()
        prompt_only = leaky(
            input_ids=batch["input_ids"][:, :n],
            attention_mask=batch["attention_mask"][:, :n],
            pixel_values=batch["pixel_values"],
        ).retrieved_ids
        eval_forced = leaky(**batch).retrieved_ids
        leaky.train()
        train_forced = leaky(**batch).retrieved_ids
        leaky.eval()
    assert torch.equal(eval_forced, prompt_only)
    assert not torch.equal(train_forced, prompt_only)  # the ablation still leaks where the released code does
    ev = evaluate_captions(leaky, tiny_processor(leaky.config), tiny_data(8, seed=1), batch_size=3, max_new_tokens=2)
    assert torch.equal(torch.tensor(ev["neighbours"]), prompt_only)
    # and the teacher-forced metrics equal those of a replay of the prompt-only neighbours
    with torch.no_grad():
        replay = leaky(**batch, memory_ids=prompt_only)
    from hf_ext.tinyalign.metrics import token_accuracy

    c, t = token_accuracy(replay.logits, batch["labels"])
    assert ev["token_accuracy"] == pytest.approx(c / t)


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
        # without cache every step re-runs the whole sequence, generated tokens included; the positional query
        # ignores them, so every step retrieves the same neighbours and the greedy tokens agree
        b = model.generate(**prompt, max_new_tokens=4, do_sample=False, use_cache=False)
    assert torch.equal(a, b)


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
    assert trainable == {"connector", "connector2", "memory_scale"}
    lm_before = {n: p.clone() for n, p in model.language_model.named_parameters()}
    import tempfile

    _trainer(model, tempfile.mkdtemp()).train()
    assert all(torch.equal(p, lm_before[n]) for n, p in model.language_model.named_parameters())


def test_any_hf_vision_encoder_vit_drops_cls():
    config = tiny_config(
        vision_config={
            "model_type": "vit",
            "image_size": 8,
            "patch_size": 2,
            "num_channels": 1,
            "hidden_size": 8,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 16,
        },
        vision_feature_layer=-2,
    )
    model = tiny_model(config)
    assert model.image_features(torch.rand(2, 1, 8, 8)).shape == (2, 16, 8)
    assert torch.isfinite(model(**tiny_batch(config)).loss)


def test_artifact_saved_before_the_memory_norm_loads_as_it_was(model, tmp_path):
    """An artifact without `memory_token_norm` in its config and without `memory_scale` (saved by earlier versions)
    loads with the norm off and gives the outputs it gave then."""
    import json

    from safetensors.torch import load_file, save_file

    from hf_ext.core.hub import write_checksums

    model.config.memory_token_norm = False
    try:
        model.save_pretrained(tmp_path)
        batch = tiny_batch(model.config)
        with torch.no_grad():
            want = model(**batch).logits
    finally:
        model.config.memory_token_norm = True
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["memory_token_norm"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    weights = load_file(tmp_path / "model.safetensors")
    del weights["memory_scale"]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    write_checksums(tmp_path)
    from transformers import AutoModelForImageTextToText

    # directly, and through the Auto class (which reads config.json itself and passes the config in)
    for loaded in (
        TinyAlignForConditionalGeneration.from_pretrained(tmp_path),
        AutoModelForImageTextToText.from_pretrained(tmp_path),
    ):
        assert loaded.config.memory_token_norm is False
        with torch.no_grad():
            torch.testing.assert_close(loaded(**batch).logits, want)
