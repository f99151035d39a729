"""CKKS aggregation: the server cannot decrypt, encrypted FedAvg equals plaintext FedAvg, bad uploads are rejected."""

import numpy as np
import pytest

from hf_ext.fede4rag.he import (CKKSParams, ClientCipher, ServerAggregator, context_id, flatten_state, make_keys,
                                unflatten_state)


@pytest.fixture(scope="module")
def keys():
    return make_keys()


def _uploads(cipher, vectors):
    return {f"c{i}": (cipher.encrypt(v), cipher.context_id) for i, v in enumerate(vectors)}


def test_server_holds_no_secret_key_and_cannot_decrypt(keys):
    import tenseal as ts

    server = ServerAggregator(keys.public)
    assert not server.can_decrypt() and not server.ctx.is_private()
    cipher = ClientCipher(keys.secret, keys.public)
    blob = cipher.encrypt(np.full(10, 0.5))[0]
    with pytest.raises(ValueError, match="secret"):
        ts.ckks_vector_from(server.ctx, blob).decrypt()
    with pytest.raises(ValueError, match="must not hold the secret key"):
        ServerAggregator(keys.secret)
    with pytest.raises(ValueError, match="no secret key"):
        ClientCipher(keys.public, keys.public)


def test_encrypted_fedavg_equals_plaintext_fedavg(keys):
    rng = np.random.default_rng(0)
    vectors = [rng.normal(0, 0.05, 10_000) for _ in range(5)]
    cipher, server = ClientCipher(keys.secret, keys.public), ServerAggregator(keys.public)
    n_chunks = -(-10_000 // cipher.slots)
    chunks, rejected = server.average(_uploads(cipher, vectors), n_chunks)
    assert rejected == {} and len(chunks) == n_chunks == 3
    out = cipher.decrypt(chunks, 10_000)
    assert np.abs(out - np.mean(vectors, axis=0)).max() <= 1e-6


def test_bad_uploads_are_rejected_and_the_round_continues(keys):
    rng = np.random.default_rng(1)
    vectors = [rng.normal(0, 0.05, 5000) for _ in range(3)]
    cipher, server = ClientCipher(keys.secret, keys.public), ServerAggregator(keys.public)
    uploads = _uploads(cipher, vectors)
    other = make_keys()
    foreign = ClientCipher(other.secret, other.public)
    uploads["foreign"] = (foreign.encrypt(vectors[0]), foreign.context_id)
    uploads["garbage"] = ([b"\x00not a ciphertext"] * 2, cipher.context_id)
    uploads["short"] = (cipher.encrypt(vectors[0])[:1], cipher.context_id)
    chunks, rejected = server.average(uploads, 2)
    assert set(rejected) == {"foreign", "garbage", "short"}
    assert "context" in rejected["foreign"] and "does not deserialise" in rejected["garbage"]
    assert "expected 2" in rejected["short"]
    assert np.abs(cipher.decrypt(chunks, 5000) - np.mean(vectors, axis=0)).max() <= 1e-6
    none, why = server.average({"g": uploads["garbage"]}, 2)
    assert none is None and "does not deserialise" in why["g"]


def test_context_ids_differ_per_key_and_bad_contexts_fail_clearly(keys):
    assert context_id(keys.public) == keys.context_id != make_keys().context_id
    with pytest.raises(ValueError, match="cannot deserialise the CKKS context"):
        ServerAggregator(b"not a context")
    with pytest.raises(ValueError, match="power of two"):
        CKKSParams(poly_modulus_degree=5000)
    with pytest.raises(ValueError, match="NaN"):
        ClientCipher(keys.secret, keys.public).encrypt(np.array([np.nan]))


def test_flatten_roundtrip():
    state = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, dtype=np.float32)}
    flat, layout = flatten_state(state)
    assert flat.shape == (10,)
    back = unflatten_state(flat, layout)
    assert all(np.array_equal(back[k], state[k]) for k in state)
    with pytest.raises(ValueError, match="needs 10"):
        unflatten_state(np.zeros(11), layout)
