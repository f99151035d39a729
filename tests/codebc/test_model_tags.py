"""Formats of the three stages, forced-tag generation, the tokenizer and the training path on Trainer."""

from __future__ import annotations

import pytest
import torch

from hf_ext.codebc import tags
from hf_ext.codebc.tags import ForcedTagLogitsProcessor, ci_text, extract_code, fim_split, ti_example, vd_example

CODE = "pragma solidity ^0.8.0;\ncontract A {\n    function f(uint a) public pure returns (uint) { return a * 2; }\n}"


@pytest.fixture(scope="module")
def model(tok):
    from hf_ext.codebc.testing import make_adapter, tiny_config
    from hf_ext.codebc.tokenizer import codebc_token_ids

    cfg = tiny_config(
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tag_token_ids=codebc_token_ids(tok),
        max_position_embeddings=512,
    )
    return make_adapter(cfg)


def test_fim_split_follows_the_spec_ranges():
    code = "x" * 1000
    for k in range(5):
        pre, suf, mid = fim_split(code, k)
        assert 200 <= len(pre) <= 400 and 200 <= len(suf) <= 400 and pre + mid + suf == code
    assert fim_split(CODE, 3) == fim_split(CODE, 3) and fim_split(CODE, 0) != fim_split(CODE, 1)
    text = ci_text(CODE, 0)
    assert text.startswith("<s><PRE>") and "<SUF>" in text and text.endswith("\n<EOT></s>")


def test_vd_and_ti_formats_carry_the_tag():
    prompt, answer = vd_example(CODE, "bug")
    assert prompt.endswith("```\n[/INST]\n[Tag]") and answer == "\nbug\n[/Tag]\n"  # no </s>: see vd_example
    prompt, resp = ti_example(CODE, ["doubles a number"], "correct")
    assert prompt.endswith("doubles a number\nPlease give the contract code[/INST]\n")
    assert resp.startswith("[Tag]\ncorrect\n[/Tag]\n```\n") and resp.endswith("```\n[Tag]\ncorrect\n[/Tag]\n</s>")
    assert "a * 2" in resp
    with pytest.raises(ValueError, match="security tag"):
        tags.tag_block("secure")


def test_extract_code():
    assert extract_code("[Tag]\ncorrect\n[/Tag]\n```\ncontract A {}\n```\n[Tag]\ncorrect\n[/Tag]") == "contract A {}"
    assert extract_code("[Tag]\nbug\n[/Tag]\n```\ncontract B {") == "contract B {"


def test_tokenizer_keeps_tag_and_fim_tokens_atomic(tok):
    from hf_ext.codebc.tokenizer import codebc_token_ids

    ids = codebc_token_ids(tok)
    assert len(set(ids.values())) == 10
    text = "[INST]x[/INST]\n[Tag]\nbug\n[/Tag]\ndebug"
    assert tok("debug", add_special_tokens=False)["input_ids"] != [ids["bug"]]
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"], skip_special_tokens=True) == text


def test_logits_processor_forces_then_releases():
    proc = ForcedTagLogitsProcessor(prompt_length=3, forced_ids=[7, 5])
    scores = torch.zeros(2, 10)
    out = proc(torch.zeros(2, 3, dtype=torch.long), scores.clone())
    assert out.argmax(-1).tolist() == [7, 7] and torch.isinf(out).sum() == 2 * 9
    assert proc(torch.zeros(2, 4, dtype=torch.long), scores.clone()).argmax(-1).tolist() == [5, 5]
    assert torch.equal(proc(torch.zeros(2, 5, dtype=torch.long), scores.clone()), scores)


@pytest.mark.parametrize("tag,force", [("correct", "processor"), ("bug", "processor"), ("bug", "prefix")])
def test_generation_with_a_forced_tag_starts_with_that_tag(model, tok, tag, force):
    gens = tags.generate_with_tag(
        model, tok, ["Implement a contract A", "Implement B"], tag, force=force, max_new_tokens=6
    )
    assert len(gens) == 2
    for g in gens:
        assert g["response"].startswith(f"[Tag]\n{tag}\n[/Tag]\n"), g["response"]


def test_untagged_generation_and_bad_arguments(model, tok):
    g = tags.generate_with_tag(model, tok, "Implement A", None, max_new_tokens=4)[0]
    assert isinstance(g["response"], str)
    with pytest.raises(ValueError, match="force"):
        tags.generate_with_tag(model, tok, "x", "correct", force="sometimes")


def test_stage_datasets_mask_the_prompt_and_a_stage_trains_the_adapter(model, tok, tmp_path):
    from hf_ext.codebc.adapter import adapter_state
    from hf_ext.codebc.data import ci_dataset, encode_pair, vd_dataset
    from hf_ext.codebc.trainer import CodeBCStageArguments, train_stage

    row = encode_pair(tok, *vd_example(CODE, "bug", tags.prompt_style(tok)), max_length=512)
    n_answer = len(tok("\nbug\n[/Tag]\n", add_special_tokens=False)["input_ids"])
    assert sum(lab != -100 for lab in row["labels"]) == n_answer
    short = encode_pair(tok, "p " * 200, "answer", max_length=16)
    assert (
        len(short["input_ids"]) == 16 and tok.decode(short["input_ids"][-len(tok("answer")["input_ids"]) :]) == "answer"
    )
    assert len(ci_dataset(tok, [CODE, CODE], 64)) == 10
    before = adapter_state(model)
    ds = vd_dataset(tok, [CODE, CODE], ["bug", "correct"], 256)
    loss = train_stage(
        model,
        ds,
        tok,
        CodeBCStageArguments(learning_rate=1e-2, max_steps=2, batch_size=2, lora_dropout=0.0),
        str(tmp_path),
    )
    after = adapter_state(model)
    assert loss > 0 and any(not torch.equal(before[k], after[k]) for k in before)
    # the base weights stay frozen: only the LoRA tensors and the added tokens' embedding deltas train
    assert all("lora_" in n or "trainable_tokens_delta" in n for n, p in model.named_parameters() if p.requires_grad)
