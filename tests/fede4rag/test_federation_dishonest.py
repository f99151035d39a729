"""A FedE4RAG federation survives one dishonest client, in clear and under CKKS: the run completes, the client's
update is left out, and the round's record names it by its transport node id (`"<round>:node <id>"`).

The dishonest behaviours live in a test ClientApp that wraps the shipped handlers (the shipped app has no test hooks):
values just under the absolute bound, NaN, corrupt ciphertext bytes, a foreign key under the federation's declared
context id, replays (same reply, same update with a new nonce, a re-randomised old ciphertext), and a verifier that
lies about everyone else's canaries. Also here: the KD teacher is the received global adapter (issue 40).
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Message, RecordDict
from flwr.clientapp import ClientApp

from hf_ext.core.federated import run_local
from hf_ext.core.federated.strategy import guarded_reply
from hf_ext.fede4rag.he import ClientCipher, flatten_state, make_keys, unflatten_state
from hf_ext.fede4rag.strategy import chunks_to_record, record_to_chunks
from hf_ext.fede4rag.task import (
    RunConfig,
    client_cipher,
    handle_canary,
    handle_query,
    train_reply,
    upload_content,
)

NODES = 3  # node ids 101, 102, 103 = partition ids 0, 1, 2


def dishonest_app(plan: dict[int, str]) -> ClientApp:
    """The shipped handlers, except that partition `p` misbehaves as `plan[p]` says."""
    app = ClientApp()
    memory: dict[int, RecordDict] = {}

    @app.query()
    def _query(msg, context):
        return handle_query(msg, context)

    @app.query("canary")
    def _canary(msg, context):
        reply = handle_canary(msg, context)
        if plan.get(int(context.node_config["partition-id"])) == "lying-verifier":
            record = reply.content["canaries"]
            lies = {k: Array(np.full_like(record[k].numpy(), 1e19)) for k in record.keys()}
            return Message(RecordDict({"canaries": ArrayRecord(lies)}), reply_to=msg)
        return reply

    @app.train()
    def _train(msg, context):
        pid = int(context.node_config["partition-id"])
        kind = plan.get(pid, "honest")
        rnd = int(msg.content["config"]["server-round"])
        state, metrics, settings = train_reply(msg, context)
        cipher = client_cipher(context) if settings["run"].encrypt else None
        if kind == "nan":
            state = {k: np.where(np.arange(v.size).reshape(v.shape) == 0, np.nan, v) for k, v in state.items()}
        elif kind == "near-bound":  # every value just under the absolute bound (1e6)
            state = {k: np.full_like(v, 9.9e5 - rnd) for k, v in state.items()}  # (new bytes every round)
        elif kind == "foreign-key":  # another key pair, declaring the federation's context id
            keys = make_keys()
            foreign = ClientCipher(keys.secret, keys.public)
            foreign.context_id = cipher.context_id
            cipher = foreign
        content = dict(guarded_reply(msg, upload_content(state, metrics, settings, cipher)).content)
        if kind == "corrupt-bytes":
            content["arrays"] = chunks_to_record([b"\x00corrupt" + b[:64] for b in record_to_chunks(content["arrays"])])
        if kind.startswith("replay") or kind == "rerandomised-replay":
            if rnd == 1:
                memory[pid] = RecordDict(content)
            else:
                old = dict(memory[pid])
                guard = content["guard"]
                content = old  # the whole round-1 reply, its nonce included
                if kind != "replay":  # the same update, re-sent with this round's nonce
                    content["guard"] = guard
                if kind == "rerandomised-replay":  # + Enc(0): new bytes, the old plaintext and the old canaries
                    content["arrays"] = chunks_to_record(_rerandomise(record_to_chunks(old["arrays"]), context))
        return Message(RecordDict(content), reply_to=msg)

    return app


def _rerandomise(chunks, context):
    from pathlib import Path

    import tenseal as ts

    public = ts.context_from(Path(str(context.run_config["he-public-path"])).read_bytes())
    out = []
    for blob in chunks:
        vec = ts.ckks_vector_from(public, blob)
        out.append((vec + ts.ckks_vector(public, [0.0] * vec.size())).serialize())
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from hf_ext.fede4rag.testing import tiny_federation

    root = tmp_path_factory.mktemp("fede4rag_dishonest")
    run, keys = tiny_federation(root, rounds=2)
    return run, keys, root


def _run(run, root, plan, encrypt=False):
    from hf_ext.fede4rag.server_app import app as server_app

    run = RunConfig(**{**run.__dict__, "encrypt": encrypt})
    config = {**run.to_run_config(), "he-public-path": str(root / "public.ctx")}
    nodes = [{"he-secret-path": str(root / "secret.ctx")} for _ in range(NODES)]
    return run_local(server_app, dishonest_app(plan), num_nodes=NODES, run_config=config, node_configs=nodes)


def _adapter(result, run, keys, encrypt):
    if not encrypt:
        return {k: result["arrays"][k].numpy() for k in result["arrays"].keys()}
    from hf_ext.fede4rag.encoder import adapter_arrays
    from hf_ext.fede4rag.task import build_model

    flat, layout = flatten_state(adapter_arrays(build_model(run)[0]))
    values, canaries = ClientCipher(keys.secret, keys.public).decrypt(
        record_to_chunks(result["arrays"]), flat.size, canary=True
    )
    np.testing.assert_allclose(canaries, result["global-canary"]["expected"].numpy(), atol=1e-4)
    return unflatten_state(values, layout)


def _completes_and_names(result, node, rounds, match):
    rejected = dict(result["rejected"])
    assert result["summary"]["rounds"] == 2  # both rounds aggregated: the honest clients trained on in round 2
    assert set(rejected) == {f"{r}:{node}" for r in rounds}, rejected  # "<round>:<transport node id>"
    for r in rounds:
        assert match in rejected[f"{r}:{node}"], rejected[f"{r}:{node}"]


@pytest.mark.parametrize(
    "kind, rounds, match",
    [
        ("near-bound", (1, 2), "the round's median distance"),
        ("nan", (1, 2), "non-finite"),
        ("replay", (2,), "stale or replayed reply"),
        ("replay-new-nonce", (2,), "repeats one already received (round 1, node 102)"),
    ],
)
def test_plaintext_run_with_one_dishonest_client_completes_and_names_it(setup, kind, rounds, match):
    run, keys, root = setup
    honest = _run(run, root, {})
    assert dict(honest["rejected"]) == {}
    result = _run(run, root, {1: kind})
    _completes_and_names(result, 102, rounds, match)
    got = _adapter(result, run, keys, False)
    ref = _adapter(honest, run, keys, False)
    # the global stays at the honest clients' scale (the dishonest update would put it near 3.3e5)
    assert max(float(np.abs(v).max()) for v in got.values()) < 10 * max(float(np.abs(v).max()) for v in ref.values())


@pytest.mark.parametrize(
    "kind, rounds, match",
    [
        ("foreign-key", (1, 2), "encrypted under another key"),
        ("corrupt-bytes", (1, 2), "does not deserialise"),
        ("replay", (2,), "stale or replayed reply"),
        ("replay-new-nonce", (2,), "repeats one already received"),
        ("rerandomised-replay", (2,), "replayed from an earlier round"),
    ],
)
def test_ckks_run_with_one_dishonest_client_completes_and_names_it(setup, kind, rounds, match):
    run, keys, root = setup
    result = _run(run, root, {2: kind}, encrypt=True)
    _completes_and_names(result, 103, rounds, match)
    state = _adapter(result, run, keys, True)  # the honest clients' mean: finite and small, not ~1e19
    assert all(np.isfinite(v).all() and float(np.abs(v).max()) < 10 for v in state.values())


def test_a_lying_verifier_cannot_get_honest_clients_rejected(setup):
    run, keys, root = setup
    result = _run(run, root, {0: "lying-verifier"}, encrypt=True)
    assert dict(result["rejected"]) == {} and result["summary"]["rounds"] == 2


def test_ckks_honest_run_equals_plaintext_run(setup):
    """Canaries and nonces change nothing for honest clients: the decrypted CKKS global equals the plaintext one."""
    run, keys, root = setup
    plain = _run(run, root, {})
    enc = _run(run, root, {}, encrypt=True)
    assert dict(plain["rejected"]) == dict(enc["rejected"]) == {}
    a, b = _adapter(plain, run, keys, False), _adapter(enc, run, keys, True)
    assert max(float(np.abs(a[k] - b[k]).max()) for k in a) <= 1e-5


# ---- issue 40: the KD teacher is the global adapter the client received --------------------------------------------


def test_the_kd_teacher_is_the_received_global_adapter(setup, monkeypatch):
    """Round 2 of a run: every client's KD teacher must hold exactly the global adapter it was sent (not its own
    adapter from round 1, not the seeded one), and there must be one (λ > 0). A client that froze its teacher before
    loading the global (a stale local model) or trained without one fails here."""
    from hf_ext.fede4rag import task
    from hf_ext.fede4rag.encoder import adapter_arrays

    run, keys, root = setup
    seen: list[dict] = []
    real = task.FedE4RAGTrainer

    class Spy(real):
        def __init__(self, *args, teacher=None, **kwargs):
            model = kwargs["model"]
            student = adapter_arrays(model)
            # the teacher is frozen (no trainable parameters): read the same-named LoRA factors, copied (a client
            # refreshes its one teacher in place each round, so a view would show a later round's weights)
            params = {} if teacher is None else dict(teacher.named_parameters())
            seen.append(
                {
                    "teacher": None if teacher is None else {k: params[k].detach().numpy().copy() for k in student},
                    "student": student,  # the model's adapter when training starts = what it loaded
                    "kd_lambda": kwargs["args"].kd_lambda,
                }
            )
            super().__init__(*args, teacher=teacher, **kwargs)

    uploads: list[dict] = []
    real_fit = task.FedE4RAGClient.fit

    def fit(self, *args, **kwargs):
        uploads.append(real_fit(self, *args, **kwargs))
        return uploads[-1]

    monkeypatch.setattr(task, "FedE4RAGTrainer", Spy)
    monkeypatch.setattr(task.FedE4RAGClient, "fit", fit)
    result = _run(run, root, {})
    assert dict(result["rejected"]) == {} and len(seen) == len(uploads) == 2 * NODES
    round1, round2 = seen[:NODES], seen[NODES:]
    # the global adapter of round 2 is the uniform mean of round 1's uploads (nothing was rejected)
    global1 = {k: np.mean([u[k] for u in uploads[:NODES]], axis=0) for k in uploads[0]}
    for fit in seen:
        assert fit["kd_lambda"] == run.kd_lambda > 0 and fit["teacher"] is not None
        for k, v in fit["teacher"].items():
            np.testing.assert_array_equal(v, fit["student"][k])
    assert any(not np.allclose(global1[k], round1[0]["teacher"][k]) for k in global1)  # it moved in round 1
    for fit in round2:
        for k in global1:
            np.testing.assert_allclose(fit["teacher"][k], global1[k], atol=1e-6)
