"""CKKS aggregation: the server cannot decrypt, encrypted FedAvg equals plaintext FedAvg, bad uploads are rejected."""

import numpy as np
import pytest

from hf_ext.fede4rag.he import (
    CKKSParams,
    ClientCipher,
    ServerAggregator,
    context_id,
    flatten_state,
    make_keys,
    unflatten_state,
)


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
    no_pk = ts.context_from(keys.public).serialize(save_public_key=False)
    with pytest.raises(ValueError, match="no public key"):
        ServerAggregator(no_pk)


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


@pytest.mark.parametrize("bad_first", [True, False])
def test_upload_under_other_ckks_settings_with_the_honest_context_id_is_rejected_alone(keys, bad_first):
    """The context id is self-declared: a client can name the honest one yet encrypt at another scale (same key:
    the chunks deserialise, SEAL refuses the addition) or under other CKKS parameters (the chunks do not parse).
    Either is rejected on its own, wherever it sits in the uploads, and the rest average as in plaintext FedAvg."""
    rng = np.random.default_rng(2)
    vectors = [rng.normal(0, 0.05, 5000) for _ in range(3)]
    cipher, server = ClientCipher(keys.secret, keys.public), ServerAggregator(keys.public)
    off_scale = ClientCipher(keys.secret, keys.public)
    off_scale.ctx.global_scale = 2.0**30  # the honest key, another scale
    other = make_keys(CKKSParams(coeff_mod_bit_sizes=(60, 40, 40, 40)))  # same N and slots, other moduli
    other_params = ClientCipher(other.secret, other.public)
    bad = {
        "scale": (off_scale.encrypt(vectors[0] + 1.0), cipher.context_id),
        "params": (other_params.encrypt(vectors[0] + 1.0), cipher.context_id),
    }
    honest = _uploads(cipher, vectors)
    uploads = {**bad, **honest} if bad_first else {**honest, **bad}
    chunks, rejected = server.average(uploads, 2, size=5000)
    assert set(rejected) == {"scale", "params"}
    assert "cannot be added" in rejected["scale"] and "scale mismatch" in rejected["scale"]
    assert "does not deserialise" in rejected["params"]
    assert np.abs(cipher.decrypt(chunks, 5000) - np.mean(vectors, axis=0)).max() <= 1e-6
    # The same without the declared size: the chunk lengths come from the majority of uploads.
    chunks, rejected = server.average(uploads, 2)
    assert set(rejected) == {"scale", "params"}
    assert np.abs(cipher.decrypt(chunks, 5000) - np.mean(vectors, axis=0)).max() <= 1e-6
    none, why = server.average({"scale": bad["scale"]}, 2)
    assert none is None and "scale mismatch" in why["scale"]


def test_chunks_of_the_wrong_length_or_at_the_last_level_are_rejected_alone(keys):
    import tenseal as ts

    rng = np.random.default_rng(3)
    vectors = [rng.normal(0, 0.05, 5000) for _ in range(2)]
    cipher, server = ClientCipher(keys.secret, keys.public), ServerAggregator(keys.public)
    uploads = _uploads(cipher, vectors)
    uploads["short"] = (cipher.encrypt(vectors[0][:4999]), cipher.context_id)  # last chunk: 903 values, not 904
    # two plaintext products use both rescaling levels: no room is left for the server's 1/K product
    spent = [
        (ts.ckks_vector(cipher.ctx, part.tolist()) * 1.0 * 1.0).serialize()
        for part in (vectors[0][:4096], vectors[0][4096:])
    ]
    uploads["spent"] = (spent, cipher.context_id)
    chunks, rejected = server.average(uploads, 2, size=5000)
    assert set(rejected) == {"short", "spent"}
    assert "903 values, expected 904" in rejected["short"] and "last modulus level" in rejected["spent"]
    assert np.abs(cipher.decrypt(chunks, 5000) - np.mean(vectors, axis=0)).max() <= 1e-6
    with pytest.raises(ValueError, match="need 2 chunks"):
        server.average(uploads, 3, size=5000)  # a server-side misconfiguration, not a client's fault


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


def test_encrypted_upload_travels_as_objects_below_the_grpc_limit(keys):
    """Flower 1.42 pushes a message as separate objects (message, records, arrays, ≤ 5 MiB array chunks), one gRPC
    call each, so the 512 MiB gRPC limit bounds an object, not an upload: a large encrypted upload (the full encoder,
    ~1.7 GiB) is carried in chunks. Checked on real ciphertexts plus one 12 MiB array: every deflated object stays
    under the chunk size (plus its header), and inflating the objects restores the ciphertext bytes exactly."""
    from flwr.app import Array, ArrayRecord, RecordDict
    from flwr.common.constant import FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

    from hf_ext.fede4rag.strategy import chunks_to_record, record_to_chunks

    chunks = ClientCipher(keys.secret, keys.public).encrypt(np.linspace(-1, 1, 9000))  # 3 ciphertexts
    big = np.arange(3 * 2**20, dtype=np.float32)  # 12 MiB: more than one array chunk
    msg = RecordDict({"arrays": chunks_to_record(chunks), "big": ArrayRecord({"x": Array(big)})})  # a message's content
    objects = get_all_nested_objects(msg)
    contents = {oid: obj.deflate() for oid, obj in objects.items()}
    assert sum(map(len, contents.values())) > sum(map(len, chunks)) + big.nbytes  # everything is carried
    assert max(map(len, contents.values())) <= FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE + 1024
    assert sum(type(o).__name__ == "ArrayChunk" for o in objects.values()) >= 3 + 3  # 12 MiB / 5 MiB -> 3 chunks
    again = inflate_object_from_contents(msg.object_id, contents)
    assert record_to_chunks(again["arrays"]) == chunks
    np.testing.assert_array_equal(again["big"]["x"].numpy(), big)
