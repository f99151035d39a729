"""CodeBC bad-input fuzz suite: the config, the model's forward (plain and under the LoRA adapter), forced-tag
generation, the stage arguments and reproduce flags each refuse bad input naming the field and the allowed range."""

from __future__ import annotations

import functools

import pytest
import torch

import hf_ext  # noqa: F401  (registers the config-key guard)
from hf_ext.codebc import tags
from hf_ext.codebc.tags import ForcedTagLogitsProcessor
from hf_ext.codebc.testing import VOCAB, make_adapter, tiny_base, tiny_config
from hf_ext.core.testing import BadInput, assert_clear_error
from hf_ext.core.validation import UnknownConfigKeyError

CODE = "pragma solidity ^0.8.0;\ncontract A {\n    function f(uint a) public pure returns (uint) { return a * 2; }\n}"


@functools.cache
def _tok():
    from hf_ext.codebc.tokenizer import train_tokenizer

    return train_tokenizer([CODE, CODE.replace("A", "B")] * 5, vocab_size=300, min_frequency=1)


@functools.cache
def _lm():
    from hf_ext.codebc.tokenizer import codebc_token_ids

    tok = _tok()
    cfg = tiny_config(
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tag_token_ids=codebc_token_ids(tok),
        max_position_embeddings=512,
    )
    return make_adapter(cfg).eval()


@functools.cache
def _base():
    return tiny_base().eval()


def _ids(*shape, high=VOCAB):
    return torch.randint(3, high, shape, generator=torch.Generator().manual_seed(0))


def _forward(model=None, **inputs):
    with torch.no_grad():
        return (model or _base())(**inputs)


def _gen(instructions="Implement a contract A", **kwargs):
    return tags.generate_with_tag(_lm(), _tok(), instructions, "correct", **{"max_new_tokens": 2, **kwargs})


def _forced(forced_ids, vocab=10):
    proc = ForcedTagLogitsProcessor(prompt_length=3, forced_ids=forced_ids)
    return proc(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, vocab))


def _stage(**kwargs):
    from hf_ext.codebc.trainer import CodeBCStageArguments

    return CodeBCStageArguments(**kwargs)


def _reproduce(*argv):
    """`main(argv)` with the first expensive step replaced by an error: a flag that slips through validation shows
    up as a deep failure at once instead of starting a real run."""
    from unittest import mock

    from hf_ext.codebc import reproduce

    def reached(*args, **kwargs):
        raise RuntimeError(f"bad flags {argv} reached the run (toolchain_problem)")

    with mock.patch.object(reproduce, "toolchain_problem", reached):
        return reproduce.main(["--out", "/dev/null/hf_ext_fuzz", *argv])


def _loaded_config(**changes):
    from hf_ext.codebc.configuration_codebc import CodeBCConfig

    return CodeBCConfig.from_dict({**tiny_config().to_dict(), **changes})


def _train(*argv):
    """`hf-ext train codebc` with the first expensive step (the data and base preparation) replaced by an error."""
    from unittest import mock

    from hf_ext.codebc import recipe, train

    def reached(*args, **kwargs):
        raise RuntimeError(f"bad flags {argv} reached the run (prepare)")

    with mock.patch.object(recipe, "prepare", reached):
        try:
            return train.main(["--out", "/dev/null/hf_ext_fuzz/artifact", *argv])
        except SystemExit as err:  # the script's one-line error, as the CLI prints it
            raise ValueError(str(err)) from None


def _generate(*argv):
    from hf_ext.codebc.generate import generate_main

    return generate_main(["--model", "/dev/null/hf_ext_fuzz", *argv])


CASES = [
    # config
    BadInput(
        "config typo key", lambda: tiny_config(hiden_size=32), r"'hiden_size'.*hidden_size", UnknownConfigKeyError
    ),
    BadInput("config hidden_size<0", lambda: tiny_config(hidden_size=-4), r"hidden_size must be an integer >= 1"),
    BadInput("config heads=0", lambda: tiny_config(num_attention_heads=0), r"num_attention_heads must be .*>= 1"),
    BadInput("config layers=0", lambda: tiny_config(num_hidden_layers=0), r"num_hidden_layers must be .*>= 1"),
    BadInput("config vocab=0", lambda: tiny_config(vocab_size=0, tag_token_ids={}), r"vocab_size must be .*>= 1"),
    BadInput("config hidden % heads", lambda: tiny_config(hidden_size=30), r"hidden_size=30 must be divisible"),
    BadInput("config kv heads", lambda: tiny_config(num_key_value_heads=3), r"num_key_value_heads must be >= 1 and"),
    BadInput("config rms_norm_eps=nan", lambda: tiny_config(rms_norm_eps=float("nan")), r"rms_norm_eps must be"),
    BadInput("config pad id out of vocab", lambda: tiny_config(pad_token_id=500), r"pad_token_id=500 must lie"),
    BadInput("config tag id -7", lambda: tiny_config(tag_token_ids={"[Tag]": -7}), r"tag_token_ids outside"),
    BadInput("config one tag", lambda: tiny_config(security_tags=["correct"]), r"security_tags must hold >= 2"),
    # forward
    BadInput("empty batch", lambda: _forward(input_ids=torch.zeros(0, 5, dtype=torch.long)), r"input_ids is empty"),
    BadInput(
        "zero-length rows", lambda: _forward(input_ids=torch.zeros(2, 0, dtype=torch.long)), r"input_ids is empty"
    ),
    BadInput(
        "OOV ids",
        lambda: _forward(input_ids=torch.tensor([[3, 4, VOCAB]])),
        rf"input_ids must lie in \[0, vocab_size={VOCAB}\), got \[{VOCAB}\]",
    ),
    BadInput(
        "negative ids",
        lambda: _forward(input_ids=torch.tensor([[3, -1, 4]])),
        rf"input_ids must lie in \[0, vocab_size={VOCAB}\)",
    ),
    BadInput(
        "OOV ids under LoRA",
        lambda: _forward(_lm(), input_ids=torch.tensor([[3, 10_000]])),
        r"input_ids must lie in \[0, vocab_size=",
    ),
    BadInput("float ids", lambda: _forward(input_ids=_ids(1, 4).float()), r"input_ids must be an integer tensor"),
    BadInput(
        "NaN labels",
        lambda: _forward(input_ids=_ids(2, 4), labels=torch.full((2, 4), float("nan"))),
        r"labels must be integer token ids",
    ),
    BadInput(
        "labels out of range",
        lambda: _forward(input_ids=_ids(2, 4), labels=_ids(2, 4) + VOCAB),
        rf"labels must lie in \[0, vocab_size={VOCAB}\) or be -100",
    ),
    BadInput(
        "labels wrong shape",
        lambda: _forward(input_ids=_ids(2, 4), labels=_ids(2, 3)),
        r"labels must have the shape of input_ids \(2, 4\)",
    ),
    BadInput(
        "attention_mask batch",
        lambda: _forward(input_ids=_ids(2, 4), attention_mask=torch.ones(3, 4)),
        r"attention_mask must have shape \(batch=2",
    ),
    # forced tags and generation
    BadInput("forced tag id -7", lambda: ForcedTagLogitsProcessor(3, [-7]), r"forced_ids must lie in \[0, .*-7"),
    BadInput("forced tag id past vocab", lambda: _forced([12], vocab=10), r"forced_ids must lie in \[0, vocab_size=10"),
    BadInput("forced prompt_length<0", lambda: ForcedTagLogitsProcessor(-1, [1]), r"prompt_length must be"),
    BadInput("forced id not int", lambda: ForcedTagLogitsProcessor(3, [1.5]), r"forced_ids must be integer"),
    BadInput("generate empty batch", lambda: _gen([]), r"instructions must be a non-empty list"),
    BadInput("generate non-string", lambda: _gen([None]), r"instructions must be non-empty strings"),
    BadInput(
        "generate unknown tag",
        lambda: tags.generate_with_tag(_lm(), _tok(), "x", "safe"),
        r"security tag must be one of",
    ),
    BadInput("generate max_new_tokens=0", lambda: _gen(max_new_tokens=0), r"max_new_tokens must be an integer >= 1"),
    BadInput("generate batch_size=0", lambda: _gen(batch_size=0), r"batch_size must be an integer >= 1"),
    BadInput("generate max_prompt_tokens=0", lambda: _gen(max_prompt_tokens=0), r"max_prompt_tokens must be"),
    BadInput(
        "generate temperature nan",
        lambda: _gen(do_sample=True, temperature=float("nan")),
        r"temperature must be a finite number in \(0",
    ),
    BadInput("generate top_p 1.5", lambda: _gen(do_sample=True, top_p=1.5), r"top_p must be a finite number in"),
    BadInput("generate force mode", lambda: _gen(force="sometimes"), r"force must be 'processor' or 'prefix'"),
    # stage arguments and data
    BadInput("stage lr nan", lambda: _stage(learning_rate=float("nan")), r"learning_rate must be a finite number"),
    BadInput("stage batch 0", lambda: _stage(batch_size=0), r"batch_size must be an integer >= 1"),
    BadInput("stage lora_r 0", lambda: _stage(lora_r=0), r"lora_r must be an integer >= 1"),
    BadInput("stage dropout 1.5", lambda: _stage(lora_dropout=1.5), r"lora_dropout must be a finite number in"),
    BadInput("stage max_steps 0", lambda: _stage(max_steps=0), r"max_steps must be -1"),
    BadInput(
        "encode_pair max_length 0",
        lambda: __import__("hf_ext.codebc.data", fromlist=["x"]).encode_pair(_tok(), "p", "a", max_length=0),
        r"max_length must be an integer >= 1",
    ),
    BadInput("vd tag unknown", lambda: tags.vd_example(CODE, "maybe"), r"security tag must be one of"),
    # reproduce flags (refused before the toolchain check and any training)
    BadInput("reproduce --stage-steps 0", lambda: _reproduce("--stage-steps", "0"), r"stage_steps must be >= 1"),
    BadInput("reproduce --samples 0", lambda: _reproduce("--samples", "0"), r"samples must be an integer >= 1"),
    BadInput("reproduce --max-new-tokens -1", lambda: _reproduce("--max-new-tokens", "-1"), r"max_new_tokens must"),
    BadInput("reproduce --pretrain-steps -5", lambda: _reproduce("--pretrain-steps", "-5"), r"pretrain_steps must"),
    # strict config fields (construction and load), issue 38
    BadInput("config vocab_size='96'", lambda: tiny_config(vocab_size="96"), r"CodeBCConfig.vocab_size"),
    BadInput("config hidden_size=None", lambda: tiny_config(hidden_size=None), r"CodeBCConfig.hidden_size"),
    BadInput(
        "config attention_dropout=nan",
        lambda: tiny_config(attention_dropout=float("nan")),
        r"attention_dropout must be a number in \[0, 1\)",
    ),
    BadInput(
        "config initializer_range=-1",
        lambda: tiny_config(initializer_range=-1.0),
        r"CodeBCConfig.initializer_range",
    ),
    BadInput(
        "loaded config num_hidden_layers='2'",
        lambda: _loaded_config(num_hidden_layers="2"),
        r"CodeBCConfig.num_hidden_layers",
    ),
    BadInput(
        "loaded config attention_dropout=1.5",
        lambda: _loaded_config(attention_dropout=1.5),
        r"attention_dropout must be a number in",
    ),
    # forward: NaN embeddings would pass silently to NaN logits
    BadInput(
        "forward inputs_embeds nan",
        lambda: _forward(inputs_embeds=torch.full((1, 4, 32), float("nan"))),
        r"inputs_embeds must be finite",
    ),
    BadInput(
        "forward inputs_embeds wrong width",
        lambda: _forward(inputs_embeds=torch.zeros(1, 4, 7)),
        r"inputs_embeds must be a float tensor of shape \(batch, length, 32\)",
    ),
    BadInput("stage learning_rate='1e-3'", lambda: _stage(learning_rate="1e-3"), r"learning_rate must be a number"),
    BadInput(
        "stage trainable_token_ids=['a']",
        lambda: _stage(trainable_token_ids=["a"]),
        r"trainable_token_ids must be a list of integer ids",
    ),
    # train / generate flags (refused by name before any work)
    BadInput("train --steps 0", lambda: _train("--steps", "0"), r"--steps must be an integer >= 1"),
    BadInput("train --lr nan", lambda: _train("--lr", "nan"), r"--learning_rate must be a finite number"),
    BadInput("train --batch-size 0", lambda: _train("--batch-size", "0"), r"--batch_size must be an integer >= 1"),
    BadInput("train --seed -1", lambda: _train("--seed", "-1"), r"--seed must be an integer >= 0"),
    BadInput(
        "generate --max-new-tokens 0",
        lambda: _generate("--max-new-tokens", "0"),
        r"--max-new-tokens must be an integer >= 1",
    ),
    BadInput(
        "generate --temperature nan",
        lambda: _generate("--temperature", "nan"),
        r"--temperature must be a finite number",
    ),
    BadInput("generate --tasks 42", lambda: _generate("--tasks", "42"), r"--tasks must be at most 41"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case):
    assert_clear_error(case)
