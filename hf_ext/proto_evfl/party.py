"""A party's side of the Proto-EVFL protocol ([`PartyWorker`]) and the `ClientApp` handlers that drive it.

A party holds one feature block: its aligned, unaligned and test rows, its [`ProtoEvflPartyModel`] and its Adam
state. It answers three message types (see `active_party.py`): `train.local` (the lower level on its unaligned
data; replies with prototypes and local prior), `train.step` (backpropagates the previous batch's gradients, then
embeds the next aligned batch) and `evaluate` (embeds the test entities). Nothing it sends is a raw feature, an
unaligned sample or an OT plan.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict

from hf_ext.core.federated import arrays_to_state_dict, state_dict_to_arrays

from .data import build_vertical_split
from .modeling_proto_evfl import ProtoEvflPartyModel
from .ot_selection import cosine_cost, select_by_confidence, select_by_ot, sinkhorn_plan
from .prototypes import (
    discover_unseen_prototypes,
    ema_update_prototypes,
    local_class_prior,
    mixed_prior,
    novelty_scores,
    prototype_contrastive_loss,
    uniform_prior,
    unseen_mass,
    validate_prior,
)
from .task import (
    ProtoEvflRunConfig,
    array_record,
    load_optimizer_arrays,
    optimizer_to_arrays,
    read_array,
    seeded,
)


def load_party_data(settings: ProtoEvflRunConfig, k: int, data_path: str = ""):
    """Only party `k`'s own rows: its saved dataset (`data_path`, else `<party_data_dir>/party-<k>`), or its block
    of the simulated split."""
    path = data_path or (str(Path(settings.party_data_dir) / f"party-{k}") if settings.party_data_dir else "")
    if path:
        return _cached_party_dataset(str(Path(path).resolve()), k)
    return build_vertical_split(settings.data).party(k)


@functools.lru_cache(maxsize=4)
def _cached_party_dataset(path: str, k: int):
    from .party_data import load_party_dataset  # datasets is imported only by parties that read their own data

    return load_party_dataset(path, k)


class PartyWorker:
    """One party's side of the protocol, rebuilt from its node's `Context` for every message.

    Args:
        settings ([`ProtoEvflRunConfig`]): the run.
        party_index (`int`): which feature block this party holds (its node's `partition-id`).
        state (`RecordDict`): the node's persistent state (`context.state`).
        data_path (`str`, *optional*): this party's saved dataset (`party_data.py`); default: the run's
            `party_data_dir`, else the simulated split.
    """

    def __init__(self, settings: ProtoEvflRunConfig, party_index: int, state: RecordDict, data_path: str = ""):
        self.settings, self.k, self.state, self.args = settings, party_index, state, settings.training
        self.data = load_party_data(settings, party_index, data_path)
        self._own_data = bool(data_path)
        expected = settings.party_widths()[party_index]
        if self.data.width != expected:
            raise ValueError(
                f"party {party_index}: feature block has {self.data.width} columns, but the federation's encoder "
                f"for party {party_index} expects {expected}"
            )
        self.local_prior = uniform_prior(settings.num_classes)
        self.discovered, self.unseen_share = False, 0.0
        live = _LIVE.pop(id(state), None)  # taken, not shared: a message that fails before `save` leaves none
        if live is not None and live.holds(state, settings, party_index):
            # the model and optimiser this process saved into `state` last time, which nothing replaced since:
            # decoding the same arrays into a fresh model would give the same parameters and Adam moments
            self.model, self.optimizer = live.model, live.optimizer
        else:
            config = settings.party_config(party_index)
            self.model = seeded(self.args.seed * 1009 + party_index, lambda: ProtoEvflPartyModel(config))
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.args.party_learning_rate)
            if "party-model" in state:
                reference = self.model.state_dict()
                self.model.load_state_dict(arrays_to_state_dict(state["party-model"], reference=reference))
                load_optimizer_arrays(self.optimizer, state["party-optimizer"])
        if "party-model" in state:
            self.local_prior = state["party-prior"]["prior"].numpy()
            self.discovered = bool(state["party-meta"]["discovered"])
        self.rows = {int(i): r for r, i in enumerate(self.data.aligned_ids)}

    @classmethod
    def from_context(cls, context: Context) -> PartyWorker:
        settings = ProtoEvflRunConfig.from_run_config(context.run_config)
        k, n = int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
        if n != settings.data.num_parties:
            raise ValueError(f"this SuperNode belongs to a federation of {n} parties; the run expects "
                             f"{settings.data.num_parties}")  # fmt: skip
        return cls(settings, k, context.state, str(context.node_config.get("data-path", "")))

    def save(self) -> None:
        self.state["party-model"] = state_dict_to_arrays(self.model.state_dict())
        self.state["party-optimizer"] = optimizer_to_arrays(self.optimizer)
        self.state["party-prior"] = array_record(prior=self.local_prior)
        self.state["party-meta"] = ConfigRecord({"discovered": self.discovered})
        _LIVE[id(self.state)] = _LiveParty(self.state, self.settings, self.k, self.model, self.optimizer)
        while len(_LIVE) > _LIVE_MAX:  # the oldest runs' parties
            del _LIVE[next(iter(_LIVE))]

    def _aligned_features(self, ids: np.ndarray) -> torch.Tensor:
        unknown = [int(i) for i in ids if int(i) not in self.rows]
        if unknown:
            raise ValueError(f"party {self.k} holds no aligned entity with ids {unknown[:5]}")
        return torch.from_numpy(self.data.aligned_features[[self.rows[int(i)] for i in ids]])

    def apply_gradients(self, content: RecordDict) -> None:
        """Backpropagates `∂L/∂z^k` and `∂L/∂s^k` of the previous aligned batch, if the message carries them."""
        if "gradients" not in content:
            return
        sender = f"active party (to party {self.k})"
        ids = read_array(content, "gradients", "ids", (-1,), sender)
        pending = self.state["party-pending"]["ids"].numpy() if "party-pending" in self.state else None
        if pending is None or not np.array_equal(ids, pending):
            raise ValueError(f"party {self.k} received gradients for ids that differ from the batch it last embedded")
        cfg = self.model.config
        grad_z = read_array(content, "gradients", "embeddings", (len(ids), cfg.embed_dim), sender)
        grad_s = read_array(content, "gradients", "prototype-logits", (len(ids), cfg.num_classes), sender)
        z = self.model.embed(self._aligned_features(ids))  # the same parameters as when the batch was embedded
        s = self.model.prototype_logits(z)
        self.optimizer.zero_grad()
        torch.autograd.backward([z, s], [torch.from_numpy(grad_z), torch.from_numpy(grad_s)])
        self.optimizer.step()
        del self.state["party-pending"]

    def embed(self, ids: np.ndarray | None) -> RecordDict:
        """Embeddings and prototype logits of aligned ids (remembered until their gradients come), or of the test
        entities when `ids` is `None`."""
        with torch.no_grad():
            x = torch.from_numpy(self.data.test_features) if ids is None else self._aligned_features(ids)
            z = self.model.embed(x)
            s = self.model.prototype_logits(z)
        if ids is not None:
            self.state["party-pending"] = array_record(ids=ids)
        return RecordDict({"embeddings": array_record(embeddings=z.numpy(), prototype_logits=s.numpy())})

    def oracle_unaligned_labels(self) -> np.ndarray:
        """The true classes of this party's unaligned pool, for `selection="oracle"` only: the positive control of
        `hf-ext reproduce proto_evfl` (does the setting reward labels on the unaligned pool at all?). Only the
        simulated split knows them; a party reading its own data has none, and the run stops saying so."""
        if self.settings.party_data_dir or getattr(self, "_own_data", False):
            raise ValueError(
                "selection='oracle' feeds the unaligned pool's true labels (a positive control); it runs on the "
                "simulated split only, not on a party's own data"
            )
        labels = build_vertical_split(self.settings.data).unaligned_labels(self.k)
        if len(labels) != len(self.data.unaligned_features):
            raise ValueError(
                f"party {self.k}: {len(labels)} oracle labels for {len(self.data.unaligned_features)} rows"
            )
        return labels

    @torch.no_grad()
    def estimate_local_prior(self, x_u: torch.Tensor, labelled: np.ndarray) -> np.ndarray:
        """`π^k`: the EM mass of the labelled classes and, for the never-labelled ones, the open-set share `ν` of
        the unaligned pool that no labelled prototype explains (referenced on the party's aligned entities, which
        are all of labelled classes); see [`local_class_prior`]."""
        model = self.model
        z_u = model.embed(x_u)
        self.unseen_share = 0.0
        if not labelled.all() and labelled.any():
            z_a = model.embed(torch.from_numpy(self.data.aligned_features))
            protos = model.prototypes.detach()
            self.unseen_share = unseen_mass(novelty_scores(z_u, protos, labelled).numpy(),
                                            novelty_scores(z_a, protos, labelled).numpy(),
                                            self.args.novelty_quantile)  # fmt: skip
        return local_class_prior(model.prototype_logits(z_u), labelled, self.unseen_share)

    def local_phase(self, rnd: int, global_prior_: np.ndarray, labelled: np.ndarray) -> tuple[RecordDict, dict]:
        """The lower level on this party's unaligned data: conditional-OT (or threshold) selection, the
        prototype-contrastive update and the EMA of the prototypes; returns prototypes and local prior."""
        args, model, c = self.args, self.model, self.settings.num_classes
        x_u = torch.from_numpy(self.data.unaligned_features)
        if args.prior == "mixed":
            prior = mixed_prior(self.local_prior, global_prior_, args.prior_mix)
        else:
            prior = uniform_prior(c) if args.prior == "uniform" else validate_prior(self.local_prior, c)
        stats = {"selected-fraction": 0.0, "ot-fallbacks": 0, "unaligned-loss": 0.0, "local-steps": 0}
        if args.selection != "none" and rnd > args.warmup_rounds:
            rng = np.random.default_rng([args.seed, self.k, rnd])
            if args.discover_unseen and not self.discovered and not labelled.all():
                with torch.no_grad():
                    new = discover_unseen_prototypes(
                        model.embed(x_u), model.prototypes.detach(), labelled, float(prior[~labelled].sum()),
                        generator=torch.Generator().manual_seed(args.seed * 31 + self.k),
                    )  # fmt: skip
                    model.prototypes[torch.from_numpy(~labelled)] = new
                self.discovered = True
            for _ in range(args.local_steps):
                idx = rng.choice(x_u.shape[0], size=min(args.unaligned_batch_size, x_u.shape[0]), replace=False)
                z = model.embed(x_u[idx])
                s = model.prototype_logits(z)
                if args.selection == "ot":
                    plan = sinkhorn_plan(cosine_cost(z, model.prototypes), prior, epsilon=args.sinkhorn_epsilon,
                                         max_iter=args.sinkhorn_iterations)  # fmt: skip
                    targets = plan.soft_labels
                    keep = select_by_ot(targets, mode=args.selection_mode, threshold=args.selection_threshold,
                                        generator=rng)  # fmt: skip
                    stats["ot-fallbacks"] += int(plan.method != "sinkhorn")
                elif args.selection == "oracle":  # the positive control: the pool's true classes, every row kept
                    targets = np.eye(c)[self.oracle_unaligned_labels()[idx]]
                    keep = np.ones(len(idx), dtype=bool)
                else:
                    keep, targets = select_by_confidence(s.detach().softmax(-1).double().numpy(),
                                                         args.confidence_threshold)  # fmt: skip
                stats["selected-fraction"] += float(keep.mean()) / args.local_steps
                stats["local-steps"] += 1
                if not keep.any():
                    continue
                mask, q = torch.from_numpy(keep), torch.from_numpy(targets[keep]).float()
                loss = prototype_contrastive_loss(s[mask], q) * args.unaligned_loss_weight
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                stats["unaligned-loss"] += float(loss.detach()) / args.local_steps
                if args.prototype_ema:
                    ema_update_prototypes(model.prototypes.data, z.detach()[mask], q.argmax(1), args.prototype_momentum)
        self.local_prior = self.estimate_local_prior(x_u, labelled)
        stats["unseen-share"] = self.unseen_share
        stats.update({"num-examples": int(x_u.shape[0]), "party-index": self.k, "width": self.data.width})
        prototypes = model.normalized_prototypes().detach().numpy()
        content = RecordDict({"prototypes": array_record(prototypes=prototypes, prior=self.local_prior),
                              "metrics": MetricRecord(stats)})  # fmt: skip
        if rnd == 1:  # the entity ids (the PSI result, already shared) so the active party can check them
            content["layout"] = array_record(aligned_ids=self.data.aligned_ids, test_ids=self.data.test_ids)
        return content, stats


class _LiveParty:
    """The model and optimiser a [`PartyWorker`] last saved into a node state, kept in this process.

    The protocol rebuilds a party from `context.state` on every message (a SuperNode may run each message in a new
    process); in one process (the in-process grid, a simulation actor) that rebuild decoded, message after message,
    the very arrays this process had just encoded: a fifth of a Proto-EVFL run. [`holds`] says whether `state`
    still holds exactly what was saved (the same record, array and byte objects: anything replaced, by a restart,
    a test or a deployment's deserialised state, fails it and the party is rebuilt from the state as before)."""

    def __init__(self, state: RecordDict, settings, k: int, model, optimizer):
        self.state, self.settings, self.k, self.model, self.optimizer = state, settings, k, model, optimizer
        self.records = self._snapshot(state)

    @staticmethod
    def _snapshot(state: RecordDict) -> tuple:
        out = []
        for name in ("party-model", "party-optimizer"):
            record = state[name] if name in state else None
            arrays = tuple((key, record[key], record[key].data) for key in record.keys()) if record is not None else ()
            out.append((record, arrays))
        return tuple(out)

    def holds(self, state: RecordDict, settings, k: int) -> bool:
        if state is not self.state or k != self.k or settings != self.settings:
            return False
        now = self._snapshot(state)
        return all(
            r is s and len(a) == len(b) and all(x[0] == y[0] and x[1] is y[1] and x[2] is y[2] for x, y in zip(a, b))
            for (r, a), (s, b) in zip(now, self.records)
        )


_LIVE: dict[int, _LiveParty] = {}  # id(node state) -> what was saved into it; insertion order = age
_LIVE_MAX = 8


# --- ClientApp handlers (`client_app.py` routes to these) -------------------------------------------------------------


def _global_prior(content: RecordDict, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    sender = "active party"
    prior = read_array(content, "global-prior", "prior", (num_classes,), sender)
    labelled = read_array(content, "global-prior", "labelled", (num_classes,), sender).astype(bool)
    return validate_prior(prior, num_classes, what="global prior received from the active party"), labelled


def handle_local(message: Message, context: Context) -> Message:
    """`train.local`: apply pending gradients, run the lower level, reply with prototypes and local prior, and the
    embeddings of the round's first aligned batch."""
    worker = PartyWorker.from_context(context)
    worker.apply_gradients(message.content)
    prior, labelled = _global_prior(message.content, worker.settings.num_classes)
    content, _ = worker.local_phase(int(message.content["config"]["round"]), prior, labelled)
    first_batch = read_array(message.content, "step", "ids", (-1,), "active party")
    content["embeddings"] = worker.embed(first_batch)["embeddings"]
    worker.save()
    return Message(content, reply_to=message)


def handle_step(message: Message, context: Context) -> Message:
    """`train.step`: apply the previous batch's gradients, reply with the next batch's embeddings."""
    worker = PartyWorker.from_context(context)
    worker.apply_gradients(message.content)
    ids = read_array(message.content, "step", "ids", (-1,), "active party")
    content = worker.embed(ids)
    content["metrics"] = MetricRecord({"party-index": worker.k, "num-examples": len(ids)})
    worker.save()
    return Message(content, reply_to=message)


def handle_evaluate(message: Message, context: Context) -> Message:
    """`evaluate`: apply the last gradients, reply with test embeddings and the current local prototypes."""
    worker = PartyWorker.from_context(context)
    worker.apply_gradients(message.content)
    content = worker.embed(None)
    content["prototypes"] = array_record(prototypes=worker.model.normalized_prototypes().detach().numpy(),
                                         prior=worker.local_prior)  # fmt: skip
    content["metrics"] = MetricRecord({"party-index": worker.k, "num-examples": len(worker.data.test_ids)})
    worker.save()
    return Message(content, reply_to=message)


__all__ = ["PartyWorker", "handle_evaluate", "handle_local", "handle_step"]
