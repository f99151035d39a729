"""The core lines of an H2Tune round, each pinned by a closed form or an invariant that breaks when the line does:
the client mixes the *downloaded* G into its layers (M̃_c = P_cᵀ·G) and uploads from the trained M̃ (G_c = P_c·M̃_c);
T is written back into M̃ after every optimiser step; the server takes the *unweighted* mean of the uploads (also
through the Flower strategy, whatever `num-examples` the clients report); rounds >= 1 run the two-pass step with
T_prev = the client's T at the end of the previous round."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

from hf_ext.h2tune.alignment import initial_global
from hf_ext.h2tune.layer import select_indices
from hf_ext.h2tune.model import MODULE_SLOTS, get_middle, h2tune_modules
from hf_ext.h2tune.task import CLIENTS, H2TuneClient, RunConfig, global_shape

RUN = RunConfig(local_steps=2, num_train=16, num_test=4, batch_size=8)


def _client(index: int = 0, run: RunConfig = RUN) -> H2TuneClient:
    return H2TuneClient(CLIENTS[index], run, max(c.layers for c in CLIENTS), index=index)


def test_client_mixes_the_downloaded_global_and_uploads_its_own_mixture(monkeypatch):
    """With local training switched off, fit(G) must return exactly P_c·(P_cᵀ·G): the download line (a client that
    ignores G uploads its random init) and the upload projection are both in this closed form."""
    client = _client(0)  # Llama-style, 4 layers: every module slot present
    monkeypatch.setattr(H2TuneClient, "train_local", lambda self: None)
    g = initial_global(4, len(MODULE_SLOTS), 16, seed=3)
    p = client.relation.weight.detach()
    expected = torch.einsum("jl,il,imab->jmab", p, p, g)  # G_c[j,m] = Σ_l P[j,l] Σ_i P[i,l] G[i,m]
    torch.testing.assert_close(client.fit(g), expected, rtol=1e-5, atol=1e-6)
    other = initial_global(4, len(MODULE_SLOTS), 16, seed=4)
    assert not torch.allclose(client.fit(other), expected, atol=1e-3)  # a different G gives a different upload


class _WriteBackProbe(TrainerCallback):
    """Runs after H2TuneCallback: after every optimiser step M̃[idx] must hold T and idx must be top-k(S)."""

    def __init__(self, sparsify: bool = True):
        self.checked, self.sparsify = 0, sparsify

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        for name, m in h2tune_modules(model):
            t, idx = m.lora_T["default"].detach(), m.lora_idx["default"]
            assert torch.equal(m.lora_lT["default"].reshape(-1)[idx], t.reshape(-1)), f"{name}: T not written back"
            assert torch.equal(idx, select_indices(m.lora_S["default"], t.shape[0], self.sparsify)), name
        self.checked += 1


def test_every_optimizer_step_writes_t_back_while_the_relation_trains(tmp_path):
    """The write-back after each step, with P_c training too (its M̃ shift reloads T from M̃: without the write-back
    first, the step's T update would be overwritten and lost)."""
    from hf_ext.h2tune.alignment import RelationMatrix
    from hf_ext.h2tune.model import set_middle
    from hf_ext.h2tune.testing import make_adapter, relation_trainer, tiny_base, tiny_base_config, tiny_config

    model = make_adapter(tiny_config(), base=tiny_base(tiny_base_config(layers=2)))
    relation = RelationMatrix(3, 2, seed=3)
    g = initial_global(3, len(MODULE_SLOTS), 8, seed=1)
    set_middle(model, relation.download(g))
    t_before = {n: m.lora_T["default"].detach().clone() for n, m in h2tune_modules(model)}
    probe = _WriteBackProbe()
    trainer = relation_trainer(model, relation, g, tmp_path, callbacks=[probe])
    model.train()
    trainer.train()
    assert probe.checked == 3
    # M̃ = P_cᵀ·G + D_c with D_c the trained T changes: not the pure mixture any more
    assert any(not torch.equal(m.lora_T["default"].detach(), t_before[n]) for n, m in h2tune_modules(model))
    assert (get_middle(model) - relation.download(g)).abs().max() > 1e-4


def test_rounds_after_the_first_run_the_two_pass_step_with_the_previous_rounds_t(monkeypatch):
    from hf_ext.h2tune import trainer as training

    seen = []
    original = training.H2TuneAlternatingTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        seen.append({k: v.clone() for k, v in self.prev_t.items()})
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(training.H2TuneAlternatingTrainer, "compute_loss", spy)
    client = _client(2)
    g = initial_global(4, len(MODULE_SLOTS), 16, seed=0)
    client.fit(g)
    assert not seen  # round 0: joint training
    after_first = {n: m.lora_T["default"].detach().clone() for n, m in h2tune_modules(client.model)}
    g_c = client.fit(g)
    assert len(seen) == RUN.local_steps  # one two-pass loss per step
    # the upload is the projection of the *trained* M̃ (T written back, P_c moved), not of the downloaded mixture
    torch.testing.assert_close(g_c, client.relation.upload(get_middle(client.model)))
    p = client.relation.weight.detach()
    assert (g_c - torch.einsum("jl,il,imab->jmab", p, p, g)).abs().max() > 1e-4
    assert seen[0].keys() == after_first.keys()
    for name, t in after_first.items():
        torch.testing.assert_close(seen[0][name], t)  # T_prev = T at the end of the previous round
    joint = _client(2, dataclasses.replace(RUN.for_variant("h2tune-joint"), local_steps=1))
    seen.clear()
    joint.fit(g)
    joint.fit(g)
    assert not seen  # the joint ablation never alternates


def test_strategy_takes_the_unweighted_mean_whatever_num_examples_say():
    """The paper's server: G ← (1/N)·Σ_c G_c. A FedAvg-style example weighting would give
    (1·1 + 3·99 + 5·1000)/1100 ≈ 4.8. (An all-zero G_c would abstain from every slot: per-slot averaging.)"""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    from hf_ext.core.federated.local import _set_task_identity
    from hf_ext.h2tune.strategy import H2TuneStrategy

    def reply(node, pid, value, n):
        _set_task_identity(1)
        content = RecordDict(
            {
                "arrays": ArrayRecord({"g": Array(np.full(global_shape(4), value, np.float32))}),
                "metrics": MetricRecord({"num-examples": n, "partition-id": pid}),
            }
        )
        return Message(content, reply_to=Message(RecordDict({}), dst_node_id=node, message_type="train"))

    strategy = H2TuneStrategy(
        global_shape(4), num_partitions=3, replay_protection=False, fraction_train=1.0, fraction_evaluate=0.0
    )
    arrays, _ = strategy.aggregate_train(1, [reply(101, 0, 1.0, 1), reply(102, 1, 3.0, 99), reply(103, 2, 5.0, 1000)])
    np.testing.assert_allclose(arrays["g"].numpy(), 3.0)
    assert arrays["g"].numpy().shape == global_shape(4)


def test_a_client_takes_its_trainer_scratch_folder_with_it(monkeypatch, tmp_path):
    """Every client gets a Trainer scratch folder (nothing is saved there); a quick run makes hundreds of clients, so
    the folder goes when the client is collected."""
    import gc
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    client = _client(0)
    folder = Path(client.output_dir)
    assert folder.is_dir() and folder.parent == tmp_path
    del client
    gc.collect()
    assert not folder.exists()
