"""The Flower apps on an in-process grid (three company nodes, a tiny random BERT with MiniLM's tokenizer): plaintext
and CKKS rounds agree, the server never holds the secret key, bad clients are rejected and the round continues."""

import numpy as np
import pytest

from hf_ext.core.federated import run_local
from hf_ext.fede4rag.he import ClientCipher, flatten_state, unflatten_state
from hf_ext.fede4rag.strategy import record_to_chunks
from hf_ext.fede4rag.task import RunConfig

NODES = 3  # PepsiCo, P&G, Boeing (partition ids 0-2)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from hf_ext.fede4rag.testing import tiny_federation

    root = tmp_path_factory.mktemp("fede4rag")
    run, keys = tiny_federation(root, rounds=1)
    return run, keys, root


def _run(run, root, client_app=None, **extra):
    from hf_ext.fede4rag.client_app import app as default_client_app
    from hf_ext.fede4rag.server_app import app as server_app

    client_app = client_app or default_client_app
    # the secret context's path is client-only (node config); the run config, which the server gets, has none
    config = {**run.to_run_config(), "he-public-path": str(root / "public.ctx"), **extra}
    nodes = [{"he-secret-path": str(root / "secret.ctx")} for _ in range(NODES)]
    return run_local(server_app, client_app, num_nodes=NODES, run_config=config, node_configs=nodes)


def _adapter(run):
    from hf_ext.fede4rag.encoder import adapter_arrays
    from hf_ext.fede4rag.task import build_model

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
    values, canaries = ClientCipher(keys.secret, keys.public).decrypt(chunks, flat.size, canary=True)
    decrypted = unflatten_state(values, layout)
    # the aggregate's canary slots are the mean of the three accepted canaries, as the server recorded it
    np.testing.assert_allclose(canaries, enc["global-canary"]["expected"].numpy(), atol=1e-6)
    assert max(np.abs(decrypted[k] - plain_state[k]).max() for k in init) <= 1e-6
    # the server's round statistics: each of the 3 clients took 1 step (8 pairs, batch 8); uploads were counted
    for stats in (dict(plain["round-stats"]), dict(enc["round-stats"])):
        assert stats["1:steps-total"] == 3 and stats["1:steps-max"] == 1 and stats["1:num-clients"] == 3
    assert dict(enc["round-stats"])["1:encrypt-s"] > 0 and dict(plain["round-stats"])["1:encrypt-s"] == 0
    assert dict(enc["round-stats"])["1:bytes-up"] > 20 * dict(plain["round-stats"])["1:bytes-up"] > 0


def test_released_sampling_trains_one_client_per_round(setup):
    run, _, root = setup
    res = _run(RunConfig(**{**run.__dict__, "one_client": True, "rounds": 2}), root)
    sampled = dict(res["sampled"])
    assert len(sampled) == 2 and all("," not in v for v in sampled.values())


def _one_train_round(run, root, arrays, node_config=None, extra=None, canary=None):
    """One `train` message with the given global `arrays` (and, under CKKS, the `canary` the server says it
    aggregated) to a single node (AES, partition 4), on the in-process grid; returns the node's reply arrays."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, RecordDict
    from flwr.serverapp import ServerApp

    from hf_ext.fede4rag.client_app import app as client_app

    server = ServerApp()

    @server.main()
    def _main(grid, context):
        node = grid.get_node_ids()[0]
        content = {"arrays": arrays, "config": ConfigRecord({"server-round": 2, "round-nonce": 7})}
        if canary is not None:
            content["he-canary"] = ArrayRecord({"expected": Array(canary)})
        msg = Message(RecordDict(content), dst_node_id=node, message_type=MessageType.TRAIN)
        context.state["reply"] = grid.send_and_receive([msg])[0].content["arrays"]

    config = {
        **run.to_run_config(),
        "client-companies": "4",
        "he-public-path": str(root / "public.ctx"),
        **(extra or {}),
    }
    state = run_local(
        server, client_app, num_nodes=1, run_config=config, node_configs=[{"partition-id": 0, **(node_config or {})}]
    )
    return state["reply"]


@pytest.mark.parametrize("encrypt", [False, True])
def test_a_client_trains_from_the_global_adapter_it_receives(setup, encrypt):
    """With a learning rate of 1e-9 the reply is the adapter the client started from: the global it was sent, not
    its seeded or previous adapter; an empty record (round 1) starts from the seeded adapter even after that."""
    from flwr.app import ArrayRecord

    from hf_ext.core.federated import state_dict_to_arrays
    from hf_ext.fede4rag.he import canary_values, chunk_count
    from hf_ext.fede4rag.strategy import chunks_to_record

    run, keys, root = setup
    run = RunConfig(**{**run.__dict__, "learning_rate": 1e-9, "encrypt": encrypt})
    init = _adapter(run)
    glob = {k: (v + 0.05 * (i + 1)).astype(np.float32) for i, (k, v) in enumerate(init.items())}
    cipher = ClientCipher(keys.secret, keys.public)
    flat, layout = flatten_state(init)

    def decoded(record):
        if encrypt:
            values, canaries = cipher.decrypt(record_to_chunks(record), flat.size, canary=True)
            np.testing.assert_allclose(canaries, canary_values(7, len(canaries)), atol=1e-6)  # this round's nonce
            return unflatten_state(values, layout)
        return {k: record[k].numpy() for k in record.keys()}

    expected = canary_values(1234, chunk_count(flat.size, cipher.slots, canary=True))
    sent = (
        chunks_to_record(cipher.encrypt(flatten_state(glob)[0], canary=expected))
        if encrypt
        else state_dict_to_arrays(glob)
    )
    node = {"he-secret-path": str(root / "secret.ctx")}
    got = decoded(_one_train_round(run, root, sent, node, canary=expected if encrypt else None))
    assert max(np.abs(got[k] - glob[k]).max() for k in glob) < 1e-4
    fresh = decoded(_one_train_round(run, root, ArrayRecord(), node))
    assert max(np.abs(fresh[k] - init[k]).max() for k in init) < 1e-4


def test_the_client_trains_with_the_run_configs_temperature(setup):
    from hf_ext.fede4rag.task import FedE4RAGClient, with_setting

    run, _, _ = setup
    assert RunConfig().temperature == 0.05 and with_setting(run, "centralized-tau1").temperature == 1.0
    losses = []
    for tau in (0.05, 1.0):
        client = FedE4RAGClient(4, RunConfig(**{**run.__dict__, "temperature": tau, "kd_lambda": 0.0}))
        client.fit()
        losses.append(client.last_loss["contrastive"])
        assert client.last_steps == client.num_examples // run.batch_size  # one epoch, last partial batch dropped
    # cosines are in [-1, 1]: at τ = 1 the in-batch CE stays within 2 of log(8); τ = 0.05 gives another loss
    assert abs(losses[1] - np.log(8)) < 2.0 and abs(losses[0] - losses[1]) > 0.1


def test_a_non_finite_or_huge_global_adapter_is_refused_by_the_client():
    from hf_ext.fede4rag.task import checked_global as _checked

    ok = {"a": np.zeros(3, np.float32)}
    assert _checked(ok, "clear") is ok
    with pytest.raises(ValueError, match=r"\(clear\) is refused: 'a': 1 non-finite"):
        _checked({"a": np.array([0.0, np.nan, 1.0], np.float32)}, "clear")
    with pytest.raises(ValueError, match="bound"):
        _checked({"a": np.array([1e7], np.float32)}, "decrypted")


def test_train_command_trains_on_flower_and_saves_a_retriever(setup, tmp_path):
    import json

    from hf_ext.fede4rag.train import main

    run, _, root = setup
    out = tmp_path / "retriever"
    summary = main(
        [
            "--setting",
            "fedavg",
            "--engine",
            "local",
            "--rounds",
            "1",
            "--train-fraction",
            "0.02",
            "--encoder-path",
            run.encoder_path,
            "--max-passage-length",
            "32",
            "--no-eval",
            "--lora-layers",
            "1",
            "--lora-rank",
            "2",
            "--out",
            str(out),
        ]
    )
    assert summary["round_stats"][0]["steps-total"] == 5 and summary["run"]["temperature"] == 0.05
    assert json.loads((out / "metrics.json").read_text())["setting"] == "fedavg"
    assert (out / "model.safetensors").is_file() and (out / "modules.json").is_file()


@pytest.mark.slow  # the same apps on Ray; the in-process grid covers the behaviour fast
def test_simulation_engine_gives_the_in_process_grids_result(setup):
    from hf_ext.fede4rag.flower_run import run_federated

    run, _, _ = setup
    sim = run_federated("fede4rag", run, engine="simulation")
    local = run_federated("fede4rag", run, engine="local")
    assert sim["round_stats"][0]["steps-total"] == local["round_stats"][0]["steps-total"] == 5
    assert max(np.abs(sim["adapter"][k] - local["adapter"][k]).max() for k in local["adapter"]) < 1e-5
