"""Bad input for FedE4RAG's public entry points (run config, LoRA config, CKKS keys and ciphers, the server's
aggregation, the adapter state a client loads): each must fail with a clear error naming the field and its range."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from hf_ext.core.testing import BadInput, assert_clear_error


def _run(**kw):
    from hf_ext.fede4rag.task import RunConfig

    return RunConfig(**kw)


def _run_config(**kw):
    from hf_ext.fede4rag.task import RunConfig

    return RunConfig.from_run_config(kw)


@functools.lru_cache(maxsize=1)
def _keys():
    from hf_ext.fede4rag.he import make_keys

    return make_keys()


def _cipher():
    from hf_ext.fede4rag.he import ClientCipher

    return ClientCipher(_keys().secret, _keys().public)


def _server(public=None):
    from hf_ext.fede4rag.he import ServerAggregator

    return ServerAggregator(_keys().public if public is None else public)


def _params(**kw):
    from hf_ext.fede4rag.he import CKKSParams

    return CKKSParams(**kw)


def _unflatten(flat, layout):
    from hf_ext.fede4rag.he import unflatten_state

    return unflatten_state(np.asarray(flat, dtype=np.float64), layout)


@functools.lru_cache(maxsize=1)
def _model(tmp=None):
    import tempfile

    from hf_ext.fede4rag.task import RunConfig, build_model
    from hf_ext.fede4rag.testing import tiny_encoder_folder

    folder = tiny_encoder_folder(tempfile.mkdtemp(prefix="fede4rag_fuzz_"))
    return build_model(RunConfig(lora_layers=(1,), lora_rank=2, encoder_path=str(folder)))[0]


def _load(transform):
    from hf_ext.fede4rag.encoder import adapter_arrays, load_trainable_state

    model = _model()
    load_trainable_state(model, transform(adapter_arrays(model)))


def _nan_first(state):
    key = sorted(state)[0]
    state[key] = np.full_like(state[key], np.nan)
    return state


def _reshape_first(state):
    key = sorted(state)[0]
    state[key] = state[key].reshape(-1)
    return state


def _strategy(**kw):
    from hf_ext.fede4rag.strategy import make_strategy

    return make_strategy(**kw)


def _lora(rank):
    from hf_ext.fede4rag.encoder import lora_config

    return lora_config(rank)


def _config(**kw):
    from hf_ext.fede4rag.testing import tiny_config

    return tiny_config(**kw)


def _config_loaded(tmp_path_factory=None, **changes):
    """A saved tiny config whose config.json was edited by hand: the same checks run on load."""
    import json
    import tempfile
    from pathlib import Path

    from hf_ext.fede4rag import FedE4RAGConfig

    folder = Path(tempfile.mkdtemp(prefix="fede4rag_cfg_"))
    _config().save_pretrained(folder)
    data = json.loads((folder / "config.json").read_text())
    data.update(changes)
    (folder / "config.json").write_text(json.dumps(data))
    return FedE4RAGConfig.from_pretrained(folder)


def _forward(**inputs):
    import torch

    from hf_ext.fede4rag.testing import tiny_inputs, tiny_retriever

    batch = tiny_inputs()
    batch.update(inputs)
    with torch.no_grad():
        return tiny_retriever()(**batch)


def _forward_hidden(fill):
    import torch

    from hf_ext.fede4rag.testing import tiny_retriever

    model = tiny_retriever()
    hidden = torch.zeros(2, 5, model.config.hidden_size)
    hidden[0, 1, 3] = fill
    with torch.no_grad():
        return model(hidden_states=hidden, attention_mask=torch.ones(2, 5, dtype=torch.long), start_layer=1)


def _nan():
    return float("nan")


CASES = [
    # the retriever's config: types and ranges at construction and on load (issue 38)
    BadInput("config hidden_dropout_prob 1.5", lambda: _config(hidden_dropout_prob=1.5), r"hidden_dropout_prob.*\[0"),
    BadInput("config normalize text", lambda: _config(normalize="yes"), r"normalize must be a bool"),
    BadInput("config layer_norm_eps NaN", lambda: _config(layer_norm_eps=_nan()), r"layer_norm_eps.*finite"),
    BadInput("config heads do not divide width", lambda: _config(hidden_size=30), r"multiple of num_attention_heads"),
    BadInput("config vocab_size 0", lambda: _config(vocab_size=0), r"vocab_size must be an integer >= 1"),
    BadInput("config num_hidden_layers -1", lambda: _config(num_hidden_layers=-1), r"num_hidden_layers.*>= 1"),
    BadInput("config initializer_range negative", lambda: _config(initializer_range=-1.0), r"initializer_range.*> 0"),
    BadInput("config max_query_length None", lambda: _config(max_query_length=None), r"max_query_length.*int"),
    BadInput("config pooling number", lambda: _config(pooling=3), r"pooling must be one of"),
    BadInput("loaded config pooling unknown", lambda: _config_loaded(pooling="max"), r"pooling must be one of"),
    BadInput(
        "loaded config dropout text", lambda: _config_loaded(attention_probs_dropout_prob="0.1"), r"attention_probs"
    ),
    BadInput("loaded config normalize null", lambda: _config_loaded(normalize=None), r"normalize must be a bool"),
    BadInput("loaded config max_passage_length 1e9", lambda: _config_loaded(max_passage_length=10**9), r"max_passage"),
    # forwards: what would pass silently or crash deep inside torch
    BadInput("forward hidden_states NaN", lambda: _forward_hidden(float("nan")), r"hidden_states contains NaN or inf"),
    BadInput("forward hidden_states inf", lambda: _forward_hidden(float("inf")), r"hidden_states contains NaN or inf"),
    BadInput(
        "forward input_ids beyond vocab",
        lambda: _forward(input_ids=__import__("torch").full((3, 9), 10**6)),
        r"input_ids must be token ids in \[0, 100\)",
    ),  # fmt: skip
    BadInput("forward float input_ids", lambda: _forward(input_ids=__import__("torch").zeros(3, 9)), r"input_ids"),
    BadInput("forward mask shape", lambda: _forward(attention_mask=__import__("torch").ones(3, 4)), r"attention_mask"),
    BadInput(
        "forward NaN mask",
        lambda: _forward(attention_mask=__import__("torch").full((3, 9), float("nan"))),
        r"attention_mask contains NaN",
    ),
    # the run config: types (a string / None / bool where a number or flag is needed)
    BadInput("rounds text", lambda: _run(rounds="3"), r"rounds must be an integer"),
    BadInput("learning_rate None", lambda: _run(learning_rate=None), r"learning_rate.*finite"),
    BadInput("temperature text", lambda: _run(temperature="0.05"), r"temperature.*finite"),
    BadInput("seed negative", lambda: _run(seed=-1), r"seed must be an integer >= 0"),
    BadInput("encrypt text", lambda: _run(encrypt="no"), r"encrypt must be a bool"),
    BadInput("cache_dir None", lambda: _run(cache_dir=None), r"cache_dir must be a string"),
    BadInput("rounds zero", lambda: _run(rounds=0), r"rounds.*>= 1"),
    BadInput("batch_size one (no in-batch negative)", lambda: _run(batch_size=1), r"batch_size.*>= 2"),
    BadInput("lora_rank zero", lambda: _run(lora_rank=0), r"lora_rank.*>= 1"),
    BadInput("lora_rank negative", lambda: _run(lora_rank=-4), r"lora_rank.*>= 1"),
    BadInput("learning_rate NaN", lambda: _run(learning_rate=float("nan")), r"learning_rate.*finite"),
    BadInput("learning_rate zero", lambda: _run(learning_rate=0.0), r"learning_rate.*\(0"),
    BadInput("kd_lambda negative", lambda: _run(kd_lambda=-1.0), r"kd_lambda.*\[0"),
    BadInput("kd_lambda Inf", lambda: _run(kd_lambda=float("inf")), r"kd_lambda.*finite"),
    BadInput("local_epochs zero", lambda: _run(local_epochs=0.0), r"local_epochs"),
    BadInput("max_query_length zero", lambda: _run(max_query_length=0), r"max_query_length.*>= 2"),
    BadInput("max_passage_length negative", lambda: _run(max_passage_length=-1), r"max_passage_length.*>= 2"),
    BadInput("holdout above 0.9", lambda: _run(holdout=1.5), r"holdout.*\[0.0, 0.9\]"),
    BadInput("train_fraction zero", lambda: _run(train_fraction=0.0), r"train_fraction"),
    BadInput("lora_layers empty", lambda: _run(lora_layers=()), r"lora_layers"),
    BadInput("lora_layers negative", lambda: _run(lora_layers=(-1,)), r"lora_layers.*>= 0"),
    BadInput("run config rounds text", lambda: _run_config(rounds="three"), r"'rounds'.*int"),
    BadInput("run config lora-layers text", lambda: _run_config(**{"lora-layers": "4,x"}), r"'lora-layers'"),
    BadInput("LoRA config rank zero", lambda: _lora(0), r"lora rank.*>= 1"),
    BadInput("CKKS ring not a power of two", lambda: _params(poly_modulus_degree=3000), r"power of two"),
    BadInput("CKKS scale too small", lambda: _params(scale_bits=8), r"scale_bits.*>= 20"),
    BadInput("encrypt NaN parameters", lambda: _cipher().encrypt(np.array([0.1, np.nan])), r"NaN"),
    BadInput("decrypt wrong chunk count", lambda: _cipher().decrypt([], 10), r"chunks.*expected 1"),
    BadInput(
        "secret context garbage",
        lambda: __import__("hf_ext.fede4rag.he", fromlist=["x"]).ClientCipher(b"garbage", _keys().public),
        r"cannot deserialise the CKKS context",
    ),
    BadInput("server given the secret context", lambda: _server(_keys().secret), r"must not hold the secret key"),
    BadInput(
        "server average size and chunk count disagree",
        lambda: _server().average({}, 5, size=10),
        r"10 values need 1 chunks",
    ),
    BadInput("unflatten too short", lambda: _unflatten([1.0], [("a", (2, 2))]), r"too short for 'a'"),
    BadInput("unflatten too long", lambda: _unflatten([1.0] * 5, [("a", (2, 2))]), r"5 values.*needs 4"),
    BadInput(
        "plaintext strategy without a reference", lambda: _strategy(encrypt=False, public_context=None), r"reference"
    ),
    BadInput("adapter state with NaN", lambda: _load(_nan_first), r"finite"),
    BadInput("adapter state of the wrong shape", lambda: _load(_reshape_first), r"shape"),
    BadInput("adapter state with a missing key", lambda: _load(lambda s: dict(list(s.items())[1:])), r"missing"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gets_a_clear_error(case):
    assert_clear_error(case)
