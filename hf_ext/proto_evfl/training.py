"""Training Proto-EVFL: the training knobs ([`ProtoEvflTrainingArguments`]) and the in-process runner
([`run_federation`], Flower's `ServerApp` and `ClientApp` on an in-process grid); `hf-ext train proto_evfl` is
`train.py`.

The bi-level schedule itself is the federated protocol in `task.py`: per round, (a) every party runs `local_steps`
OT-prototype steps on its unaligned data (lower level) and reports prototypes and prior, then (b) the active party
runs split-VFL steps on the aligned batches (upper level). `transformers.Trainer` does not fit that loop (each
upper-level batch crosses the wire twice), so the loop is hand-written; the top model alone does train with
`Trainer` on fixed embeddings (see `testing.py`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from hf_ext.core.federated import LocalGrid
from hf_ext.core.validation import check_positive_int

SELECTIONS = ("ot", "threshold", "none", "oracle")
PRIORS = ("mixed", "uniform", "local")
UNSEEN_WEIGHTINGS = ("evidence", "gate")


@dataclass(frozen=True)
class ProtoEvflTrainingArguments:
    """Training knobs of Proto-EVFL (never in the model configs).

    Args:
        rounds (`int`, defaults to 40): bi-level rounds.
        warmup_rounds (`int`, defaults to 15): first rounds with the upper level only (the prototypes must mean
            something before the OT can use them; with 5 the unseen-class discovery picked mostly noise on digits);
            the parties still report prototypes and priors.
        local_steps (`int`, defaults to 2): lower-level steps `E_u` per round and party.
        unaligned_batch_size (`int`, defaults to 128): unaligned samples per lower-level step (the OT batch).
        aligned_batch_size (`int`, defaults to 25): aligned samples per upper-level step (4 steps per round on
            100 aligned samples).
        party_learning_rate (`float`, defaults to 3e-3): Adam learning rate of the party models.
        top_learning_rate (`float`, defaults to 3e-3): Adam learning rate of the top model.
        selection (`str`, defaults to `"ot"`): `"ot"` (conditional OT under the prior), `"threshold"`
            (confidence-threshold pseudo-labels; baseline and ablation), `"none"` (no lower level: vanilla VFL) or
            `"oracle"` (the pool's true labels, every row kept: the reproduction's positive control, simulated split
            only).
        selection_mode (`str`, defaults to `"bernoulli"`): keep an OT sample with probability `ρ_i = max_c q_ic`
            (`"bernoulli"`) or when `ρ_i ≥ selection_threshold` (`"threshold"`).
        selection_threshold (`float`, defaults to 0.5): `τ` of the `"threshold"` OT mode.
        confidence_threshold (`float`, defaults to 0.9): softmax confidence needed by `selection="threshold"`.
        prior (`str`, defaults to `"mixed"`): OT column marginal: `"mixed"` (`λ π^k + (1 − λ) π^g`), `"uniform"`
            (ablation) or `"local"` (`π^k` alone).
        prior_mix (`float`, defaults to 0.8): `λ`. The spec suggests 0.5; with the parties' long tails reversed
            (digits, IR 50) the global prior is nearly flat and 0.5 cost 5 points of accuracy (model card).
        sinkhorn_epsilon (`float`, defaults to 0.1): `ε` (the spec suggests 0.05; 0.1 gave more accurate soft
            labels and a more informative `ρ`).
        sinkhorn_iterations (`int`, defaults to 50): Sinkhorn iterations.
        prototype_momentum (`float`, defaults to 0.9): EMA momentum `m` of the local prototypes.
        prototype_ema (`bool`, defaults to `True`): move local prototypes towards their selected samples.
        unaligned_loss_weight (`float`, defaults to 1.0): weight of the prototype-contrastive loss `ℓ_u`.
        discover_unseen (`bool`, defaults to `True`): initialise the local prototypes of never-labelled classes
            from the party's most novel samples when the lower level starts.
        novelty_quantile (`float`, defaults to 0.1): `q` of the open-set estimate of the never-labelled classes'
            share of a party's unaligned pool (`prototypes.unseen_mass`), which their local prior starts from.
        unseen_weighting (`str`, defaults to `"evidence"`): how the parties' local prototypes of a never-labelled
            class are weighted into its global prototype: `"gate"` (`ḡ_k`, the spec's reading) or `"evidence"`
            (`ḡ_k n_k π^k_u`: the parties that see the class dominate; see `set_unseen_prototypes`).
        seed (`int`, defaults to 0): seed of the model initialisation, batching and selection.
    """

    rounds: int = 40
    warmup_rounds: int = 15
    local_steps: int = 2
    unaligned_batch_size: int = 128
    aligned_batch_size: int = 25
    party_learning_rate: float = 3e-3
    top_learning_rate: float = 3e-3
    selection: str = "ot"
    selection_mode: str = "bernoulli"
    selection_threshold: float = 0.5
    confidence_threshold: float = 0.9
    prior: str = "mixed"
    prior_mix: float = 0.8
    sinkhorn_epsilon: float = 0.1
    sinkhorn_iterations: int = 50
    prototype_momentum: float = 0.9
    prototype_ema: bool = True
    unaligned_loss_weight: float = 1.0
    discover_unseen: bool = True
    novelty_quantile: float = 0.1
    unseen_weighting: str = "evidence"
    seed: int = 0

    def __post_init__(self):
        from .ot_selection import SELECTION_MODES

        owner = type(self).__name__
        for name, low in (("rounds", 1), ("warmup_rounds", 0), ("local_steps", 0), ("unaligned_batch_size", 2),
                          ("aligned_batch_size", 1), ("sinkhorn_iterations", 1), ("seed", 0)):  # fmt: skip
            check_positive_int(f"{owner}.{name}", getattr(self, name), low)
        for name, low, high, low_open, high_open in (
            ("party_learning_rate", 0.0, math.inf, True, False),
            ("top_learning_rate", 0.0, math.inf, True, False),
            ("selection_threshold", 0.0, 1.0, False, False),
            ("confidence_threshold", 0.0, 1.0, False, False),
            ("prior_mix", 0.0, 1.0, False, False),
            ("sinkhorn_epsilon", 0.0, math.inf, True, False),
            ("prototype_momentum", 0.0, 1.0, False, True),
            ("unaligned_loss_weight", 0.0, math.inf, False, False),
            ("novelty_quantile", 0.0, 1.0, True, True),
        ):
            _strict_number(f"{owner}.{name}", getattr(self, name), low, high, low_open, high_open)
        for name in ("prototype_ema", "discover_unseen"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{owner}.{name} must be a bool, got {getattr(self, name)!r}")
        for name, allowed in (("selection", SELECTIONS), ("selection_mode", SELECTION_MODES), ("prior", PRIORS),
                              ("unseen_weighting", UNSEEN_WEIGHTINGS)):  # fmt: skip
            if getattr(self, name) not in allowed:
                raise ValueError(f"{owner}.{name} must be one of {allowed}, got {getattr(self, name)!r}")


def _strict_number(name: str, value: Any, low: float, high: float, low_open: bool, high_open: bool) -> float:
    """A finite number in range; a string, `None` or a bool is refused (not converted), naming the field."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        bracket = ("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]")
        raise ValueError(f"{name} must be a finite number in {bracket}, got {value!r}")
    return float(value)


@dataclass
class FederationResult:
    """What an in-process run returns.

    Args:
        metrics (`dict[str, float]`): test metrics computed by the active party (see `metrics.py`).
        top_model ([`ProtoEvflForClassification`]): the active party's trained top model.
        party_models (`list[ProtoEvflPartyModel]`): each party's trained model (in a real deployment each stays
            with its party; the in-process harness can read them all).
        predictions (`dict[str, np.ndarray]`): test ids, labels, predictions, fused features `h`.
        history (`dict[str, list[float]]`): per-round losses and lower-level statistics.
        messages (`list[dict]`), *optional*: with `record_messages`, what crossed the wire.
        rejections (`list[str]`): the replies the active party rejected, with reasons (last 20).
        seconds (`float`): wall time of the run.
    """

    metrics: dict[str, float]
    top_model: Any
    party_models: list
    predictions: dict
    history: dict
    messages: list = field(default_factory=list)
    seconds: float = 0.0
    rejections: list = field(default_factory=list)


def run_federation(settings, *, record_messages: bool = False, client_app=None, node_configs=None) -> FederationResult:
    """Runs the Proto-EVFL `ServerApp` with its `ClientApp`s in this process (a `LocalGrid`: no sockets).

    Args:
        settings ([`~hf_ext.proto_evfl.task.ProtoEvflRunConfig`]): data, models and training knobs.
        record_messages (`bool`, defaults to `False`): record the keys, dtypes and shapes of every record in every
            message that crosses between the active party and the parties (and keep the arrays, for the privacy
            tests).
        client_app (`ClientApp`, *optional*): replaces the parties' app (tests inject faulty parties).
        node_configs (`list[dict]`, *optional*): extra node config per party, e.g. `{"data-path": ...}` (each
            party then reads only its own saved dataset).

    Raises:
        [`~hf_ext.proto_evfl.active_party.FederationAborted`]: when the ServerApp ended the run (it saved the
            reason; the ServerApp itself does not raise).
    """
    from flwr.app import Context, RecordDict

    from .client_app import app as default_client_app
    from .server_app import app as server_app
    from .task import ProtoEvflRunConfig, party_model_from_state, top_model_from_result

    if not isinstance(settings, ProtoEvflRunConfig):
        raise TypeError(f"settings must be a ProtoEvflRunConfig, got {type(settings).__name__}")
    start = time.perf_counter()
    run_config = settings.to_run_config()
    grid_class = RecordingGrid if record_messages else LocalGrid
    grid = grid_class(client_app or default_client_app, settings.data.num_parties, run_config=run_config,
                      node_configs=node_configs)  # fmt: skip
    context = Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(), run_config=run_config)
    server_app(grid, context)
    state = dict(context.state)
    if state["status"]["status"] != "ok":
        from .active_party import FederationAborted

        raise FederationAborted(f"the ServerApp aborted the run: {state['status']['reason']}")
    result = state["predictions"]
    parties = [party_model_from_state(settings, k, grid.contexts[n].state) for k, n in enumerate(grid.get_node_ids())]
    history = {k: list(v) if isinstance(v, list) else v for k, v in state["history"].items()}
    return FederationResult(
        metrics=dict(state["metrics"]),
        top_model=top_model_from_result(settings, state),
        party_models=parties,
        predictions={k.replace("-", "_"): result[k].numpy() for k in result.keys()},
        history=history,
        rejections=[r for r in state["status"]["rejections"] if r],
        messages=getattr(grid, "log", []),
        seconds=time.perf_counter() - start,
    )


def _record(message, direction: str) -> dict:
    entry = {"direction": direction, "type": message.metadata.message_type, "records": {}}
    if message.has_content():
        for name, record in message.content.items():
            if hasattr(record, "to_numpy_ndarrays"):  # ArrayRecord
                entry["records"][name] = {k: record[k].numpy() for k in record.keys()}
            else:
                entry["records"][name] = dict(record)
    return entry


class RecordingGrid(LocalGrid):
    """A `LocalGrid` that keeps a copy of every message's records, in both directions, in `self.log`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log: list[dict] = []

    def push_messages(self, messages):
        messages = list(messages)
        self.log.extend(_record(m, "to-party") for m in messages)
        return super().push_messages(messages)

    def pull_messages(self, message_ids):
        replies = super().pull_messages(message_ids)
        self.log.extend(_record(r, "to-active-party") for r in replies)
        return replies


__all__ = [
    "FederationResult",
    "PRIORS",
    "ProtoEvflTrainingArguments",
    "RecordingGrid",
    "SELECTIONS",
    "UNSEEN_WEIGHTINGS",
    "run_federation",
]
