"""The controls before Proto-EVFL's verdicts: the oracle lower level (true labels on the unaligned pool) as the
long-tail claim's positive control, the unseen-class statistics and the pooled binomial test of the every-class
zero-shot sweep."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import RecordDict

from hf_ext.proto_evfl import party as party_module
from hf_ext.proto_evfl.data import VerticalDataConfig, build_vertical_split
from hf_ext.proto_evfl.party import PartyWorker
from hf_ext.proto_evfl.reproduce import VARIANTS, runs_in
from hf_ext.proto_evfl.reproduce_controls import (
    binomial_above_chance,
    decide_unseen_sweep,
    unseen_class_stats,
    zero_shot_control,
)
from hf_ext.proto_evfl.task import ProtoEvflRunConfig
from hf_ext.proto_evfl.training import ProtoEvflTrainingArguments

LABELLED = np.ones(10, dtype=bool)


def worker(selection: str, k: int = 1) -> PartyWorker:
    args = ProtoEvflTrainingArguments(rounds=2, warmup_rounds=0, local_steps=2, unaligned_batch_size=32,
                                      selection=selection)  # fmt: skip
    return PartyWorker(ProtoEvflRunConfig(data=VerticalDataConfig(), training=args), k, RecordDict())


def test_the_oracle_lower_level_trains_on_the_pools_true_labels(monkeypatch):
    w = worker("oracle")
    truth = build_vertical_split(w.settings.data).unaligned_labels(1)
    np.testing.assert_array_equal(w.oracle_unaligned_labels(), truth)
    seen = []
    real = party_module.prototype_contrastive_loss

    def spy(s, q):
        seen.append(q.argmax(1).numpy())
        return real(s, q)

    monkeypatch.setattr(party_module, "prototype_contrastive_loss", spy)
    # the batch indices the party draws: the same generator as local_phase
    rng = np.random.default_rng([w.args.seed, w.k, 1])
    n = len(w.data.unaligned_features)
    expected = [truth[rng.choice(n, size=min(32, n), replace=False)] for _ in range(2)]
    w.local_phase(1, np.full(10, 0.1), LABELLED)
    assert len(seen) == 2, "every oracle row is kept: one update per local step"
    for got, want in zip(seen, expected):
        np.testing.assert_array_equal(got, want)


def test_the_oracle_differs_from_no_lower_level():
    a, b = worker("oracle"), worker("none")
    before = b.model.encoder[0].weight.detach().clone() if hasattr(b.model, "encoder") else None
    a.local_phase(1, np.full(10, 0.1), LABELLED)
    b.local_phase(1, np.full(10, 0.1), LABELLED)
    if before is not None:
        assert torch.equal(b.model.encoder[0].weight, before), "selection='none' has no lower-level update"
    assert any(not torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))


def test_the_oracle_refuses_a_partys_own_data():
    w = worker("oracle")
    w._own_data = True
    with pytest.raises(ValueError, match="simulated split only"):
        w.oracle_unaligned_labels()


def test_the_control_and_the_leak_fix_run_in_the_long_tail_only():
    assert VARIANTS["oracle_lower"]["train"] == {"selection": "oracle"}
    assert VARIANTS["no_local_loss"]["model"] == {"local_loss_weight": 0.0}
    assert runs_in("oracle_lower", "long_tail") and not runs_in("oracle_lower", "zero_shot")
    assert runs_in("proto_evfl", "zero_shot")


def test_unseen_class_stats_closed_form():
    labels = np.array([3, 3, 3, 3, 1, 2, 5])
    preds = np.array([3, 3, 0, 1, 3, 2, 5])
    s = unseen_class_stats(labels, preds, 3)
    assert s["unseen_recall"] == 0.5 and s["unseen_precision"] == pytest.approx(2 / 3)
    assert (s["unseen_hits"], s["unseen_rows"], s["unseen_predicted"]) == (2, 4, 3)
    assert unseen_class_stats(labels, np.zeros(7, int), 3)["unseen_precision"] == 0.0


def test_binomial_closed_forms():
    assert binomial_above_chance(5, 5, 0.1) == pytest.approx(0.1**5)  # P(X >= n) = p^n
    assert binomial_above_chance(0, 7, 0.1) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no unseen-class rows"):
        binomial_above_chance(0, 0, 0.1)


def _runs(recalls, rows=30, cls=None):
    return [{"unseen_class": cls if cls is not None else i % 10, "unseen_recall": r, "unseen_precision": 0.5,
             "unseen_hits": round(r * rows), "unseen_rows": rows, "oracle_unseen_accuracy": 0.8}
            for i, r in enumerate(recalls)]  # fmt: skip


def test_the_sweep_confirms_refutes_and_needs_its_control():
    control = zero_shot_control({"per_seed": _runs([0.1] * 3)}, 0.1)
    assert control.passed, control.detail  # oracle at 80 % vs chance 10 %, SD 0
    high = decide_unseen_sweep(_runs([0.4, 0.5, 0.45, 0.6]), 0.1, control)
    assert high["verdict"]["verdict"] == "confirmed" and high["binomial_p"] < 1e-6
    low = decide_unseen_sweep(_runs([0.0, 0.02, 0.01, 0.0]), 0.1, control)
    assert low["verdict"]["verdict"] == "refuted"
    failing = zero_shot_control({"per_seed": [dict(r, oracle_unseen_accuracy=0.1) for r in _runs([0] * 3)]}, 0.1)
    assert not failing.passed
    assert decide_unseen_sweep(_runs([0.4, 0.5, 0.45]), 0.1, failing)["verdict"]["verdict"] == "premise absent"
    by_class = decide_unseen_sweep(_runs([0.2, 0.4], cls=7), 0.1, control)["per_class"]
    assert by_class == {7: {"recall": pytest.approx(0.3), "precision": 0.5, "runs": 2}}
