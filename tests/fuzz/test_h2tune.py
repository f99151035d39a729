"""Bad input for H2Tune's public entry points (run config, adapter config, relation matrix, client round, server
aggregation): each must fail with a clear error that names the field and its allowed range."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from hf_ext.core.testing import BadInput, assert_clear_error


@functools.lru_cache(maxsize=1)
def _client():
    from hf_ext.h2tune.task import CLIENTS, H2TuneClient, RunConfig

    return H2TuneClient(CLIENTS[2], RunConfig(local_steps=1, num_train=8, num_test=2, batch_size=4), 4, index=2)


def _run(**kw):
    from hf_ext.h2tune.task import RunConfig

    return RunConfig(**kw)


def _run_config(**kw):
    from hf_ext.h2tune.task import RunConfig

    return RunConfig.from_run_config(kw)


def _global(fill=None, shape=(4, 7, 16, 16), dtype=np.float32):
    g = np.zeros(shape, dtype=dtype)
    if fill is not None:
        g.reshape(-1)[0] = fill
    return {"g": g}


def _round(incoming):
    return _client().run_round(incoming)


def _adapter(**kw):
    from hf_ext.h2tune.config import H2TuneConfig

    return H2TuneConfig(**kw)


@functools.lru_cache(maxsize=1)
def _peft_model():
    from hf_ext.h2tune.testing import make_adapter, tiny_config

    return make_adapter(tiny_config()).eval()


def _forward_embeds(value):
    model = _peft_model()
    embeds = torch.zeros(1, 4, model.get_base_model().config.hidden_size)
    embeds[0, 1, 3] = value
    with torch.no_grad():
        return model(inputs_embeds=embeds)


def _set_middle(middle):
    from hf_ext.h2tune.model import set_middle

    return set_middle(_peft_model(), middle)


def _loaded_config(tmp_factory, **fields):
    """An adapter folder whose adapter_config.json was edited to hold `fields` (checked on load, not only at
    construction); loaded without the checksum check so that the config check itself is what refuses it."""
    import json
    import tempfile
    from pathlib import Path

    from hf_ext.h2tune.config import H2TuneConfig
    from hf_ext.h2tune.testing import tiny_config

    folder = Path(tempfile.mkdtemp(prefix="h2tune_fuzz_"))
    tiny_config().save_pretrained(str(folder))
    data = json.loads((folder / "adapter_config.json").read_text())
    data.update(fields)
    (folder / "adapter_config.json").write_text(json.dumps(data))
    return H2TuneConfig.from_pretrained(str(folder), verify_checksums=False)


def _adapter_from_dict(data):
    from hf_ext.h2tune.config import H2TuneConfig

    return H2TuneConfig.from_dict(data)


def _relation(*args, **kw):
    from hf_ext.h2tune.alignment import RelationMatrix

    return RelationMatrix(*args, **kw)


def _initial(*args):
    from hf_ext.h2tune.alignment import initial_global

    return initial_global(*args)


def _mean(updates, shape=(4, 7, 16, 16)):
    from hf_ext.h2tune.aggregation import aggregate_mean

    return aggregate_mean(updates, shape)


def _strategy(shape):
    from hf_ext.h2tune.strategy import H2TuneStrategy

    return H2TuneStrategy(shape)


CASES = [
    BadInput("rounds zero", lambda: _run(rounds=0), r"rounds.*>= 1"),
    BadInput("rounds negative", lambda: _run(rounds=-2), r"rounds.*>= 1"),
    BadInput("local_steps zero", lambda: _run(local_steps=0), r"local_steps.*>= 1"),
    BadInput("batch_size zero", lambda: _run(batch_size=0), r"batch_size.*>= 1"),
    BadInput("learning_rate NaN", lambda: _run(learning_rate=float("nan")), r"learning_rate.*> 0"),
    BadInput("learning_rate negative", lambda: _run(learning_rate=-1e-3), r"learning_rate.*> 0"),
    BadInput("num_train zero", lambda: _run(num_train=0), r"num_train.*>= 1"),
    BadInput("num_test negative", lambda: _run(num_test=-1), r"num_test.*>= 1"),
    BadInput("pretrain_steps negative", lambda: _run(pretrain_steps=-5), r"pretrain_steps.*>= 0"),
    BadInput("run config unknown key", lambda: _run_config(**{"corrupt-partition": 1}), r"unknown.*corrupt-partition"),
    BadInput("variant typo", lambda: _run(variant="h2tnue"), r"variant.*choose from"),
    BadInput("run config rounds zero", lambda: _run_config(**{"num-server-rounds": 0}), r"rounds.*>= 1"),
    BadInput("run config local-steps text", lambda: _run_config(**{"local-steps": "many"}), r"local-steps"),
    BadInput("NaN global tensor for the client", lambda: _round(_global(float("nan"))), r"global.*NaN"),
    BadInput("Inf global tensor for the client", lambda: _round(_global(float("inf"))), r"global.*NaN/Inf"),
    BadInput("huge global tensor for the client", lambda: _round(_global(1e30)), r"global.*bound"),
    BadInput("global tensor of the wrong shape", lambda: _round(_global(shape=(3, 7, 16, 16))), r"global.*shape"),
    BadInput("global tensor of integers", lambda: _round(_global(dtype=np.int64)), r"global.*float"),
    BadInput("global tensor empty", lambda: _round({"g": np.zeros(0, np.float32)}), r"global.*shape"),
    BadInput(
        "unexpected key from the server", lambda: _round({"g": _global()["g"], "x": np.ones(1)}), r"unexpected.*'x'"
    ),
    BadInput("adapter rank zero", lambda: _adapter(r=0), r"\br\b.*>= 1|positive"),
    BadInput("adapter rank above global_rank", lambda: _adapter(r=32, global_rank=16), r"global_rank.*>="),
    BadInput("adapter global_rank zero", lambda: _adapter(r=1, global_rank=0), r"global_rank"),
    BadInput("adapter rank as a string", lambda: _adapter(r="8"), r"H2TuneConfig\.r\b.*integer", TypeError),
    BadInput("adapter rank None", lambda: _adapter(r=None), r"H2TuneConfig\.r\b.*integer", TypeError),
    BadInput("adapter rank a float", lambda: _adapter(r=4.0), r"H2TuneConfig\.r\b.*integer", TypeError),
    BadInput("adapter global_rank as a string", lambda: _adapter(global_rank="16"), r"global_rank.*integer", TypeError),
    BadInput("adapter global_rank None", lambda: _adapter(global_rank=None), r"global_rank.*integer", TypeError),
    BadInput("adapter lora_alpha None", lambda: _adapter(lora_alpha=None), r"lora_alpha.*number", TypeError),
    BadInput("adapter lora_alpha as a string", lambda: _adapter(lora_alpha="16"), r"lora_alpha.*number", TypeError),
    BadInput("adapter lora_alpha NaN", lambda: _adapter(lora_alpha=float("nan")), r"lora_alpha.*finite"),
    BadInput("adapter lora_alpha zero", lambda: _adapter(lora_alpha=0), r"lora_alpha.*> 0"),
    BadInput("adapter lora_dropout above 1", lambda: _adapter(lora_dropout=1.5), r"lora_dropout.*< 1"),
    BadInput("adapter lora_dropout negative", lambda: _adapter(lora_dropout=-0.1), r"lora_dropout.*>= 0"),
    BadInput("adapter lora_dropout None", lambda: _adapter(lora_dropout=None), r"lora_dropout.*number", TypeError),
    BadInput("adapter sparsify as a string", lambda: _adapter(sparsify="yes"), r"sparsify.*True or False", TypeError),
    BadInput("adapter use_h2tune off", lambda: _adapter(use_h2tune=False), r"use_h2tune.*must be True"),
    BadInput("adapter target_modules a number", lambda: _adapter(target_modules=5), r"target_modules", TypeError),
    BadInput("adapter target_modules empty list", lambda: _adapter(target_modules=[]), r"target_modules", TypeError),
    BadInput(
        "adapter rank_pattern value a string",
        lambda: _adapter(rank_pattern={"q_proj": "4"}),
        r"rank_pattern\['q_proj'\].*integer",
        TypeError,
    ),
    BadInput("adapter from_dict not a dict", lambda: _adapter_from_dict(["r", 4]), r"from_dict.*dict", TypeError),
    BadInput("adapter from_dict rank a string", lambda: _adapter_from_dict({"r": "4"}), r"\.r\b.*integer", TypeError),
    BadInput("adapter loaded with r null", lambda: _loaded_config(None, r=None), r"\.r\b.*integer", TypeError),
    BadInput(
        "adapter loaded with lora_alpha a string",
        lambda: _loaded_config(None, lora_alpha="16"),
        r"lora_alpha.*number",
        TypeError,
    ),
    BadInput("adapter loaded with dropout 2", lambda: _loaded_config(None, lora_dropout=2.0), r"lora_dropout.*< 1"),
    BadInput("forward with NaN inputs_embeds", lambda: _forward_embeds(float("nan")), r"H2Tune layer input.*NaN/Inf"),
    BadInput("forward with Inf inputs_embeds", lambda: _forward_embeds(float("inf")), r"H2Tune layer input.*NaN/Inf"),
    BadInput("set_middle with NaN", lambda: _set_middle(torch.full((2, 7, 8, 8), float("nan"))), r"middle.*NaN/Inf"),
    BadInput("set_middle of the wrong shape", lambda: _set_middle(torch.zeros(2, 3, 8, 8)), r"middle must be"),
    BadInput("set_middle not a tensor", lambda: _set_middle([[0.0]]), r"middle must be a float tensor"),
    BadInput("relation upload not 4-D", lambda: _relation(4, 2).upload(torch.zeros(2, 7)), r"middle must be"),
    BadInput("relation matrix depth zero", lambda: _relation(4, 0), r"num_layers.*>= 1|depth"),
    BadInput("relation matrix L_max zero", lambda: _relation(0, 0), r"max_layers.*>= 1|L_max"),
    BadInput("relation matrix client deeper than L_max", lambda: _relation(2, 3), r"exceeds L_max"),
    BadInput("relation download wrong shape", lambda: _relation(4, 2).download(torch.zeros(3, 7, 2, 2)), r"L_max"),
    BadInput("relation download NaN", lambda: _relation(4, 2).download(torch.full((4, 7, 2, 2), float("nan"))), r"NaN"),
    BadInput("initial global zero layers", lambda: _initial(0, 7, 16), r"max_layers.*>= 1"),
    BadInput("initial global negative rank", lambda: _initial(4, 7, -1), r"global_rank.*>= 1"),
    BadInput("strategy global shape with a zero", lambda: _strategy((4, 0, 16, 16)), r"global_shape"),
    BadInput("aggregate expected shape negative", lambda: _mean({}, (4, -7, 16, 16)), r"expected_shape"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gets_a_clear_error(case):
    assert_clear_error(case)
