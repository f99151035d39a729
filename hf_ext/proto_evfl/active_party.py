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

**One dishonest party.** The active party keys every reply by the node id Flower reports (the transport's
identity), binds it to a party index once, and checks what it can without a party's features or model: shapes,
finite values, unit-norm embeddings and bounded logits, local priors that are distributions, unit prototypes, and
([`EmbeddingScreen`]) embeddings that are zero or not unit, one row repeated for a whole batch, rows replayed from
an earlier message (a party's embeddings change after every gradient it is sent), or rows that do not match the same
entities' previous embeddings (permuted). A refused `train.step` reply skips its batch (vertical FL needs every
block of a sample); a refused `train.local` reply keeps that party's last accepted prior and prototypes. Each
refusal is logged and kept in the run's `rejected` record as `"<round>:node <id>"` → reason (and in
`status.rejections`); the run goes on.

**What cannot be detected.** Embeddings computed honestly from wrong or poisoned features; a permutation among
entities whose embeddings are alike (same class), and any permutation on an entity's first visit (round 1, the test
set: no history to compare with); a replay while the party was sent no gradient in between; prototype logits that are
consistent in range but not with the party's prototypes; local priors or unaligned counts that are plausible but
false (they weight the global prior; counts are capped at 1e9); a party that answers `evaluate` with plausible but
wrong test embeddings (a refused evaluate reply aborts the run cleanly: there is no prediction without every block).
"""

from __future__ import annotations

import logging
import math
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

logger = logging.getLogger(__name__)
# A party's unaligned pool size is a weight of the global prior: bounded, so one reply cannot swamp it.
MAX_EXAMPLES = 10**9


class PartyError(ValueError):
    """A reply of one party is unusable; `node` is the sender as the transport names it."""

    def __init__(self, node: int, reason: str):
        super().__init__(reason)
        self.node = node


# A unit vector's norm within this tolerance (float32 normalisation is exact to ~1e-7).
UNIT_TOLERANCE = 1e-3
# Row-permutation screen: on entities whose previous embedding from the same party is known, the mean cosine between
# each entity's new and previous embedding (`a`) must exceed the mean cosine between different entities' new and
# previous embeddings (`b`) by this share of the headroom `1 - b`. Honest drift between two visits of an entity (one
# round of training apart) keeps `a` near 1; a permutation brings `a` down to about `b`. Measured on honest quick-
# scale runs (digits, 12 rounds; proto_evfl, vanilla_vfl and no-OT; long-tail and zero-shot): the share is 0.59 at its
# lowest (round 2) and 0.92-0.96 at the median; a permuted batch gives about 0.
PERMUTATION_MARGIN = 0.3
PERMUTATION_MIN_ROWS = 8


class EmbeddingScreen:
    """What the active party can check about a party's embeddings without its features or model.

    * **Degenerate**: every row must be a unit vector (the party model L2-normalises; a zero row is not one), and a
      batch of two or more rows may not be one row repeated.
    * **Stale** (replayed from an earlier message): a party's embeddings change after every gradient step it is sent,
      so a row that this party already sent before it was last sent gradients is a replay (exact float32 bytes).
    * **Row-permuted**: an entity's embedding moves little between two visits (one round apart); a batch whose rows
      are far less similar to the same entities' previous embeddings than to other entities' (see
      `PERMUTATION_MARGIN`) is refused.

    What it cannot detect (documented in the module docstring of `active_party.py`): a permutation among entities
    whose embeddings are alike (same class), a party's first visit of an entity (no history: round 1 and the test
    set), replays of rows while no gradients were sent in between, and any embedding that is fresh, unit-norm and
    plausible but computed from wrong features (the active party never sees features).
    """

    def __init__(self) -> None:
        self.grad_count: dict[int, int] = {}  # node -> gradient records delivered to it so far
        self.row_seen: dict[int, dict[bytes, int]] = {}  # node -> row bytes -> grad_count when it arrived
        self.previous: dict[int, dict[int, np.ndarray]] = {}  # node -> entity id -> last accepted embedding
        self.gaps: list[float] = []  # (a - b) / (1 - b) of every screened batch (diagnostics)

    def gradients_sent(self, node: int) -> None:
        self.grad_count[node] = self.grad_count.get(node, 0) + 1

    def problem(self, node: int, ids: np.ndarray | None, z: np.ndarray) -> str | None:
        """Why these embeddings of `node` are refused, or `None`."""
        z = np.asarray(z, dtype=np.float32)
        if not z.size:
            return None
        norms = np.linalg.norm(z.astype(np.float64), axis=-1)
        if np.abs(norms - 1).max() > UNIT_TOLERANCE:
            return f"has rows that are not unit vectors (norms from {norms.min():.3g} to {norms.max():.3g}; zero?)"
        if len(z) >= 2 and np.abs(z - z[0]).max() == 0:
            return "is one row repeated for every entity (degenerate)"
        now, seen = self.grad_count.get(node, 0), self.row_seen.get(node, {})
        stale = sum(1 for row in z if seen.get(row.tobytes(), now) < now)
        if stale:
            return (f"repeats {stale} of {len(z)} rows it sent before it was last sent gradients (stale or replayed "
                    "from an earlier message)")  # fmt: skip
        if ids is not None:
            previous = self.previous.get(node, {})
            rows = [r for r, i in enumerate(ids) if int(i) in previous]
            if len(rows) >= PERMUTATION_MIN_ROWS:
                new = z[rows].astype(np.float64)
                old = np.stack([previous[int(ids[r])] for r in rows]).astype(np.float64)
                cos = new @ old.T
                a = float(np.mean(np.diag(cos)))
                b = float((cos.sum() - np.trace(cos)) / (cos.size - len(rows)))
                gap = (a - b) / max(1.0 - b, 1e-9)
                self.gaps.append(gap)
                if gap < PERMUTATION_MARGIN:
                    return (f"does not match the same entities' previous embeddings (mean cosine {a:.3f} to their own "
                            f"vs {b:.3f} to others': rows permuted or not these entities)")  # fmt: skip
        return None

    def accept(self, node: int, ids: np.ndarray | None, z: np.ndarray) -> None:
        """Remembers accepted embeddings of `node` (for the stale and permutation screens)."""
        z = np.asarray(z, dtype=np.float32)
        now = self.grad_count.get(node, 0)
        seen = self.row_seen.setdefault(node, {})
        for row in z:
            seen.setdefault(row.tobytes(), now)
        if ids is not None:
            previous = self.previous.setdefault(node, {})
            for i, row in zip(ids, z):
                previous[int(i)] = row.copy()


class FederationAborted(RuntimeError):
    """The run cannot go on (a feature block is missing for good): the ServerApp logs the reason, saves it as the
    run's `status` record and returns; it does not crash."""


def _metric(content: RecordDict, name: str, sender: str, low: float, high: float) -> float:
    """A finite number in `[low, high]` from the reply's `metrics` record (a `MetricRecord`)."""
    record = content["metrics"] if "metrics" in content else None
    if not isinstance(record, MetricRecord):
        raise ValueError(f"{sender}: reply has no 'metrics' MetricRecord")
    value = record[name] if name in record else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{sender}: metric {name!r} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{sender}: metric {name!r} = {value} is outside [{low}, {high}]")
    return float(value)


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
        self.rejections: list[str] = []  # every rejected reply, with its reason
        self.rejected: dict[str, str] = {}  # the round's record: "<round>:node <id>" -> reason (first per round)
        self.round = "0"  # the round label of the record: "1", "2", ... and "evaluate"
        self.last_local: dict[int, tuple] = {}  # node -> last accepted (prior, count, prototypes, stats)
        self.screen = EmbeddingScreen()

    @property
    def nodes(self) -> list[int]:
        """Node ids in party order."""
        return sorted(self.party_of_node, key=self.party_of_node.get)

    def request(self, node: int, **records) -> RecordDict:
        """A message's content for `node`, with the gradients still owed to it."""
        content = RecordDict(records)
        if node in self.pending:
            content["gradients"] = self.pending.pop(node)
            self.screen.gradients_sent(node)
        return content

    def local_request(self, node: int, rnd: int, first_batch: np.ndarray) -> RecordDict:
        """`train.local`: the global prior, plus the ids of the round's first aligned batch (to embed after the
        local steps: one message fewer per round, which matters when each message starts a process)."""
        prior = array_record(prior=self.global_prior, labelled=self.labelled)
        return self.request(node, config=ConfigRecord({"round": rnd}), step=array_record(ids=first_batch),
                            **{"global-prior": prior})  # fmt: skip

    def identify(self, replies: dict[int, RecordDict]) -> None:
        """Binds each node id to the party index it claims in round 1 (checked: in range, width and entity ids as
        agreed). From then on every reply is keyed by the node id Flower reports for it (the transport's identity),
        never by a claim in the payload; a later claim that differs makes that reply invalid. A node whose
        enrolment fails is rejected alone (logged); without all `K` feature blocks the run is aborted cleanly."""
        k_total, widths = self.settings.data.num_parties, self.settings.party_widths()
        claims: dict[int, list[int]] = {}
        for node, content in sorted(replies.items()):
            try:
                k = int(_metric(content, "party-index", f"node {node}", 0, k_total - 1))
                width = int(_metric(content, "width", f"node {node}", 1, 10**7))
                if width != widths[k]:
                    raise ValueError(f"party {k} reports a feature block of width {width}; the federation agreed "
                                     f"on {widths[k]}")  # fmt: skip
                for name, mine in (("aligned-ids", self.labels.aligned_ids), ("test-ids", self.labels.test_ids)):
                    theirs = read_array(content, "layout", name, (-1,), f"party {k}")
                    missing, extra = np.setdiff1d(mine, theirs), np.setdiff1d(theirs, mine)
                    if missing.size or extra.size:
                        raise ValueError(
                            f"party {k}'s {name} disagree with the active party's: {missing.size} of the active "
                            f"party's {mine.size} ids are missing there (e.g. {missing[:3].tolist()}) and "
                            f"{extra.size} are extra (e.g. {extra[:3].tolist()})"
                        )
            except (ValueError, TypeError, KeyError) as err:
                self.reject(node, "train.local", str(err))
                continue
            claims.setdefault(k, []).append(node)
        for k, nodes in claims.items():
            if len(nodes) > 1:  # two transports claim one feature block: neither can be trusted with it
                for node in nodes:
                    self.reject(node, "train.local", f"nodes {nodes} all claim party index {k}")
            else:
                self.party_of_node[nodes[0]] = k
        if len(self.party_of_node) != k_total:
            enrolled = sorted(self.party_of_node.values())
            raise FederationAborted(f"only parties {enrolled} of 0..{k_total - 1} enrolled; rejected: "
                                    f"{self.rejections[-3:]}")  # fmt: skip

    def reject(self, node: int, message_type: str, reason: str) -> None:
        """Drops one reply, with its reason logged and kept (`self.rejections`)."""
        logger.warning("rejected the reply of node %s to %r: %s", node, message_type, reason)
        self.rejections.append(f"node {node} ({message_type}): {reason}")
        self.rejected.setdefault(f"{self.round}:node {node}", f"({message_type}) {reason}")

    def _check_party(self, node: int, content: RecordDict) -> int:
        """The party index bound to `node`; a reply whose own claim differs is invalid."""
        k = self.party_of_node[node]
        claimed = _metric(content, "party-index", f"party {k} (node {node})", -1e18, 1e18)
        if int(claimed) != k:
            raise ValueError(f"node {node} is party {k} but its reply claims party {claimed:g}")
        return k

    def _by_party(
        self, replies: dict[int, RecordDict], record: str, key: str, shape: tuple, ids: np.ndarray | None = None
    ) -> np.ndarray:
        """One array per party from the replies, stacked in party order (checked shapes, finite, and the bounds of
        normalised embeddings `‖z‖ = 1` and cosine logits `|s| ≤ 1/τ_p`; embeddings of entities `ids` are also
        screened for degenerate, stale and row-permuted blocks, see [`EmbeddingScreen`]). Raises [`PartyError`]
        naming the party and its node."""
        out = []
        for node in self.nodes:
            k = self.party_of_node[node]
            if node not in replies:
                raise PartyError(node, f"party {k} (node {node}) did not reply")
            try:
                k = self._check_party(node, replies[node])
                value = read_array(replies[node], record, key, shape, f"party {k}")
                if record == "embeddings":
                    bound = 1.0 if key == "embeddings" else 1.0 / self.settings.temperature
                    v = value.astype(np.float64)
                    size = np.sqrt((v * v).sum(-1)) if key == "embeddings" else np.abs(v)
                    if size.size and float(size.max()) > bound * (1 + 1e-3):
                        raise ValueError(f"party {k}: {record}/{key} exceeds its bound {bound:g} (got "
                                         f"{float(size.max()):.3g}); embeddings are unit vectors")  # fmt: skip
                if key == "embeddings":
                    problem = self.screen.problem(node, ids, value)
                    if problem:
                        raise ValueError(f"party {k}: {record}/{key} {problem}")
            except (ValueError, TypeError, KeyError) as err:
                raise PartyError(node, str(err)) from err
            out.append(value)
        return np.stack(out)

    def valid_replies(self, replies: dict[int, RecordDict], message_type: str, checks) -> dict[int, RecordDict]:
        """The replies for which `checks(node, content)` passes; each failing one is rejected alone."""
        ok = {}
        for node, content in replies.items():
            if node not in self.party_of_node:
                self.reject(node, message_type, "not an enrolled party")
                continue
            try:
                checks(node, content)
            except (ValueError, TypeError, KeyError) as err:
                self.reject(node, message_type, str(err))
                continue
            ok[node] = content
        return ok

    def receive_local(self, replies: dict[int, RecordDict]) -> dict[str, float]:
        """Global prior from the local priors (weighted by unaligned counts); unseen prototypes from `p^k_u`.

        A party whose reply is invalid keeps its last accepted prior, count and prototypes (none yet: it is left
        out of the global prior this round)."""
        c, d = self.settings.num_classes, self.settings.embed_dim

        def checks(node, content):
            k = self._check_party(node, content)
            sender = f"party {k}"
            prior = validate_prior(read_array(content, "prototypes", "prior", (c,), sender), c,
                                   what=f"local prior sent by party {k}")  # fmt: skip
            protos = read_array(content, "prototypes", "prototypes", (c, d), sender)
            if np.abs(np.linalg.norm(protos, axis=-1) - 1).max() > 1e-3:
                raise ValueError(f"{sender}: prototypes must be unit vectors")
            count = _metric(content, "num-examples", sender, 1, MAX_EXAMPLES)
            stats = {name: _metric(content, name, sender, lo, hi) for name, lo, hi in (
                ("selected-fraction", 0, 1), ("ot-fallbacks", 0, 1e6), ("unaligned-loss", 0, 1e6),
                ("unseen-share", 0, 1))}  # fmt: skip
            self.last_local[node] = (prior, count, protos, stats)

        self.valid_replies(replies, "train.local", checks)
        known = [n for n in self.nodes if n in self.last_local]
        if not known:
            return {"selected-fraction": 0.0, "ot-fallbacks": 0.0, "unaligned-loss": 0.0, "unseen-share": 0.0}
        priors = np.stack([self.last_local[n][0] for n in known])
        counts = np.array([self.last_local[n][1] for n in known])
        self.global_prior = global_prior(priors, counts)
        evidence = np.zeros((len(self.nodes), c))
        for n in known:
            evidence[self.party_of_node[n]] = self.last_local[n][1] * self.last_local[n][0]
        self.party_evidence = evidence
        if len(known) == len(self.nodes):
            self.set_unseen(np.stack([self.last_local[n][2] for n in self.nodes]))
        stats = [self.last_local[n][3] for n in known]
        return {"selected-fraction": float(np.mean([m["selected-fraction"] for m in stats])),
                "ot-fallbacks": float(sum(m["ot-fallbacks"] for m in stats)),
                "unaligned-loss": float(np.mean([m["unaligned-loss"] for m in stats])),
                "unseen-share": float(max(m["unseen-share"] for m in stats))}  # fmt: skip

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

    def step(self, ids: np.ndarray, replies: dict[int, RecordDict], message_type: str = "train.step") -> float | None:
        """One upper-level step on an aligned batch: top forward/backward, Adam, global-prototype EMA; the
        gradients for each party wait in `self.pending` until its next message. Returns the loss, or `None` when a
        party's embeddings are missing or invalid: that reply is rejected (logged) and the batch is skipped (split
        learning needs every block of a sample)."""
        shape_z, shape_s = (len(ids), self.settings.embed_dim), (len(ids), self.settings.num_classes)
        try:
            s = torch.from_numpy(self._by_party(replies, "embeddings", "prototype-logits", shape_s)).transpose(0, 1)
            z = torch.from_numpy(self._by_party(replies, "embeddings", "embeddings", shape_z, ids)).transpose(0, 1)
        except PartyError as err:
            self.reject(err.node, message_type, f"{err}; batch skipped")
            return None
        for node in self.nodes:
            self.screen.accept(node, ids, z[:, self.party_of_node[node]].numpy())
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
        test_ids = self.labels.test_ids
        z = torch.from_numpy(self._by_party(replies, "embeddings", "embeddings", (n, d), test_ids)).transpose(0, 1)
        z = z.contiguous()
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


def _exchange(active: ActiveParty, grid: Grid, contents: dict[int, RecordDict], message_type: str, group: str,
              timeout: float) -> dict[int, RecordDict]:  # fmt: skip
    """Sends one message per node and returns the replies' contents keyed by the node id Flower reports as their
    source. An error reply, an empty one, one from a node that was not asked, or a missing one is rejected alone,
    with its reason logged; the others are returned."""
    messages = [Message(content=c, dst_node_id=n, message_type=message_type, group_id=group)
                for n, c in contents.items()]  # fmt: skip
    replies, seen = {}, set()
    for reply in grid.send_and_receive(messages, timeout=timeout):
        node = reply.metadata.src_node_id
        if node not in contents or node in seen:
            active.reject(node, message_type, "unexpected reply (not asked, or a second one)")
            continue
        seen.add(node)
        if reply.has_error():
            active.reject(node, message_type, f"error reply: {reply.error.reason}")
        elif not reply.has_content():
            active.reject(node, message_type, "reply has no content")
        else:
            replies[node] = reply.content
    for node in sorted(set(contents) - seen):
        active.reject(node, message_type, f"no reply within {timeout} s")
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
    """The `ServerApp`'s main: the bi-level schedule, then the test evaluation; ends with `save_result` (metrics,
    top model, predictions, history, `status`). Never raises on what parties send: a bad reply is rejected alone
    (logged) and a run that cannot go on ends with `status` = aborted and the reason."""
    start = time.perf_counter()
    settings = ProtoEvflRunConfig.from_run_config(context.run_config)
    active = ActiveParty(settings, load_labels(settings))
    timeout = settings.message_timeout
    history: dict[str, list[float]] = {"loss": [], "selected-fraction": [], "ot-fallbacks": [], "unaligned-loss": [],
                                       "unseen-share": [], "skipped-batches": []}  # fmt: skip
    try:
        nodes = _wait_for_nodes(grid, settings.data.num_parties, timeout)
        for rnd in range(1, settings.training.rounds + 1):
            active.round = str(rnd)
            batches = active.batches(rnd)
            ask = nodes if rnd == 1 else active.nodes
            contents = {n: active.local_request(n, rnd, batches[0]) for n in ask}
            replies = _exchange(active, grid, contents, "train.local", f"{rnd}", timeout)
            if rnd == 1:
                active.identify(replies)
            for key, value in active.receive_local(replies).items():
                history[key].append(value)
            losses = [active.step(batches[0], replies, "train.local")]
            for b, ids in enumerate(batches[1:], start=1):
                contents = {n: active.request(n, step=array_record(ids=ids)) for n in active.nodes}
                losses.append(active.step(ids, _exchange(active, grid, contents, "train.step", f"{rnd}.{b}",
                                                         timeout)))  # fmt: skip
            done = [v for v in losses if v is not None]
            history["loss"].append(float(np.mean(done)) if done else float("nan"))
            history["skipped-batches"].append(float(len(losses) - len(done)))
        active.round = "evaluate"
        contents = {n: active.request(n, config=ConfigRecord({"split": "test"})) for n in active.nodes}
        replies = _exchange(active, grid, contents, "evaluate", "test", timeout)
        try:
            metrics, predictions = active.evaluate(replies)
        except (ValueError, TypeError, KeyError) as err:
            if isinstance(err, PartyError):
                active.reject(err.node, "evaluate", str(err))
            raise FederationAborted(f"cannot evaluate: {err}") from err
    except (FederationAborted, TimeoutError, ValueError) as err:
        logger.error("Proto-EVFL run aborted: %s", err)
        save_result(context, {"status": ConfigRecord({"status": "aborted", "reason": str(err),
                                                      "rejections": active.rejections[-20:] or [""]}),
                              "rejected": ConfigRecord(active.rejected)})  # fmt: skip
        return
    metrics["seconds"] = time.perf_counter() - start
    metrics["rejected_replies"] = float(len(active.rejections))
    save_result(context, {
        "metrics": MetricRecord(metrics),
        "top-model": state_dict_to_arrays(active.top.state_dict()),
        "predictions": array_record(**{k.replace("-", "_"): v for k, v in predictions.items()}),
        "history": MetricRecord(history),
        "status": ConfigRecord({"status": "ok", "reason": "", "rejections": active.rejections[-20:] or [""]}),
        "rejected": ConfigRecord(active.rejected),
    })  # fmt: skip


def load_labels(settings: ProtoEvflRunConfig) -> LabelData:
    """The active party's labels: from `settings.labels_path` (a saved `datasets.Dataset`, see `party_data.py`)
    when set, else from the simulated split (of which only the label part is taken)."""
    if settings.labels_path:
        from .party_data import load_label_dataset

        return load_label_dataset(settings.labels_path, settings.num_classes, settings.data.unseen_class)
    return build_vertical_split(settings.data).labels()


__all__ = ["ActiveParty", "EmbeddingScreen", "FederationAborted", "PartyError", "load_labels", "run_server"]
