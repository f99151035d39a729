"""FedE4RAG's server trusts the transport, not the payload, and never holds the secret key.

* Plaintext replies are checked against the server's *own* seeded adapter: a malformed first reply no longer becomes
  the reference (it used to get every honest client rejected and its own update made the global model).
* A node reporting another `num-params` is left out alone; the run continues with the others.
* Key separation by construction: the secret context's path is in the clients' node config only; a run config that
  names a secret is refused by both apps; the server, in its own process, with everything it received, cannot decrypt.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from hf_ext.core.federated import run_local
from hf_ext.core.federated.local import _set_task_identity
from hf_ext.fede4rag.he import ClientCipher, flatten_state, make_keys, unflatten_state
from hf_ext.fede4rag.strategy import make_strategy, record_to_chunks
from hf_ext.fede4rag.task import RunConfig

REF = {"a": np.zeros((2, 4), np.float32), "b": np.zeros(3, np.float32)}


def _reply(node, content):
    _set_task_identity(1)
    return Message(content, reply_to=Message(RecordDict({}), dst_node_id=node, message_type="train"))


def _plain(node, value=1.0, n=5, **arrays):
    state = arrays or {k: np.full_like(v, value) for k, v in REF.items()}
    return _reply(
        node,
        RecordDict(
            {
                "arrays": ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in state.items()}),
                "metrics": MetricRecord({"num-examples": n, "loss-total": 0.5}),
            }
        ),
    )


def _strategy(**kwargs):
    # aggregate_train alone (no configure_train): no nonces were sent (replay protection is tested with the apps, in
    # test_federation_dishonest), and the round's reference is the server's adapter
    strategy = make_strategy(encrypt=False, public_context=None, reference=REF, replay_protection=False, **kwargs)
    strategy.reference = dict(REF)
    return strategy


BAD_FIRST = {
    "wrong shapes": lambda n: _plain(n, a=np.ones((4, 2), np.float32), b=np.ones(3, np.float32)),
    "extra key": lambda n: _plain(n, a=np.ones((2, 4), np.float32), b=np.ones(3, np.float32), c=np.ones(1, np.float32)),
    "missing key": lambda n: _plain(n, a=np.ones((2, 4), np.float32)),
    "NaN": lambda n: _plain(n, float("nan")),
    "huge": lambda n: _plain(n, 1e30),
    "float64": lambda n: _plain(n, a=np.ones((2, 4)), b=np.ones(3)),
    "NaN num-examples": lambda n: _plain(n, n=float("nan")),
    "corrupt bytes": lambda n: _reply(
        n,
        RecordDict(
            {
                "arrays": ArrayRecord(
                    {
                        "a": Array(dtype="float32", shape=(2, 4), stype="numpy.ndarray", data=b"\x93NUMPY junk"),
                        "b": Array(np.ones(3, np.float32)),
                    }
                ),
                "metrics": MetricRecord({"num-examples": 5}),
            }
        ),
    ),
    "config record as arrays": lambda n: _reply(
        n, RecordDict({"arrays": ConfigRecord({"a": "x"}), "metrics": MetricRecord({"num-examples": 5})})
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FIRST))
def test_a_malformed_first_reply_is_rejected_alone(case):
    strategy = _strategy()
    arrays, metrics = strategy.aggregate_train(1, [BAD_FIRST[case](101), _plain(102, 1.0), _plain(103, 3.0)])
    assert set(strategy.rejected[1]) == {"101"}, strategy.rejected[1]
    np.testing.assert_allclose(arrays["a"].numpy(), 2.0)  # the honest clients' mean, not the bad client's update
    assert metrics["num-accepted"] == 2 and metrics["loss-total"] == 0.5


def test_encrypted_uploads_checked_against_the_servers_size():
    keys = make_keys()
    cipher = ClientCipher(keys.secret, keys.public)
    # canaries off: this test is about the size checks, made before any key check (see test_federation_dishonest)
    strategy = make_strategy(
        encrypt=True, public_context=keys.public, n_values=5000, canary=False, replay_protection=False
    )

    def enc(node, flat, he=True):
        content = {
            "arrays": ArrayRecord(
                {f"ckks-{i:05d}": Array(np.frombuffer(b, np.uint8).copy()) for i, b in enumerate(cipher.encrypt(flat))}
            ),
            "metrics": MetricRecord({"num-examples": 3}),
        }
        if he:
            content["he"] = ConfigRecord({"context-id": cipher.context_id})
        return _reply(node, RecordDict(content))

    huge = _reply(
        104,
        RecordDict(
            {
                "arrays": ArrayRecord(
                    {"ckks-00000": Array(np.zeros(10**6, np.uint8)), "ckks-00001": Array(np.zeros(10, np.uint8))}
                ),
                "he": ConfigRecord({"context-id": cipher.context_id}),
                "metrics": MetricRecord({"num-examples": 3}),
            }
        ),
    )
    replies = [
        enc(101, np.zeros(9000)),
        enc(102, np.ones(5000)),
        enc(103, np.ones(5000), he=False),
        huge,
        enc(105, np.ones(5000)),
    ]
    arrays, _ = strategy.aggregate_train(1, replies)
    assert set(strategy.rejected[1]) == {"101", "103", "104"}, strategy.rejected[1]
    assert "bytes" in strategy.rejected[1]["104"]
    np.testing.assert_allclose(cipher.decrypt(record_to_chunks(arrays), 5000), 1.0, atol=1e-6)


# ---- the Flower apps (tiny random BERT) --------------------------------------------------------------------------

NODES = 3


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from hf_ext.fede4rag.testing import tiny_federation

    root = tmp_path_factory.mktemp("fede4rag_sep")
    run, keys = tiny_federation(root, rounds=1, secret_dir="client-keys")
    return run, keys, root


def _apps():
    from hf_ext.fede4rag.client_app import app as client_app
    from hf_ext.fede4rag.server_app import app as server_app

    return server_app, client_app


def test_a_run_config_naming_a_secret_is_refused(setup):
    run, _, root = setup
    server_app, client_app = _apps()
    config = {
        **RunConfig(**{**run.__dict__, "encrypt": True}).to_run_config(),
        "he-public-path": str(root / "public.ctx"),
        "he-secret-path": str(root / "client-keys/secret.ctx"),
    }
    with pytest.raises(ValueError, match="he-secret-path"):
        run_local(server_app, client_app, num_nodes=NODES, run_config=config)


SPOOF: dict = {}
wrapped = ClientApp()


@wrapped.query()
def _query(msg, context):
    reply = _apps()[1](msg, context)
    if int(context.node_config["partition-id"]) == SPOOF.get("pid"):
        metrics = dict(reply.content["metrics"])
        metrics["num-params"] = SPOOF["num-params"]
        return Message(RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)
    return reply


@wrapped.train()
def _train(msg, context):
    return _apps()[1](msg, context)


def test_a_node_reporting_another_num_params_is_left_out_alone(setup):
    run, _, root = setup
    SPOOF.update({"pid": 0, "num-params": 12345})
    res = run_local(_apps()[0], wrapped, num_nodes=NODES, run_config=run.to_run_config())
    assert dict(res["rejected"]).keys() == {"0:101"}
    assert "12345" in dict(res["rejected"])["0:101"]
    assert res["summary"]["rounds"] == 1 and "101" not in dict(res["sampled"])["round-1"].split(",")


CURIOUS_SERVER = r"""
import json, sys, os
import tenseal as ts
run_config, chunk_path = json.loads(sys.argv[1]), sys.argv[2]
found = []
# a curious server reads every file its run config names and tries it as a context
for key, value in run_config.items():
    if isinstance(value, str) and os.path.isfile(value):
        try:
            ctx = ts.context_from(open(value, "rb").read())
        except Exception:
            continue
        found.append((key, ctx.has_secret_key()))
ctx = ts.context_from(open(run_config["he-public-path"], "rb").read())
try:
    ts.ckks_vector_from(ctx, open(chunk_path, "rb").read()).decrypt()
    outcome = "decrypted"
except Exception as err:
    outcome = f"{type(err).__name__}: {err}"
print(json.dumps({"contexts": found, "decrypt": outcome, "pid": os.getpid()}))
"""


def test_key_separation_the_server_in_its_own_process_cannot_decrypt(setup, tmp_path):
    run, keys, root = setup
    server_app, client_app = _apps()
    enc = RunConfig(**{**run.__dict__, "encrypt": True})
    run_config = {**enc.to_run_config(), "he-public-path": str(root / "public.ctx")}
    nodes = [{"he-secret-path": str(root / "client-keys" / "secret.ctx")} for _ in range(NODES)]
    res = run_local(server_app, client_app, num_nodes=NODES, run_config=run_config, node_configs=nodes)
    assert res["summary"]["num-rejected"] == 0
    # nothing the server receives names the secret: neither a key nor a value of its run config
    secret_path = str(root / "client-keys" / "secret.ctx")
    assert not any("secret" in k for k in run_config) and secret_path not in map(str, run_config.values())
    chunks = record_to_chunks(res["arrays"])
    (tmp_path / "chunk.bin").write_bytes(chunks[0])
    out = subprocess.run(
        [sys.executable, "-c", CURIOUS_SERVER, json.dumps(run_config), str(tmp_path / "chunk.bin")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["contexts"] == [["he-public-path", False]]  # the only context it can reach holds no secret key
    assert seen["decrypt"] != "decrypted" and "secret" in seen["decrypt"].lower()
    # the clients (holding the secret) decrypt the same ciphertext: it is the real aggregate, not noise
    from hf_ext.fede4rag.encoder import adapter_arrays
    from hf_ext.fede4rag.task import build_model

    flat, layout = flatten_state(adapter_arrays(build_model(run)[0]))
    values, _ = ClientCipher(keys.secret, keys.public).decrypt(chunks, flat.size, canary=True)
    state = unflatten_state(values, layout)
    assert all(np.isfinite(v).all() for v in state.values())
    # and a client refuses a secret named in the run config (the server would receive it)
    with pytest.raises(ValueError, match="node config"):
        _client_refuses(run_config, secret_path)


def _client_refuses(run_config, secret_path):
    from flwr.app import Context

    from hf_ext.fede4rag.task import client_cipher as _cipher

    ctx = Context(
        run_id=1,
        node_id=101,
        node_config={"partition-id": 0},
        state=RecordDict(),
        run_config={**run_config, "he-secret-path": secret_path},
    )
    _cipher(ctx)


nan_clients = ClientApp()


@nan_clients.query()
def _nan_query(msg, context):
    return _apps()[1](msg, context)


@nan_clients.train()
def _nan_train(msg, context):
    state = {k: np.full_like(v, np.nan) for k, v in REF.items()}
    return Message(
        RecordDict(
            {
                "arrays": ArrayRecord({k: Array(v) for k, v in state.items()}),
                "metrics": MetricRecord({"num-examples": 3}),
            }
        ),
        reply_to=msg,
    )


def test_a_run_that_aggregates_no_round_fails(setup):
    from hf_ext.core.federated import TooFewRounds

    run, _, _ = setup
    with pytest.raises(TooFewRounds, match="aggregated 0 of 1 rounds"):
        run_local(_apps()[0], nan_clients, num_nodes=2, run_config=run.to_run_config())
