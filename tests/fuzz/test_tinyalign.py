"""TinyAlign bad-input fuzz suite: configs, forward, generate, the processor, the memory bank and reproduce args
each refuse bad input with an error that names the field and the allowed range."""

from __future__ import annotations

import functools

import pytest
import torch

import hf_ext  # noqa: F401  (registers the config-key guard)
from hf_ext.core.testing import BadInput, assert_clear_error
from hf_ext.core.validation import UnknownConfigKeyError
from hf_ext.tinyalign.memory import MemoryBank, MemoryBankError
from hf_ext.tinyalign.modeling_tinyalign import TinyAlignForConditionalGeneration
from hf_ext.tinyalign.testing import tiny_batch, tiny_config, tiny_model, tiny_processor


@functools.cache
def _model():
    return tiny_model().eval()


def _batch(**changes):
    batch = dict(tiny_batch(n=2))
    batch.update(changes)
    return batch


def _forward(**changes):
    with torch.no_grad():
        return _model()(**_batch(**changes))


def _generate(**changes):
    batch = _batch(**changes)
    n = int(_model().config.num_image_tokens + _model().config.num_memory_tokens + 8)
    with torch.no_grad():
        return _model().generate(
            input_ids=batch["input_ids"][:, :n],
            attention_mask=batch["attention_mask"][:, :n],
            pixel_values=batch["pixel_values"],
            max_new_tokens=2,
            do_sample=False,
        )


def _with_ids(fn):
    ids = tiny_batch(n=2)["input_ids"].clone()
    fn(ids)
    return ids


def _reproduce(*argv):
    """`main(argv)` with the first expensive step replaced by an error: a flag that slips through validation shows
    up as a deep failure at once instead of starting a real run."""
    from unittest import mock

    from hf_ext.tinyalign import reproduce

    def reached(*args, **kwargs):
        raise RuntimeError(f"bad flags {argv} reached the run (setup)")

    with mock.patch.object(reproduce, "setup", reached):
        return reproduce.main(["--out", "/dev/null/hf_ext_fuzz", *argv])


def _bank(keys=None, values=None):
    return MemoryBank(
        keys if keys is not None else torch.randn(4, 16), values if values is not None else torch.randn(4, 4, 8)
    )


def _loaded(**changes):
    """A tiny config saved and loaded back with `changes` written into its config dict (as a hand-edited
    `config.json` would be): loading runs the same checks as construction."""
    from hf_ext.tinyalign.configuration_tinyalign import TinyAlignConfig

    return TinyAlignConfig.from_dict({**tiny_config().to_dict(), **changes})


def _train(*argv):
    """`hf-ext train tinyalign` argument parsing only (the dataclasses validate; nothing trains)."""
    from hf_ext.tinyalign.train import build_parser

    return build_parser().parse_args_into_dataclasses(args=[*argv, "--output_dir", "/dev/null/hf_ext_fuzz"])


def _pretrained(*argv):
    """`hf-ext reproduce tinyalign --pretrained` with the frozen parts' loader replaced by an error."""
    from unittest import mock

    from hf_ext.tinyalign import pretrained_parts

    def reached(*args, **kwargs):
        raise RuntimeError(f"bad flags {argv} reached the run (load_frozen_parts)")

    with mock.patch.object(pretrained_parts, "load_frozen_parts", reached):
        from hf_ext.tinyalign.reproduce_pretrained import main

        return main(["--pretrained", "--out", "/dev/null/hf_ext_fuzz", *argv])


CASES = [
    # configs
    BadInput(
        "config typo key", lambda: tiny_config(memory_topk=3), r"'memory_topk'.*memory_top_k", UnknownConfigKeyError
    ),
    BadInput("config memory_top_k=0", lambda: tiny_config(memory_top_k=0), r"memory_top_k must be (an integer )?>= 1"),
    BadInput(
        "config alpha=nan",
        lambda: tiny_config(alpha=float("nan")),
        r"alpha must (lie in|be a finite number in) \[0, 1\]",
    ),
    BadInput("config alpha=1.5", lambda: tiny_config(alpha=1.5), r"alpha must (lie in|be a finite number in) \[0, 1\]"),
    BadInput("config image_size=0", lambda: tiny_config(image_size=0), r"image_size must be an integer >= 1"),
    BadInput("config num_image_tokens=-1", lambda: tiny_config(num_image_tokens=-1), r"num_image_tokens.*>= 1"),
    BadInput("config value_num_latents=0", lambda: tiny_config(value_num_latents=0), r"value_num_latents.*>= 1"),
    BadInput("config value_num_heads=0", lambda: tiny_config(value_num_heads=0), r"value_num_heads.*>= 1"),
    BadInput("config value_d_model odd", lambda: tiny_config(value_d_model=15), r"value_d_model must be an even"),
    BadInput("config latent_dim % heads", lambda: tiny_config(value_latent_dim=9), r"divisible by value_num_heads"),
    BadInput("config image_token_id=-1", lambda: tiny_config(image_token_id=-1), r"image_token_id=-1.*vocab"),
    BadInput("config query_prompt_length<0", lambda: tiny_config(query_prompt_length=-2), r"query_prompt_length"),
    # forward
    BadInput(
        "memory_ids=-1",
        lambda: _forward(memory_ids=torch.full((2, 2), -1)),
        r"memory_ids must be bank entries in \[0, 24\)",
    ),
    BadInput(
        "memory_ids past the bank",
        lambda: _forward(memory_ids=torch.full((2, 2), 24)),
        r"memory_ids must be bank entries in \[0, 24\)",
    ),
    BadInput(
        "memory_ids wrong k",
        lambda: _forward(memory_ids=torch.zeros(2, 3, dtype=torch.long)),
        r"memory_ids.*shape \(batch=2, memory_top_k=2\)",
    ),
    BadInput("memory_ids float", lambda: _forward(memory_ids=torch.zeros(2, 2)), r"memory_ids must be an integer"),
    BadInput(
        "empty batch",
        lambda: _forward(
            input_ids=torch.zeros(0, 5, dtype=torch.long),
            attention_mask=torch.zeros(0, 5, dtype=torch.long),
            labels=None,
            pixel_values=torch.zeros(0, 1, 8, 8),
        ),
        r"input_ids is empty",
    ),
    BadInput(
        "OOV input_ids",
        lambda: _forward(input_ids=_with_ids(lambda i: i.__setitem__((0, -1), 40))),
        r"input_ids must lie in \[0, vocab_size=40\)",
    ),
    BadInput(
        "negative input_ids",
        lambda: _forward(input_ids=_with_ids(lambda i: i.__setitem__((1, 0), -3))),
        r"input_ids must lie in \[0, vocab_size=40\), got \[-3\]",
    ),
    BadInput(
        "float input_ids",
        lambda: _forward(input_ids=tiny_batch(n=2)["input_ids"].float()),
        r"input_ids must be an integer tensor",
    ),
    BadInput(
        "NaN pixel_values",
        lambda: _forward(pixel_values=torch.full((2, 1, 8, 8), float("nan"))),
        r"pixel_values must be finite",
    ),
    BadInput(
        "pixel_values wrong shape",
        lambda: _forward(pixel_values=torch.zeros(2, 3, 8, 8)),
        r"pixel_values must have shape \(batch, 1, 8, 8\)",
    ),
    BadInput(
        "pixel_values batch mismatch", lambda: _forward(pixel_values=torch.zeros(3, 1, 8, 8)), r"3 images for 2 rows"
    ),
    BadInput(
        "NaN labels",
        lambda: _forward(labels=torch.full(tiny_batch(n=2)["input_ids"].shape, float("nan"))),
        r"labels must be integer token ids",
    ),
    BadInput(
        "labels out of range",
        lambda: _forward(labels=tiny_batch(n=2)["input_ids"] + 100),
        r"labels must lie in \[0, vocab_size=40\) or be -100",
    ),
    BadInput(
        "labels wrong shape",
        lambda: _forward(labels=torch.zeros(2, 3, dtype=torch.long)),
        r"labels must have the shape of input_ids",
    ),
    BadInput(
        "attention_mask wrong shape",
        lambda: _forward(attention_mask=torch.ones(2, 3, dtype=torch.long)),
        r"attention_mask must have the shape of input_ids",
    ),
    BadInput(
        "no bank attached",
        lambda: TinyAlignForConditionalGeneration(tiny_config())(**_batch()),
        r"no memory bank attached",
        MemoryBankError,
    ),
    # generate
    BadInput(
        "generate OOV prompt",
        lambda: _generate(input_ids=_with_ids(lambda i: i.__setitem__((0, 0), 99))),
        r"input_ids must lie in \[0, vocab_size=40\)",
    ),
    BadInput(
        "generate NaN image",
        lambda: _generate(pixel_values=torch.full((2, 1, 8, 8), float("inf"))),
        r"pixel_values must be finite",
    ),
    # processor and bank
    BadInput("processor empty batch", lambda: tiny_processor(tiny_config())([], None), r"images is an empty batch"),
    BadInput(
        "processor caption count",
        lambda: tiny_processor(tiny_config())(torch.zeros(2, 8, 8).tolist(), ["a"]),
        r"one caption per image \(2\)",
    ),
    BadInput(
        "bank NaN keys", lambda: _bank(keys=torch.full((4, 16), float("nan"))), r"must be finite", MemoryBankError
    ),
    BadInput(
        "bank search k=0",
        lambda: _bank().search(torch.randn(1, 16), 0),
        r"top_k must be an integer >= 1",
        MemoryBankError,
    ),
    BadInput(
        "bank empty",
        lambda: _bank(keys=torch.zeros(0, 16), values=torch.zeros(0, 4, 8)),
        r"memory bank is empty",
        MemoryBankError,
    ),
    # reproduce args (refused before any training)
    BadInput("reproduce --ks 0", lambda: _reproduce("--ks", "0"), r"--ks must be top-k values >= 1"),
    BadInput("reproduce --fractions 1.5", lambda: _reproduce("--fractions", "1.5"), r"--fractions must lie in"),
    BadInput("reproduce --fractions nan", lambda: _reproduce("--fractions", "nan"), r"--fractions must lie in"),
    BadInput("reproduce --epochs 0", lambda: _reproduce("--epochs", "0"), r"--epochs must be > 0"),
    BadInput("reproduce --workers 0", lambda: _reproduce("--workers", "0"), r"--workers must be >= 1"),
    BadInput("reproduce --digits-only alone", lambda: _reproduce("--digits-only"), r"--digits-only .* without --full"),
    # strict config fields (construction and load), issue 38
    BadInput(
        "config num_image_tokens='4'", lambda: tiny_config(num_image_tokens="4"), r"num_image_tokens must be an integer"
    ),
    BadInput(
        "config value_text_length=None",
        lambda: tiny_config(value_text_length=None),
        r"value_text_length must be an integer",
    ),
    BadInput(
        "config query_prompt_length=nan",
        lambda: tiny_config(query_prompt_length=float("nan")),
        r"query_prompt_length must be an integer",
    ),
    BadInput(
        "config vision_feature_layer=True",
        lambda: tiny_config(vision_feature_layer=True),
        r"vision_feature_layer must be an integer",
    ),
    BadInput("config use_retrieval='no'", lambda: tiny_config(use_retrieval="no"), r"use_retrieval must be a bool"),
    BadInput(
        "config memory_token_norm=1", lambda: tiny_config(memory_token_norm=1), r"memory_token_norm must be a bool"
    ),
    BadInput("config alpha='0.4'", lambda: tiny_config(alpha="0.4"), r"alpha must be a finite number"),
    BadInput(
        "config text_model_name_or_path=3",
        lambda: tiny_config(text_model_name_or_path=3),
        r"text_model_name_or_path must be a string",
    ),
    BadInput("loaded config memory_top_k='4'", lambda: _loaded(memory_top_k="4"), r"memory_top_k must be an integer"),
    BadInput("loaded config alpha=inf", lambda: _loaded(alpha=float("inf")), r"alpha must be a finite number"),
    BadInput(
        "loaded config query_includes_answer='false'",
        lambda: _loaded(query_includes_answer="false"),
        r"query_includes_answer must be a bool",
    ),
    BadInput(
        "processor NaN pixels",
        lambda: tiny_processor(tiny_config())(torch.full((1, 1, 8, 8), float("nan")), ["a thin narrow zero , upright"]),
        r"images must hold finite pixel values",
    ),
    # train flags (refused by name while parsing, before anything loads)
    BadInput(
        "train --n_memory -3",
        lambda: _train("--setting", "pretrained", "--n_memory", "-3"),
        r"--n_memory must be an integer >= 1",
    ),
    BadInput(
        "train --n-memory with the tiny setting",
        lambda: _train("--n-memory", "50"),
        r"--n_memory applies to --setting pretrained only",
    ),
    BadInput(
        "train --variant k0", lambda: _train("--variant", "k0"), r"--variant must be baseline, k<k> or released-k<k>"
    ),
    BadInput(
        "train --stage pretraining",
        lambda: _train("--stage", "pretraining"),
        r"--stage must be 'pretrain' or 'finetune'",
    ),
    # pretrained reproduce flags (refused before the frozen parts load)
    BadInput(
        "pretrained --n-memory -3", lambda: _pretrained("--n-memory", "-3"), r"--n-memory must be an integer >= 1"
    ),
    BadInput("pretrained --epochs nan", lambda: _pretrained("--epochs", "nan"), r"--epochs must be a finite number"),
    BadInput(
        "pretrained --learning-rate 0",
        lambda: _pretrained("--learning-rate", "0"),
        r"--learning-rate must be a finite number",
    ),
    BadInput("pretrained --seeds -1", lambda: _pretrained("--seeds", "-1"), r"--seeds must be an integer >= 0"),
    BadInput("pretrained --variants kx", lambda: _pretrained("--variants", "kx"), r"variant must be baseline"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case):
    assert_clear_error(case)
