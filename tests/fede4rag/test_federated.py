"""The Flower apps on an in-process grid (three company nodes, a tiny random BERT with MiniLM's tokenizer): plaintext
and CKKS rounds agree, the server never holds the secret key, bad clients are rejected and the round continues."""

import numpy as np
import pytest

from hf_ext.core.federated import run_local
from hf_ext.fede4rag.he import ClientCipher, flatten_state, make_keys, unflatten_state
from hf_ext.fede4rag.strategy import record_to_chunks
from hf_ext.fede4rag.task import RunConfig

NODES = 3  # PepsiCo, P&G, Boeing (partition ids 0-2)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from hf_ext.fede4rag.testing import tiny_encoder_folder

    root = tmp_path_factory.mktemp("fede4rag")
    encoder = tiny_encoder_folder(root / "encoder")
    keys = make_keys()
    (root / "secret.ctx").write_bytes(keys.secret)
    (root / "public.ctx").write_bytes(keys.public)
    run = RunConfig(rounds=1, train_fraction=0.02, lora_layers=(1,), lora_rank=2, max_passage_length=32,
                    max_query_length=16, learning_rate=1e-2, encoder_path=str(encoder), cache_dir=str(root / "cache"))
    return run, keys, root


def _run(run, root, **extra):
    from hf_ext.fede4rag.client_app import app as client_app
    from hf_ext.fede4rag.server_app import app as server_app

    # the secret context's path is client-only (node config); the run config, which the server gets, has none
    config = {**run.to_run_config(), "he-public-path": str(root / "public.ctx"), **extra}
    nodes = [{"he-secret-path": str(root / "secret.ctx")} for _ in range(NODES)]
    return run_local(server_app, client_app, num_nodes=NODES, run_config=config, node_configs=nodes)


def _adapter(run):
    from hf_ext.fede4rag.task import build_model
    from hf_ext.fede4rag.encoder import adapter_arrays

    return adapter_arrays(build_model(run)[0])


def test_encrypted_round_equals_plaintext_round(setup):
    run, keys, root = setup
    plain = _run(run, root)
    assert plain["summary"]["num-rejected"] == 0
    plain_state = {k: plain["arrays"][k].numpy() for k in plain["arrays"].keys()}
    init = _adapter(run)
    assert set(plain_state) == set(init)
    assert any(not np.allclose(plain_state[k], init[k]) for k in init)  # the round trained something
    enc = _run(RunConfig(**{**run.__dict__, "encrypt": True}), root)
    assert enc["summary"]["num-rejected"] == 0
    chunks = record_to_chunks(enc["arrays"])  # what the server holds: ciphertext only
    flat, layout = flatten_state(init)
    decrypted = unflatten_state(ClientCipher(keys.secret, keys.public).decrypt(chunks, flat.size), layout)
    assert max(np.abs(decrypted[k] - plain_state[k]).max() for k in init) <= 1e-6


@pytest.mark.slow  # test_he covers each rejection on its own, fast
def test_bad_clients_are_rejected_and_the_round_continues(setup):
    run, keys, root = setup
    enc = RunConfig(**{**run.__dict__, "encrypt": True})
    res = _run(enc, root, **{"corrupt-partition": 1, "foreign-key-partition": 2})
    reasons = dict(res["rejected"])
    assert res["summary"]["num-rejected"] == 2 and len(reasons) == 2
    assert any("does not deserialise" in r for r in reasons.values())
    assert any("another key" in r for r in reasons.values())
    assert len(record_to_chunks(res["arrays"])) >= 1  # the honest client's upload went through
    plain = _run(run, root, **{"corrupt-partition": 0})
    assert plain["summary"]["num-rejected"] == 1
    assert "NaN" in next(iter(dict(plain["rejected"]).values()))


def test_released_sampling_trains_one_client_per_round(setup):
    run, _, root = setup
    res = _run(RunConfig(**{**run.__dict__, "one_client": True, "rounds": 2}), root)
    sampled = dict(res["sampled"])
    assert len(sampled) == 2 and all("," not in v for v in sampled.values())
