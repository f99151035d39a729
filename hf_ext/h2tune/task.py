"""What an H2Tune client does, independent of how it is run (in-process loop, Flower simulation or deployment).

A [`H2TuneClient`] owns a decoder (tiny, SmolLM2 or a user's; see `clients.py` / `bases.py`) with an H2Tune
adapter, its relation matrix P_c and its task data. `fit(G)` loads M̃_c = P_c·G, trains one local round with
`H2TuneTrainer`, and returns only G_c = P_c·M̃_c (nothing that depends on the hidden size). The baselines run in the
same client: local-only LoRA, the pooled-data ceiling (local-only on every client's training data), HetLoRA
(rank-padded averaging within a base) and FLoRA (stacking).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from hf_ext.core.federated import FlowerRunConfig, parse_run_config
from hf_ext.core.paths import work_dir

from .alignment import RelationMatrix
from .bases import PRETRAIN_ARGS, PRETRAIN_CORPUS, build_base, pretrain_corpus, pretrain_key, pretrained_base
from .clients import CLIENTS, ClientSpec, base_group, base_seed, client_pairs, pooled_pairs, resolve_clients
from .config import H2TuneConfig
from .data import TASKS, exact_match, to_features
from .model import MODULE_SLOTS, get_middle, num_layers, set_middle

GLOBAL_RANK = 16

# The compared methods, all run by the same client and server code (in-process or on Flower): `mode` says what a
# client sends ("h2tune": G_c; "hetlora" / "flora": its LoRA factors; "local": nothing), the other keys set RunConfig
# fields. "pooled" is the ceiling: local-only training on every client's training data (each in its own format).
# "adapter-only" is the control that separates H2Tune's adapter form from its sharing: every client trains the H2Tune
# adapter (ΔW = (α/r)·B(T+I)A with its T, S and P_c, the same seeded G⁰ to start from, the same two-pass step) and
# never aggregates: like local-only it sends nothing and ignores whatever the server sends.
VARIANTS: dict[str, dict] = {
    "local-only": {"mode": "local"},
    "adapter-only": {"mode": "local", "h2tune_adapter": True},
    "pooled": {"mode": "local", "pooled": True},
    "hetlora": {"mode": "hetlora"},
    "flora": {"mode": "flora"},
    "h2tune": {"mode": "h2tune"},
    "h2tune-no-sparsify": {"mode": "h2tune", "sparsify": False},
    "h2tune-index-aligned": {"mode": "h2tune", "index_aligned": True},
    "h2tune-joint": {"mode": "h2tune", "alternating": False},
}


_DEFAULT_CACHE_DIR = str(work_dir("h2tune", "pretrained"))


def _cache_dir(value) -> str:
    """`cache-dir`: empty = the default cache (so a run config may leave it blank)."""
    if not isinstance(value, str):
        raise ValueError(f"run-config key 'cache-dir' must be a string, got {value!r}")
    return value or _DEFAULT_CACHE_DIR


@dataclass(frozen=True)
class RunConfig(FlowerRunConfig):
    """Knobs of one federated run, parsed once from the Flower run config (frozen).

    Run-config keys are the field names with `-` for `_`, except `num-server-rounds` (`rounds`) and `lr`
    (`learning_rate`); `sparsify`, `index_aligned`, `alternating` and `pooled` follow from `variant` and are not
    keys; an unknown key is refused by name ([`hf_ext.core.federated.FlowerRunConfig`]). The server also reads
    `min-nodes` (0: every client), `min-rounds` (0: every round) and `timeout` (seconds per round).
    """

    rounds: int = field(default=3, metadata={"run_config": "num-server-rounds"})
    local_steps: int = 20
    batch_size: int = 16
    learning_rate: float = field(default=2e-3, metadata={"run_config": "lr"})
    num_train: int = 200
    num_test: int = 50
    seed: int = 0
    # set by the variant ([`for_variant`]), not run-config keys of their own
    sparsify: bool = field(default=True, metadata={"run_config": None})
    index_aligned: bool = field(default=False, metadata={"run_config": None})
    pretrain_steps: int = 0  # >0: briefly pretrain each base on the shared corpus (cached under cache_dir)
    cache_dir: str = field(default=_DEFAULT_CACHE_DIR, metadata={"run_config_parse": _cache_dir})
    alternating: bool = field(default=True, metadata={"run_config": None})  # False: the "joint" ablation
    variant: str = "h2tune"  # a key of VARIANTS; `for_variant` sets the fields it implies
    save_dir: str = ""  # Flower runs: where the ClientApps save their adapted models after the last round
    pooled: bool = field(default=False, metadata={"run_config": None})  # the ceiling: every client's training pairs
    # the adapter-only control: the H2Tune adapter trained locally, no aggregation (set by the variant)
    h2tune_adapter: bool = field(default=False, metadata={"run_config": None})
    # the clients (clients.py): comma-separated, one entry per client; all empty = the built-in CLIENTS
    client_models: str = ""
    client_ranks: str = ""
    client_tasks: str = ""
    client_datasets: str = ""
    max_len: int = 32  # tokens per training sequence (prompt + answer + EOS)
    heal_steps: int = 20  # distillation steps that heal a derived smollm2-L<N> base (derive.py; cached)
    # the ServerApp's: nodes to wait for and train on (0: every client), rounds that must aggregate (0: all of them),
    # seconds to wait for a round's replies
    min_nodes: int = 0
    min_rounds: int = 0
    timeout: float = 600.0

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown H2Tune variant {self.variant!r}; choose from {sorted(VARIANTS)}")
        from .checks import check_run_config

        check_run_config(self, len(self.clients))
        for name in ("min_nodes", "min_rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"RunConfig.{name} must be an integer >= 0 (0: all), got {value!r}")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not self.timeout > 0:
            raise ValueError(f"RunConfig.timeout must be a number of seconds > 0, got {self.timeout!r}")

    @property
    def clients(self) -> tuple[ClientSpec, ...]:
        """This run's clients ([`~hf_ext.h2tune.clients.resolve_clients`]; the built-in ones by default)."""
        return _resolve(self.client_models, self.client_ranks, self.client_tasks, self.client_datasets)

    @property
    def max_layers(self) -> int:
        """L_max: the depth of the deepest client (rows of G)."""
        return max(c.layers for c in self.clients)

    @property
    def mode(self) -> str:
        return VARIANTS[self.variant]["mode"]

    def for_variant(self, variant: str) -> RunConfig:
        """This config for `variant`, with the fields the variant implies (sparsify, index_aligned, alternating)."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown H2Tune variant {variant!r}; choose from {sorted(VARIANTS)}")
        implied = {
            "sparsify": True,
            "index_aligned": False,
            "alternating": True,
            "pooled": False,
            "h2tune_adapter": False,
        }
        implied.update({k: v for k, v in VARIANTS[variant].items() if k != "mode"})
        return dataclasses.replace(self, variant=variant, **implied)

    @classmethod
    def _parse_run_config(cls, run_config) -> RunConfig:
        """Parses a Flower run config (`num-server-rounds`, `local-steps`, `lr`, `variant`, ...; unknown keys and
        values of the wrong type are refused by name). A variant other than `"h2tune"` sets the fields it implies
        ([`for_variant`]), which win over the run config's. (`from_run_config` calls this once per distinct run
        config.)"""
        run = parse_run_config(cls, run_config)
        return run if run.variant == "h2tune" else run.for_variant(run.variant)


@functools.lru_cache(maxsize=32)
def _resolve(models: str, ranks: str, tasks: str, datasets: str) -> tuple[ClientSpec, ...]:
    return resolve_clients(models, ranks, tasks, datasets)  # cached: a real model's config is read once


class H2TuneClient:
    """A federated H2Tune client (see the module docstring)."""

    def __init__(self, spec: ClientSpec, run: RunConfig, max_layers: int, base=None, index: int = 0):
        # the local-only and HetLoRA baselines train vanilla LoRA; every H2Tune variant and the adapter-only control
        # train the H2Tune adapter
        plain_lora = run.mode != "h2tune" and not run.h2tune_adapter
        self.spec, self.run, self.plain_lora = spec, run, plain_lora
        self.output_dir = tempfile.mkdtemp(prefix=f"h2tune_{spec.name}_")  # Trainer scratch (nothing is saved)
        weakref.finalize(self, shutil.rmtree, self.output_dir, ignore_errors=True)  # goes with the client
        from .data import CHARS_CODEC

        self.codec = CHARS_CODEC
        specs = list(run.clients)
        if not 0 <= index < len(specs):
            raise ValueError(f"client index {index} is not one of the run's {len(specs)} clients")
        specs[index] = spec  # a caller's own spec for this slot (its data split is still that of slot `index`)
        if base is None:
            base, self.codec = build_base(spec, run, base_seed(specs, index))
        config = H2TuneConfig(r=spec.rank, global_rank=GLOBAL_RANK, task_type="CAUSAL_LM", sparsify=run.sparsify)
        from peft import LoraConfig, get_peft_model

        if plain_lora:  # the local-only / HetLoRA baselines: vanilla LoRA with the same rank and defaults
            config = LoraConfig(
                r=spec.rank, lora_alpha=16, lora_dropout=0.05, target_modules="all-linear", task_type="CAUSAL_LM"
            )

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(run.seed * 100 + index)
            self.model = get_peft_model(base, config)
        self.relation = RelationMatrix(
            max_layers, spec.layers, seed=run.seed * 100 + index, index_aligned=run.index_aligned
        )
        # disjoint test inputs: the client is tested on operand pairs it never trains on (data.client_split)
        self.train_pairs, self.test_pairs = client_pairs(specs, index, run)
        self.group = base_group(specs, index)  # HetLoRA / FLoRA: the server's means of this client's base only
        if run.pooled:  # the ceiling: every client's operand pairs, posed in this client's own format
            self.train_pairs = pooled_pairs(specs, run, index)
        self.prev_t: dict[str, torch.Tensor] | None = None  # T at the end of the previous round
        self.global_tensor: torch.Tensor | None = None  # G downloaded this round (P_c's task gradient goes through it)
        self.rounds_done = 0
        # FLoRA: the global ΔW factors merged into the base so far, in order. They are part of the client's state (a
        # Flower ClientApp is rebuilt from its base every round and replays them), never sent anywhere.
        self.flora_merged: list[dict[str, np.ndarray]] = []

    @property
    def num_layers(self) -> int:
        return num_layers(self.model)

    def run_round(self, incoming: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
        """One federated round in this run's mode: apply what the server sent (nothing in the first round), train
        locally, and return what the client sends — `{"g": G_c}` for H2Tune, its padded-able LoRA factors for
        HetLoRA, nothing for local-only. The in-process loop and the Flower ClientApp both call this."""
        from .baselines import apply_flora, hetlora_payload, load_hetlora
        from .checks import check_global

        incoming = check_global(incoming, self.run.mode, global_shape(self.relation.weight.shape[0]))
        if self.run.h2tune_adapter and self.run.mode == "local":  # the adapter-only control: `incoming` is ignored
            self.fit_alone()
            return {}
        if self.run.mode == "h2tune":
            g = torch.from_numpy(np.array(incoming["g"], dtype=np.float32)) if incoming and "g" in incoming else None
            g_c = self.fit(g).numpy().astype(np.float32)
            self.rounds_done += 1
            return {"g": g_c}
        if self.run.mode == "hetlora" and incoming:
            load_hetlora(self.model, incoming, group=self.group)
        if self.run.mode == "flora" and incoming:  # merge the stacked global ΔW into the base, restart the LoRA
            seed = self.run.seed * 100 + self.rounds_done
            self.flora_merged.append(apply_flora(self.model, incoming, seed=seed, group=self.group))
        self.train_local()
        self.rounds_done += 1
        if self.run.mode == "local":
            return {}
        return hetlora_payload(self.model, scaled=self.run.mode == "flora")

    def fit(self, global_tensor: torch.Tensor | None) -> torch.Tensor:
        """One round: download G (if any), train locally, return G_c."""
        if global_tensor is not None:
            set_middle(self.model, self.relation.download(global_tensor))
        self.global_tensor = global_tensor
        self.train_local()
        return self.relation.upload(get_middle(self.model))

    def fit_alone(self) -> None:
        """One round of the adapter-only control: the H2Tune adapter trained with no aggregation.

        The first round starts, as H2Tune's does, from M̃_c = P_c·G⁰ with the run's common seeded G⁰ (so an
        adapter-only client and an H2Tune client of the same seed are identical after round 1); later rounds keep
        the client's own trained M̃ (nothing is downloaded) and run the same two-pass step. G⁰ stays the tensor P_c's
        task gradient flows through (M̃_c = P_cᵀ·G⁰ + D_c). "First round" is read from the persisted T_prev, so a
        Flower client rebuilt from its saved state each round does not restart from G⁰."""
        from .alignment import initial_global

        g0 = initial_global(self.relation.weight.shape[0], len(MODULE_SLOTS), GLOBAL_RANK, seed=self.run.seed)
        if self.prev_t is None:
            set_middle(self.model, self.relation.download(g0))
        self.global_tensor = g0
        self.train_local()
        self.rounds_done += 1

    def train_local(self) -> None:
        from datasets import Dataset
        from transformers import PrinterCallback, TrainingArguments

        from hf_ext.core.devices import use_cpu
        from hf_ext.core.trainer_metrics import argmax_logits

        from .trainer import H2TuneAlternatingTrainer, H2TuneTrainer, compute_metrics, previous_t

        ds = Dataset.from_dict(to_features(self.train_pairs, max_len=self.run.max_len, codec=self.codec))
        args = TrainingArguments(
            output_dir=self.output_dir,
            use_cpu=use_cpu(),
            report_to="none",
            max_steps=self.run.local_steps,
            per_device_train_batch_size=self.run.batch_size,
            learning_rate=self.run.learning_rate,
            weight_decay=0.1,
            adam_beta2=0.95,
            lr_scheduler_type="cosine",
            warmup_steps=0,
            save_strategy="no",
            seed=self.run.seed,
            logging_strategy="no",
        )
        extra = [self.relation.weight] if self.relation.weight.requires_grad and not self.plain_lora else []
        # P_c is trained by the task loss through M̃ = P_cᵀ·G + D_c (model.relation_path) and by its norm penalty
        relation = {"relation": self.relation.weight, "global_tensor": self.global_tensor} if extra else {}
        # trainer.evaluate(eval_dataset) reports exact_match / token_acc (the README's metric), not only the loss
        relation.update(compute_metrics=compute_metrics, preprocess_logits_for_metrics=argmax_logits)
        if self.run.alternating and self.prev_t and not self.plain_lora:  # rounds >= 1: two passes per step
            trainer = H2TuneAlternatingTrainer(
                model=self.model, args=args, train_dataset=ds, extra_shared=extra, prev_t=self.prev_t, **relation
            )
        else:  # round 0 (or the joint ablation): L = CE + mean ||theta||
            trainer = H2TuneTrainer(model=self.model, args=args, train_dataset=ds, extra_shared=extra, **relation)
        trainer.remove_callback(PrinterCallback)  # no per-round metric dicts on stdout
        if extra:  # P_c joins the optimiser
            trainer.create_optimizer()
            trainer.optimizer.add_param_group({"params": extra, "weight_decay": 0.0})
        self.model.train()
        trainer.train()
        self.prev_t = previous_t(self.model)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything the client keeps between rounds (A, B, T, S, M̃, idx and P_c); it never leaves the node."""
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(self.model, save_embedding_layers=False)
        state = {k: v.detach().cpu().numpy() for k, v in state.items()}
        state["relation.weight"] = self.relation.weight.detach().cpu().numpy()
        for name, t in (self.prev_t or {}).items():
            state[f"prev_t:{name}"] = t.cpu().numpy()
        state["rounds_done"] = np.array(self.rounds_done, dtype=np.int64)
        for i, merged in enumerate(self.flora_merged):
            state.update({f"flora_merged:{i}:{k}": np.asarray(v) for k, v in merged.items()})
        return state

    def load_state_arrays(self, state) -> None:
        """Restores what [`state_arrays`] returned (in a fresh process or round)."""
        from peft import set_peft_model_state_dict

        state = {k: torch.as_tensor(v) for k, v in state.items()}
        with torch.no_grad():
            self.relation.weight.copy_(state.pop("relation.weight"))
        prev = {k.split(":", 1)[1]: state.pop(k) for k in [k for k in state if k.startswith("prev_t:")]}
        self.prev_t = prev or None
        if "rounds_done" in state:
            self.rounds_done = int(state.pop("rounds_done"))
        merged: dict[int, dict[str, np.ndarray]] = {}
        for key in [k for k in state if k.startswith("flora_merged:")]:
            _, i, name = key.split(":", 2)
            merged.setdefault(int(i), {})[name] = state.pop(key).numpy()
        if merged:  # FLoRA: the base was rebuilt unmerged; replay the earlier rounds' ΔW in their order
            from .baselines import merge_flora

            self.flora_merged = [merged[i] for i in sorted(merged)]
            for stacked in self.flora_merged:
                merge_flora(self.model, stacked, group=self.group)
        result = set_peft_model_state_dict(self.model, state)
        if result.unexpected_keys:
            raise ValueError(f"client state has unexpected keys {list(result.unexpected_keys)[:5]}")

    def evaluate(self) -> float:
        return exact_match(self.model, self.test_pairs, codec=self.codec)

    def save_artifact(self, out: str | Path) -> Path:
        """This client's adapted model as a Hub artifact pair under `out/clients/<name>/`: `base/` (the unmodified
        base decoder) and `adapter/` (the adapter, whose `adapter_config.json` and card name the base)."""
        import copy
        import json

        folder = Path(out) / "clients" / self.spec.name
        base_ref = str(folder / "base")
        self.model.peft_config["default"].base_model_name_or_path = base_ref
        self.model.get_base_model().name_or_path = base_ref  # what PEFT's adapter card names as `base_model`
        self.model.save_pretrained(folder / "adapter")
        copy.deepcopy(self.model).unload().save_pretrained(folder / "base")
        (folder / "client.json").write_text(json.dumps(self.spec.__dict__, indent=2))
        return folder


def global_shape(max_layers: int) -> tuple[int, int, int, int]:
    return (max_layers, len(MODULE_SLOTS), GLOBAL_RANK, GLOBAL_RANK)


# --- what the Flower apps do (client_app.py / server_app.py only route messages here) ---------------------------------

STATE_KEY = "h2tune-client-state"


def _incoming(content) -> dict[str, np.ndarray]:
    """The server's arrays as numpy (`ValueError` for a non-ArrayRecord or undecodable bytes); the client then checks
    them against its own shapes before training ([`~hf_ext.h2tune.checks.check_global`])."""
    from flwr.app import ArrayRecord

    if "arrays" not in content:
        return {}
    record = content["arrays"]
    if not isinstance(record, ArrayRecord):
        raise ValueError(f"the server's 'arrays' record is a {type(record).__name__}, not an ArrayRecord")
    out = {}
    for key in record.keys():
        try:
            out[key] = record[key].numpy()
        except Exception as err:  # noqa: BLE001 (corrupt bytes: numpy raises several types)
            raise ValueError(f"the server's array {key!r} cannot be decoded ({type(err).__name__})") from err
    return out


def client_train(msg, context) -> dict:
    """One round of the ClientApp: the node's `partition-id` picks its client among the run config's clients; the
    client's local state (A, B, T, S, M̃ and P_c) persists across rounds in `context.state`; after the last round it
    saves its adapted model under `save-dir` (when set). Returns the reply's records (`arrays`: what the variant
    sends; `metrics`: `num-examples`, `partition-id`, `accuracy` after local training)."""
    from flwr.app import Array, ArrayRecord, MetricRecord

    run = RunConfig.from_run_config(context.run_config)
    pid = int(context.node_config["partition-id"])
    if not 0 <= pid < len(run.clients):
        raise ValueError(f"node config partition-id={pid}, but the run config defines {len(run.clients)} clients")
    client = H2TuneClient(run.clients[pid], run, run.max_layers, index=pid)
    if STATE_KEY in context.state:
        client.load_state_arrays({k: v.numpy() for k, v in context.state[STATE_KEY].items()})
    outgoing = client.run_round(_incoming(msg.content))
    context.state[STATE_KEY] = ArrayRecord(
        {k: Array(np.ascontiguousarray(v)) for k, v in client.state_arrays().items()}
    )
    if run.save_dir and int(msg.content["config"].get("server-round", 0)) == run.rounds:
        client.save_artifact(run.save_dir)  # the final round's adapted model, as the in-process run saves it
    metrics = {"num-examples": len(client.train_pairs), "partition-id": pid, "accuracy": client.evaluate()}
    arrays = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in outgoing.items()})
    return {"arrays": arrays, "metrics": MetricRecord(metrics)}


def server_main(grid, context) -> None:
    """The ServerApp: sends the common seeded G⁰ (H2Tune variants) or nothing (baselines), then each round what
    [`~hf_ext.h2tune.strategy.H2TuneStrategy`] makes of the replies; saves the result (global arrays, a summary, and
    per round and node id the rejected / failed replies with reasons, the client accuracies, the bytes received, the
    partition bound to each node); then fails with [`~hf_ext.core.federated.TooFewRounds`] when fewer than
    `min-rounds` rounds aggregated, so `flwr run` reports an error instead of exiting 0 with the initial model."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord

    from hf_ext.core.federated import require_rounds, save_result

    from .alignment import initial_global
    from .strategy import H2TuneStrategy

    run = RunConfig.from_run_config(context.run_config)
    clients = run.clients  # the run config's client list (the built-in three by default): same on every node
    min_nodes = run.min_nodes or len(clients)
    # LoRA factors are (r × d_in) / (d_out × r): no client's exceeds 4 × its width (GPT-2's MLP; SmolLM2's MLP is
    # 2.67×) or its rank
    max_dim = max(max(4 * c.hidden, c.rank) for c in clients)
    strategy = H2TuneStrategy(
        global_shape(run.max_layers),
        mode=run.mode,
        num_partitions=len(clients),
        base_groups={i: base_group(clients, i) for i in range(len(clients))},
        hetlora_bounds={"max_layers": run.max_layers, "num_slots": len(MODULE_SLOTS), "max_dim": max_dim},
        fraction_train=1.0,
        fraction_evaluate=0.0,
        min_train_nodes=min_nodes,
        min_available_nodes=min_nodes,
    )
    initial = ArrayRecord()
    if run.mode == "h2tune":
        g0 = initial_global(run.max_layers, len(MODULE_SLOTS), GLOBAL_RANK, seed=run.seed)
        initial = ArrayRecord({"g": Array(g0.numpy())})
    result = strategy.start(
        grid=grid, initial_arrays=initial, num_rounds=run.rounds, train_config=ConfigRecord(), timeout=run.timeout
    )
    rejected = sum(len(v) for v in strategy.rejected.values())
    summary = MetricRecord(
        {
            "num-rejected": rejected,
            "rounds": len(strategy.aggregated),
            **{f"round-{r}": float(m.get("accuracy", float("nan"))) for r, m in result.train_metrics_clientapp.items()},
        }
    )
    records = strategy.result_records()  # per round and node id (the transport's): rejected / failed, and why
    save_result(
        context,
        {
            "arrays": result.arrays,
            "summary": summary,
            **records,
            # per round and partition: the accuracy each client measured after its local training
            "client-accuracy": MetricRecord(
                {f"{r}:{c}": a for r, v in strategy.client_accuracy.items() for c, a in v.items()}
            ),
            "bytes-received": MetricRecord({str(r): b for r, b in strategy.bytes_received.items()}),
            "partitions": MetricRecord({str(node): pid for node, pid in strategy.partitions.items()}),
        },
    )
    require_rounds(len(strategy.aggregated), run.min_rounds or run.rounds, run.rounds)


__all__ = [
    "CLIENTS",
    "ClientSpec",
    "GLOBAL_RANK",
    "H2TuneClient",
    "PRETRAIN_ARGS",
    "PRETRAIN_CORPUS",
    "RunConfig",
    "STATE_KEY",
    "TASKS",
    "VARIANTS",
    "client_train",
    "global_shape",
    "pretrain_corpus",
    "pretrain_key",
    "pretrained_base",
    "server_main",
]
