"""The KD teacher is the received global adapter: frozen after the global state is loaded and before local training,
never the client's own (stale) local model, never absent when λ > 0, and absent for FedAvg (λ = 0).

A teacher frozen before the global adapter is loaded holds the client's previous local model; a client that trains
without a teacher has no KD term at all. Both fail here (the teacher handed to the Trainer is captured and compared
with the state that was sent), through `FedE4RAGClient.fit` and through the ClientApp's `train` handler."""

import tempfile
from dataclasses import replace

import numpy as np
import pytest

import hf_ext.fede4rag.task as task


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from hf_ext.fede4rag.testing import tiny_federation

    return tiny_federation(tmp_path_factory.mktemp("teacher"), rounds=1)[0]


@pytest.fixture
def captured(monkeypatch):
    """Every `FedE4RAGTrainer` the client builds: its teacher's adapter (or `None`) and its λ."""
    seen = []

    class Capturing(task.FedE4RAGTrainer):
        def __init__(self, *args, teacher=None, **kwargs):
            super().__init__(*args, teacher=teacher, **kwargs)
            seen.append(
                {
                    "teacher": None if teacher is None else _lora(teacher),
                    "kd_lambda": float(self.args.kd_lambda),
                }
            )

    monkeypatch.setattr(task, "FedE4RAGTrainer", Capturing)
    return seen


def _lora(model):
    """The LoRA factors of a (frozen) model, keyed as `encoder.adapter_arrays` keys them."""
    return {n: p.detach().cpu().numpy().astype(np.float32) for n, p in model.named_parameters() if "lora_" in n}


def _perturbed(state, seed):
    g = np.random.default_rng(seed)
    return {k: (v + g.normal(0, 0.05, v.shape)).astype(np.float32) for k, v in state.items()}


def _assert_same(a, b):
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _differs(a, b):
    return any(not np.array_equal(a[k], b[k]) for k in a)


def test_teacher_is_the_received_global_not_the_stale_local_model(run, captured):
    client = task.FedE4RAGClient(0, run)
    local = client.fit(client.get_state())  # round 1: the client now holds its own trained (local) adapter
    received = _perturbed(local, seed=1)  # the next round's global adapter: differs from the local one
    assert _differs(local, received)
    client.fit(received)
    teacher = captured[-1]["teacher"]
    assert teacher is not None, "λ > 0 but the client trained without a teacher"
    assert captured[-1]["kd_lambda"] == run.kd_lambda > 0
    _assert_same(teacher, received)  # a teacher frozen before loading the global would equal `local`
    assert _differs(teacher, local)


def test_fedavg_and_kd_off_train_without_teacher(run, captured):
    client = task.FedE4RAGClient(1, replace(run, kd_lambda=0.0))
    client.fit(client.get_state())
    assert captured[-1]["teacher"] is None and captured[-1]["kd_lambda"] == 0.0
    client = task.FedE4RAGClient(1, run)
    client.fit(client.get_state(), kd=False)  # local-only / centralized
    assert captured[-1]["teacher"] is None and captured[-1]["kd_lambda"] == 0.0


def test_a_fit_leaves_no_scratch_folder_behind(run, monkeypatch, tmp_path):
    """Each fit gives its Trainer a scratch `output_dir` (nothing is saved there); a grid fits thousands of times, so
    the folder goes when the fit ends."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    client = task.FedE4RAGClient(0, run)
    client.fit(client.get_state(), kd=False)
    assert not list(tmp_path.glob("fede4rag_*"))


class _Msg:
    """What `train_reply` reads of a `train` message (a real `Message` needs a running Flower task)."""

    def __init__(self, content):
        self.content = content

    def has_content(self):
        return True


def test_train_message_teacher_is_the_sent_adapter(run, captured, tmp_path):
    """Through the ClientApp's `train` handler: the node's shared model first holds another round's adapter (as a
    Ray actor serving several nodes does); the teacher must be exactly the arrays in the message, and in round 1 (an
    empty record) the common seeded adapter, not whatever the shared model held."""
    from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict

    from hf_ext.core.federated import state_dict_to_arrays

    model, _, seeded = task.shared_model(run)
    stale = _perturbed(seeded, seed=2)
    context = Context(
        run_id=1, node_id=1, node_config={"partition-id": 2}, state=RecordDict(), run_config=run.to_run_config()
    )

    def message(arrays, server_round):
        content = RecordDict(
            {
                "arrays": arrays,
                "config": ConfigRecord({"server-round": server_round, "round-nonce": f"nonce-{server_round}"}),
            }
        )
        return _Msg(content)

    task.load_trainable_state(model, stale)
    sent = _perturbed(seeded, seed=3)
    task.train_reply(message(state_dict_to_arrays(sent), 2), context)
    _assert_same(captured[-1]["teacher"], sent)
    task.load_trainable_state(model, stale)
    task.train_reply(message(ArrayRecord(), 1), context)
    _assert_same(captured[-1]["teacher"], seeded)


def test_reused_teacher_is_refreshed_to_the_model_and_frozen():
    """`frozen_teacher(model, reuse=True)` (what a client calls every round) hands back one copy per model, refreshed
    to the model's current weights (every parameter, not only the adapter) and frozen; a teacher that kept the
    previous round's weights, or a second deep copy per round, fails here."""
    import torch
    from peft import get_peft_model

    from hf_ext.fede4rag.encoder import lora_config
    from hf_ext.fede4rag.testing import tiny_retriever
    from hf_ext.fede4rag.trainer import frozen_teacher

    model = get_peft_model(tiny_retriever(), lora_config(4, layers=[1]))
    first = frozen_teacher(model, reuse=True)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.25)  # a new round's global adapter (and, to be strict, every other weight)
    second = frozen_teacher(model, reuse=True)
    assert second is first
    state, fresh = model.state_dict(), frozen_teacher(model)  # a fresh deep copy: the reference
    assert fresh is not first
    for name, value in second.state_dict().items():
        torch.testing.assert_close(value, state[name], rtol=0, atol=0, msg=name)
        torch.testing.assert_close(value, fresh.state_dict()[name], rtol=0, atol=0, msg=name)
    assert not second.training and not any(p.requires_grad for p in second.parameters())
    assert any(p.requires_grad for p in model.parameters())  # the student stays trainable
