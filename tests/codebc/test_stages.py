"""Each stage's exact data format and loss mask (CI / VD / TI), the chat-template prompt of a real tokenizer, tag
blocks and FIM markers on a tokenizer where they are not atomic, and the VD / steering evaluation formulas."""

from __future__ import annotations

import pytest
import torch

from hf_ext.codebc import evaluation, tags
from hf_ext.codebc.data import ci_dataset, encode_pair, ti_dataset, vd_dataset
from hf_ext.codebc.tags import PromptStyle, fim_split, prompt_style, tag_block, ti_example, vd_example

CODE = "pragma solidity ^0.8.0;\ncontract A {\n    function f(uint a) public pure returns (uint) { return a * 2; }\n}"
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def plain_tok():
    """A byte-level BPE with no CodeBC tokens and a chat template, like a pretrained chat model's tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        min_frequency=1,
        special_tokens=["<|im_end|>", "<|im_start|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator([CODE] * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|im_end|>")
    fast.chat_template = TEMPLATE
    return fast


def _decode_labels(tok, row) -> str:
    return tok.decode([t for t in row["labels"] if t != -100], skip_special_tokens=False)


def test_ci_rows_are_psm_fim_with_loss_on_every_token(tok):
    rows = ci_dataset(tok, [CODE], max_length=512)
    assert len(rows) == 5  # 5 FIM splits per contract, seeds 0..4
    for k, row in enumerate(rows):
        pre, suf, mid = fim_split(CODE, k)
        want = f"<s><PRE>{pre}<SUF>{suf}<MID>{mid}\n<EOT></s>"
        assert tok.decode(row["input_ids"]) == want  # prefix, suffix, then the middle (PSM order)
        assert row["labels"] == row["input_ids"]  # plain CLM loss


def test_vd_loss_covers_exactly_the_verdict(tok):
    style = prompt_style(tok)
    for tag in ("correct", "bug"):
        prompt, answer = vd_example(CODE, tag, style)
        row = vd_dataset(tok, [CODE], [tag], 512)[0]
        n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
        assert row["labels"][:n_prompt] == [-100] * n_prompt  # no loss on the instruction or the code
        assert _decode_labels(tok, row) == f"\n{tag}\n[/Tag]\n"  # the verdict and the closing tag, no </s>
        assert tok.decode(row["input_ids"]).startswith("<s>[INST]Please determine whether")
        assert CODE in tok.decode(row["input_ids"]) and prompt.endswith("[/INST]\n[Tag]")


def test_ti_loss_covers_the_tagged_response_and_the_control_has_no_tag(tok):
    rows = ti_dataset(tok, [CODE, CODE], [["doubles a number"], ["doubles"]], ["bug", None], 512)
    tagged, plain = rows[0], rows[1]
    assert _decode_labels(tok, tagged) == f"[Tag]\nbug\n[/Tag]\n```\n{CODE}\n```\n[Tag]\nbug\n[/Tag]\n</s>"
    assert _decode_labels(tok, plain) == f"```\n{CODE}\n```\n</s>"
    prompt, _ = ti_example(CODE, ["doubles a number"], "bug", prompt_style(tok))
    n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
    assert tagged["labels"][:n_prompt] == [-100] * n_prompt and tagged["labels"][n_prompt] != -100
    assert "doubles a number\nPlease give the contract code[/INST]" in tok.decode(tagged["input_ids"])


def test_a_too_long_pair_loses_the_prompt_start_never_the_answer(tok):
    row = encode_pair(tok, "p " * 300, "\nbug\n[/Tag]\n", max_length=20)
    assert len(row["input_ids"]) == 20
    assert _decode_labels(tok, row) == "\nbug\n[/Tag]\n"
    assert (
        encode_pair(tok, "ab", "cd", 20, loss_on_prompt=True)["labels"] == encode_pair(tok, "ab", "cd", 20)["input_ids"]
    )


def test_a_chat_template_replaces_inst_in_every_stage(plain_tok):
    style = prompt_style(plain_tok)
    assert style.tokenizer is plain_tok and style.bos == "" and style.eos == "<|im_end|>"
    user = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    prompt, answer = vd_example(CODE, "bug", style)
    assert prompt == user.format(f"{tags.VD_INSTRUCTION}\n```\n{CODE}\n```\n") + "[Tag]" and "[INST]" not in prompt
    prompt, resp = ti_example(CODE, "doubles", "correct", style)
    assert prompt == user.format(tags.ti_instruction("doubles")) and resp.endswith("[/Tag]\n<|im_end|>")
    assert tags.inference_prompt(" Make A ", style) == user.format("Make A")
    assert tags.ci_text("abcdefghij", 0, style).endswith("<EOT><|im_end|>")
    # without a template: the authors' CodeLlama spelling
    assert PromptStyle().user_turn("x") == "<s>[INST]x[/INST]\n"


def test_tags_and_fim_markers_on_a_tokenizer_where_they_are_not_atomic(plain_tok):
    import copy

    from hf_ext.codebc.testing import tiny_base, tiny_config
    from hf_ext.codebc.tokenizer import add_fim_tokens, codebc_token_ids, token_sequences

    tok = copy.deepcopy(plain_tok)  # keep the module fixture untouched
    seqs = token_sequences(tok)
    assert len(seqs["[Tag]"]) > 1 and len(seqs["<PRE>"]) > 1
    with pytest.raises(ValueError, match="not atomic"):
        codebc_token_ids(tok)
    model = tiny_base(
        tiny_config(
            vocab_size=len(tok),
            bos_token_id=1,
            eos_token_id=0,
            pad_token_id=0,
            tag_token_ids={},
            max_position_embeddings=512,
        )
    )
    before = model.get_input_embeddings().weight.detach().clone()
    added = add_fim_tokens(model, tok)
    assert len(added) == 4 and added == list(range(len(before), len(before) + 4))
    assert all(len(token_sequences(tok)[t]) == 1 for t in ("<PRE>", "<SUF>", "<MID>", "<EOT>"))
    emb = model.get_input_embeddings().weight
    assert emb.shape[0] == len(tok) and torch.equal(emb[: len(before)], before)  # old rows untouched
    assert add_fim_tokens(model, tok) == []  # idempotent
    # the multi-token tag block is forced whole at the start of the response
    gens = tags.generate_with_tag(model, tok, ["Implement A"], "bug", max_new_tokens=3)
    assert gens[0]["response"].startswith(tag_block("bug"))


def test_generation_moves_inputs_to_the_model_device(tok):
    seen = {}

    class Recorder(torch.nn.Module):
        device = torch.device("meta")

        def generate(self, input_ids, attention_mask, max_new_tokens, **kw):
            seen["devices"] = (input_ids.device.type, attention_mask.device.type)
            return torch.zeros((input_ids.shape[0], input_ids.shape[1] + 1), dtype=torch.long)

    out = tags.generate_batched(Recorder(), tok, ["a"], max_new_tokens=1, max_prompt_tokens=8, batch_size=1)
    assert seen["devices"] == ("meta", "meta") and len(out) == 1  # built where the model's weights are


def test_vd_accuracy_and_the_constant_predictor(monkeypatch):
    replies = ["\ncorrect\n[/Tag]", "\nbug\n", "\nbug", "maybe", "\ncorrect"]
    monkeypatch.setattr(evaluation, "generate_batched", lambda *a, **k: replies)
    monkeypatch.setattr(evaluation, "prompt_style", lambda tok: PromptStyle())
    truth = ["correct", "bug", "correct", "bug", "bug"]
    r = evaluation.vd_accuracy(None, None, ["c"] * 5, truth, "bug", max_prompt_tokens=64)
    assert (r["correct"], r["total"]) == (2, 5) and r["accuracy"] == pytest.approx(0.4)
    assert r["constant_correct"] == 3 and r["constant_accuracy"] == pytest.approx(0.6)
    assert (r["predicted_bug"], r["true_bug"], r["other"]) == (2, 3, 1)
    assert evaluation.constant_tag(["bug", "bug", "correct"]) == "bug"
    assert evaluation.constant_tag(["bug", "correct"]) == "correct"  # a tie: the safe tag
    assert evaluation.parse_verdict("  \n") == "(empty)"


def test_generate_cli_writes_scoreable_files_from_a_saved_artifact(tok, tmp_path, capsys):
    from hf_ext.codebc import generate, train
    from hf_ext.codebc.adapter import save_codebc
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
    save_codebc(make_adapter(cfg), tmp_path / "art", tok)
    out = generate.generate_main(
        [
            "--model",
            str(tmp_path / "art"),
            "--prompt",
            "Make A",
            "--prompt",
            "Make B",
            "--tag",
            "bug",
            "--max-new-tokens",
            "3",
            "--out",
            str(tmp_path / "gen"),
        ]
    )
    assert sorted(out) == ["prompt_0.txt_0.sol", "prompt_1.txt_0.sol"]
    assert sorted(p.name for p in (tmp_path / "gen").iterdir()) == sorted(out)
    with pytest.raises(SystemExit) as err:
        generate.generate_main(["--model", str(tmp_path / "nothing")])
    assert err.value.code == 2 and "not a CodeBC artifact" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--stages"):
        train.main(["--stages", "CI,XX"])


def test_recipe_stage_datasets_and_the_no_tag_control(tok):
    from hf_ext.codebc.data import Contract
    from hf_ext.codebc.recipe import stage_dataset

    rows = [{"contract": Contract(CODE, ["doubles"], CODE), "tag": t} for t in ("bug", "correct")]
    ex = {"train": rows, "ci_codes": [CODE]}
    assert len(stage_dataset("CI", tok, ex, 512)) == 5
    vd = stage_dataset("VD", tok, ex, 512)
    assert [_decode_labels(tok, r) for r in vd] == ["\nbug\n[/Tag]\n", "\ncorrect\n[/Tag]\n"]
    ti = [tok.decode(r["input_ids"]) for r in stage_dataset("TI", tok, ex, 512)]
    assert "[Tag]\nbug\n[/Tag]" in ti[0] and "Programming with solidity ^0.8.0\ndoubles" in ti[0]
    plain = [tok.decode(r["input_ids"]) for r in stage_dataset("TI", tok, ex, 512, tags=False)]
    assert all("[Tag]" not in t for t in plain)  # the control never sees a tag
    with pytest.raises(ValueError, match="stage must be one of"):
        stage_dataset("XX", tok, ex, 512)


def test_train_parser_keeps_the_old_dashed_flags():
    """`hf-ext train codebc` is parsed by HfArgumentParser now: the old spellings (`--lr`, `--batch-size`, `--out`,
    `--no-tags`) and the underscore ones give the same arguments."""
    from hf_ext.codebc.train import build_parser

    old = ["--base", "tiny", "--stages", "CI,VD", "--steps", "3", "--lr", "0.01", "--batch-size", "4",
           "--max-length", "64", "--no-tags", "--npm-corpus", "/x", "--seed", "2", "--out", "/tmp/a",
           "--device", "cpu"]  # fmt: skip
    new = ["--base", "tiny", "--stages", "CI,VD", "--steps", "3", "--learning_rate", "0.01", "--batch_size", "4",
           "--max_length", "64", "--no_tags", "--npm_corpus", "/x", "--seed", "2", "--output_dir", "/tmp/a",
           "--device", "cpu"]  # fmt: skip
    (a,) = build_parser().parse_args_into_dataclasses(args=old)
    (b,) = build_parser().parse_args_into_dataclasses(args=new)
    assert a == b
    assert (a.base, a.stage_list, a.steps, a.learning_rate, a.batch_size) == ("tiny", ["CI", "VD"], 3, 0.01, 4)
    assert (a.max_length, a.no_tags, a.npm_corpus, a.seed, a.output_dir, a.device) == (
        64,
        True,
        "/x",
        2,
        "/tmp/a",
        "cpu",
    )
    (d,) = build_parser().parse_args_into_dataclasses(args=[])
    assert d.learning_rate is None and d.batch_size is None and not d.no_tags  # preset defaults apply
