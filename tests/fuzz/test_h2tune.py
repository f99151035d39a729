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
