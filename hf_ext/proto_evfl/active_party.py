"""The active party's side of the Proto-EVFL protocol: [`ActiveParty`] (labels, top model, global prior) and
[`run_server`], the `ServerApp`'s main loop (the bi-level schedule).

**Why Flower's Message API.** Vertical FL is not FedAvg: nothing is averaged, and the parties hold different
models of different inputs. The Message API carries arbitrary named records under custom message types, and a
`ServerApp` drives the exchange step by step, so the active party (label holder and top model) is the `ServerApp`
and every feature block is a `ClientApp` on its own SuperNode, the active party's own block included (co-located
with it; this way the top model never touches raw features, not even its owner's, and all parties share one code
path). The same apps run in-process (`LocalGrid`) and as separate processes on Flower's deployment engine.

**Messages.** `train.local` once per round, `train.step` once per aligned batch, `evaluate` at the end:

* active party → party: `config` (round), `global-prior` (`π^g` and the labelled-class mask), `step` (entity ids
  of the next aligned batch; `train.local` carries the round's first one), `gradients` (ids, `∂L/∂z^k` and
  `∂L/∂s^k` of the previous batch);
* party → active party: `metrics` (party index, counts, lower-level statistics), `prototypes` (`p^k` and the
  local prior `π^k`), `embeddings` (`z^k` and prototype logits `s^k` of the requested entities), `layout` (aligned
  and test entity ids; round 1 only).

Gradients of a batch ride on the next message to the same party, so each aligned batch costs one round trip:
embeddings up, gradients down. A SuperNode runs every message in a fresh process; the party keeps its model in
`context.state` and recomputes the batch's forward pass when the gradients arrive. Raw features, unaligned samples
and OT plans never leave a party.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid

from hf_ext.core.federated import save_result, state_dict_to_arrays

from .data import LabelData, build_vertical_split
from .metrics import classification_metrics
from .modeling_proto_evfl import ProtoEvflForClassification
from .prototypes import global_prior, uniform_prior, validate_prior
from .task import ProtoEvflRunConfig, array_record, read_array, seeded


class ActiveParty:
    """The label holder: the top model and its optimiser, the aligned labels, the global prior, and the gradients
    waiting to be sent to each party.

    Args:
        settings ([`ProtoEvflRunConfig`]): the run.
        labels ([`LabelData`]): the aligned and test entity ids with their labels (nothing else of the data).
    """

    def __init__(self, settings: ProtoEvflRunConfig, labels: LabelData):
        self.settings, self.labels, self.args = settings, labels, settings.training
        config = settings.top_config()
        self.top = seeded(self.args.seed * 1009 + 997, lambda: ProtoEvflForClassification(config))
        self.optimizer = torch.optim.Adam(self.top.parameters(), lr=self.args.top_learning_rate)
        self.label_of = dict(zip(labels.aligned_ids.tolist(), labels.aligned_labels.tolist()))
        self.labelled = np.bincount(labels.aligned_labels, minlength=settings.num_classes) > 0
        self.global_prior = uniform_prior(settings.num_classes)
        self.party_evidence: np.ndarray | None = None  # (K, C): n_k π^k, from the last local replies
        self.party_of_node: dict[int, int] = {}
        self.pending: dict[int, ArrayRecord] = {}
        self.leak_hits, self.leak_total = 0, 0  # the label-leakage attack's guesses (see `_measure_leak`)

    @property
    def nodes(self) -> list[int]:
        """Node ids in party order."""
        return sorted(self.party_of_node, key=self.party_of_node.get)

    def request(self, node: int, **records) -> RecordDict:
        """A message's content for `node`, with the gradients still owed to it."""
        content = RecordDict(records)
        if node in self.pending:
            content["gradients"] = self.pending.pop(node)
        return content

    def local_request(self, node: int, rnd: int, first_batch: np.ndarray) -> RecordDict:
        """`train.local`: the global prior, plus the ids of the round's first aligned batch (to embed after the
        local steps: one message fewer per round, which matters when each message starts a process)."""
        prior = array_record(prior=self.global_prior, labelled=self.labelled)
        return self.request(node, config=ConfigRecord({"round": rnd}), step=array_record(ids=first_batch),
                            **{"global-prior": prior})  # fmt: skip

    def identify(self, replies: dict[int, RecordDict]) -> None:
        """Maps nodes to party indices from the round-1 replies and checks the parties' entity ids and widths."""
        k_total, widths = self.settings.data.num_parties, self.settings.party_widths()
        for node, content in replies.items():
            k = int(content["metrics"]["party-index"])
            if not 0 <= k < k_total or k in self.party_of_node.values():
                raise ValueError(f"node {node} claims party index {k}: expected each of 0..{k_total - 1} once")
            self.party_of_node[node] = k
            if int(content["metrics"]["width"]) != widths[k]:
                raise ValueError(f"party {k} reports a feature block of width {int(content['metrics']['width'])}; "
                                 f"the federation agreed on {widths[k]}")  # fmt: skip
            for name, mine in (("aligned-ids", self.labels.aligned_ids), ("test-ids", self.labels.test_ids)):
                theirs = read_array(content, "layout", name, (-1,), f"party {k}")
                missing, extra = np.setdiff1d(mine, theirs), np.setdiff1d(theirs, mine)
                if missing.size or extra.size:
                    raise ValueError(
                        f"party {k}'s {name} disagree with the active party's: {missing.size} of the active party's "
                        f"{mine.size} ids are missing there (e.g. {missing[:3].tolist()}) and {extra.size} are extra "
                        f"(e.g. {extra[:3].tolist()})"
                    )
        if len(self.party_of_node) != k_total:
            raise ValueError(f"{len(self.party_of_node)} parties answered; the run expects {k_total}")

    def _by_party(self, replies: dict[int, RecordDict], record: str, key: str, shape: tuple) -> np.ndarray:
        """One array per party from the replies, stacked in party order (checked shapes, finite)."""
        out = []
        for node in self.nodes:
            k = self.party_of_node[node]
            if int(replies[node]["metrics"]["party-index"]) != k:
                raise ValueError(f"node {node} answered as party {replies[node]['metrics']['party-index']}, was {k}")
            out.append(read_array(replies[node], record, key, shape, f"party {k}"))
        return np.stack(out)

    def receive_local(self, replies: dict[int, RecordDict]) -> dict[str, float]:
        """Global prior from the local priors (weighted by unaligned counts); unseen prototypes from `p^k_u`."""
        c, d = self.settings.num_classes, self.settings.embed_dim
        priors = self._by_party(replies, "prototypes", "prior", (c,))
        for k, p in enumerate(priors):
            validate_prior(p, c, what=f"local prior sent by party {k}")
        counts = [int(replies[n]["metrics"]["num-examples"]) for n in self.nodes]
        self.global_prior = global_prior(priors, counts)
        self.party_evidence = np.asarray(counts, dtype=np.float64)[:, None] * priors
        self.set_unseen(self._by_party(replies, "prototypes", "prototypes", (c, d)))
        stats = [replies[n]["metrics"] for n in self.nodes]
        return {"selected-fraction": float(np.mean([m["selected-fraction"] for m in stats])),
                "ot-fallbacks": float(sum(m["ot-fallbacks"] for m in stats)),
                "unaligned-loss": float(np.mean([m["unaligned-loss"] for m in stats])),
                "unseen-share": float(max(m.get("unseen-share", 0.0) for m in stats))}  # fmt: skip

    def set_unseen(self, prototypes: np.ndarray) -> None:
        if self.top.config.classifier == "prototype":
            evidence = None
            if self.args.unseen_weighting == "evidence" and self.party_evidence is not None:
                evidence = torch.from_numpy(self.party_evidence)
            self.top.set_unseen_prototypes(torch.from_numpy(prototypes), evidence)

    def batches(self, rnd: int) -> list[np.ndarray]:
        ids = np.random.default_rng([self.args.seed, 7, rnd]).permutation(self.labels.aligned_ids)
        size = self.args.aligned_batch_size
        return [ids[i : i + size] for i in range(0, len(ids), size)]

    def step(self, ids: np.ndarray, replies: dict[int, RecordDict]) -> float:
        """One upper-level step on an aligned batch: top forward/backward, Adam, global-prototype EMA; the
        gradients for each party wait in `self.pending` until its next message."""
        shape_z, shape_s = (len(ids), self.settings.embed_dim), (len(ids), self.settings.num_classes)
        z = torch.from_numpy(self._by_party(replies, "embeddings", "embeddings", shape_z)).transpose(0, 1)
        s = torch.from_numpy(self._by_party(replies, "embeddings", "prototype-logits", shape_s)).transpose(0, 1)
        z, s = z.contiguous().requires_grad_(), s.contiguous().requires_grad_()
        y = torch.tensor([self.label_of[int(i)] for i in ids])
        self.top.train()
        out = self.top(party_embeddings=z, labels=y, party_logits=s)
        self.optimizer.zero_grad()
        out.loss.backward()
        self.optimizer.step()
        grad_s = s.grad if s.grad is not None else torch.zeros_like(s)
        self._measure_leak(grad_s, y)
        for node in self.nodes:
            k = self.party_of_node[node]
            self.pending[node] = array_record(ids=ids, embeddings=z.grad[:, k].numpy(),
                                              prototype_logits=grad_s[:, k].numpy())  # fmt: skip
        return float(out.loss.detach())

    @torch.no_grad()
    def _measure_leak(self, grad_s: torch.Tensor, labels: torch.Tensor) -> None:
        """The label-leakage attack, measured where the gradients are made: a passive party (k ≥ 1) guesses each
        aligned label as `argmin_c ∂L/∂s^k_c`. For `L ⊃ μ CE(s^k, y)` that gradient is `μ (softmax(s^k) − e_y)`,
        negative only at `y`, so the guess is exact whenever `μ > 0`."""
        if grad_s.shape[1] < 2:
            return
        guesses = grad_s[:, 1:].argmin(-1)  # (batch, K − 1)
        self.leak_hits += int((guesses == labels[:, None]).sum())
        self.leak_total += int(guesses.numel())

    @torch.no_grad()
    def evaluate(self, replies: dict[int, RecordDict]) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """Test predictions from the parties' test embeddings (after refreshing the unseen-class prototypes)."""
        c, d, n = self.settings.num_classes, self.settings.embed_dim, len(self.labels.test_ids)
        self.set_unseen(self._by_party(replies, "prototypes", "prototypes", (c, d)))
        z = torch.from_numpy(self._by_party(replies, "embeddings", "embeddings", (n, d))).transpose(0, 1).contiguous()
        self.top.eval()
        out = self.top(party_embeddings=z)
        pred = out.logits.argmax(-1).numpy()
        metrics = classification_metrics(self.labels.test_labels, pred, c, self.labels.unseen_class)
        if self.leak_total:
            metrics["label_leak_accuracy"] = self.leak_hits / self.leak_total
        predictions = {"test-ids": self.labels.test_ids, "labels": self.labels.test_labels, "predictions": pred,
                       "fused": out.fused.numpy(), "gate": out.gate.numpy(),
                       "global-prototypes": self.top.head.prototypes.numpy()}  # fmt: skip
        return metrics, predictions


def _exchange(grid: Grid, contents: dict[int, RecordDict], message_type: str, group: str, timeout: float):
    """Sends one message per node and returns the replies' contents by node; a failed or missing reply raises."""
    messages = [Message(content=c, dst_node_id=n, message_type=message_type, group_id=group)
                for n, c in contents.items()]  # fmt: skip
    replies = {}
    for reply in grid.send_and_receive(messages, timeout=timeout):
        node = reply.metadata.src_node_id
        if reply.has_error():
            raise RuntimeError(f"the party on node {node} failed on {message_type!r}: {reply.error.reason}")
        replies[node] = reply.content
    missing = sorted(set(contents) - set(replies))
    if missing:
        raise TimeoutError(f"no reply to {message_type!r} from nodes {missing} within {timeout} s")
    return replies


def _wait_for_nodes(grid: Grid, count: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(nodes := sorted(grid.get_node_ids())) < count:  # SuperNodes may still be registering
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(nodes)} of {count} parties connected within {timeout} s")
        time.sleep(0.5)
    if len(nodes) > count:
        raise ValueError(f"{len(nodes)} SuperNodes are connected; the run expects exactly {count} parties")
    return nodes


def run_server(grid: Grid, context: Context) -> None:
    """The `ServerApp`'s main: the bi-level schedule, then the test evaluation; ends with `save_result`."""
    start = time.perf_counter()
    settings = ProtoEvflRunConfig.from_run_config(context.run_config)
    # The simulation builds the whole split in every process; the active party takes only the labels from it.
    active = ActiveParty(settings, build_vertical_split(settings.data).labels())
    timeout = settings.message_timeout
    nodes = _wait_for_nodes(grid, settings.data.num_parties, timeout)
    history: dict[str, list[float]] = {"loss": [], "selected-fraction": [], "ot-fallbacks": [], "unaligned-loss": [],
                                       "unseen-share": []}  # fmt: skip
    for rnd in range(1, settings.training.rounds + 1):
        batches = active.batches(rnd)
        contents = {n: active.local_request(n, rnd, batches[0]) for n in nodes}
        replies = _exchange(grid, contents, "train.local", f"{rnd}", timeout)
        if rnd == 1:
            active.identify(replies)
        for key, value in active.receive_local(replies).items():
            history[key].append(value)
        losses = [active.step(batches[0], replies)]
        for b, ids in enumerate(batches[1:], start=1):
            contents = {n: active.request(n, step=array_record(ids=ids)) for n in nodes}
            losses.append(active.step(ids, _exchange(grid, contents, "train.step", f"{rnd}.{b}", timeout)))
        history["loss"].append(float(np.mean(losses)))
    contents = {n: active.request(n, config=ConfigRecord({"split": "test"})) for n in nodes}
    metrics, predictions = active.evaluate(_exchange(grid, contents, "evaluate", "test", timeout))
    metrics["seconds"] = time.perf_counter() - start
    save_result(context, {
        "metrics": MetricRecord(metrics),
        "top-model": state_dict_to_arrays(active.top.state_dict()),
        "predictions": array_record(**{k.replace("-", "_"): v for k, v in predictions.items()}),
        "history": MetricRecord(history),
    })  # fmt: skip


__all__ = ["ActiveParty", "run_server"]
