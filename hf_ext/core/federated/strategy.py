"""The one base strategy of the federated methods: FedAvg with the reply guard as hooks (part of
[`hf_ext.core.federated`]).

A method subclasses [`GuardedStrategy`] and overrides only what differs; every round goes through the same steps:

1. **`configure_train`** keeps the global arrays it sends as the round's **reference** (`self.reference`, numpy by
   name: the server's *own* model, never a client's reply) and sends every sampled node a fresh **round nonce** in
   the instruction's config (`round-nonce`), bound to that node and that round.
2. **`aggregate_train`**, for every reply:
   * an error reply (a crashed or timed-out client) is *failed*, not rejected: `record.failed[node]`;
   * a second reply from one node rejects both; a reply whose `guard` record does not echo the nonce sent to *that*
     node for *this* round is rejected as stale or replayed (`replay_protection=True`, the default; a client
     answers with [`guarded_reply`]);
   * **`decode_reply(msg, server_round) -> Update`** (hook) decodes and checks the reply against `self.reference`
     ([`reply_arrays`]: keys, shapes, dtypes, finite, |x| < `max_abs`; [`reply_metric`]: the weight) and raises
     `ValueError` to reject it;
   * **`screen(updates, server_round) -> {node: reason}`** (hook) rejects updates that are outliers *relative to the
     server's reference and to the round's other updates* ([`robust_screen`]);
   * **`aggregate_updates(updates, server_round) -> (ArrayRecord | None, {node: reason})`** (hook) aggregates what
     is left (default: FedAvg weighted by `num-examples`) and may reject more;
   * **`round_metrics(updates, server_round) -> MetricRecord`** (hook).
3. The outcome is kept per round in `self.records[server_round]` ([`RoundRecord`]: nodes sent to, accepted,
   rejected with reasons, failed, whether the global model changed); [`GuardedStrategy.result_records`] turns it
   into records a `ServerApp` saves with [`save_result`]. Senders are always the **transport's node ids** (the
   SuperLink checks that a reply comes from the node the instruction went to), never a name the payload claims; a
   claimed `partition-id` is bound to the first node that claims it ([`GuardedStrategy.claimed_partition`]).

A round with no accepted update returns `None`: the global model stays as it was and the round does not count as
aggregated (`ServerApp`s call [`require_rounds`] with `len(strategy.aggregated)`).

**What the guard detects**: malformed replies (undecodable bytes, wrong record types, missing / extra keys, shapes,
dtypes), NaN / Inf, |x| ≥ `max_abs`, non-finite or out-of-range metrics, duplicate replies, a reply that claims
another node's partition, a replayed reply from an earlier round (or one carrying another node's nonce), and an
update whose distance to the server's reference exceeds `peer_ratio` × the round's median distance (with at least
`min_peers` updates) or `reference_ratio` × the reference's own norm.

**What it cannot detect** (by design of a plaintext FedAvg server): a dishonest client that stays *inside* the
bounds — within `peer_ratio` × the median distance — still moves an N-client mean by up to `peer_ratio × median / N`
per round; a client that replays its *own* earlier update under the current nonce (indistinguishable from a client
that did not learn); a coalition of at least half of a round's clients (the median is then theirs); with fewer than
`min_peers` updates only the reference-relative bound applies; a client that lies about `num-examples` within its
range (methods that need it trustworthy weight uniformly); anything inside encrypted payloads, which a method must
check with its own protocol (e.g. a canary).
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy import FedAvg

from .guard import DEFAULT_MAX_ABS, reply_arrays, reply_content, reply_metric, sender
from .records import weighted_average

logger = logging.getLogger(__name__)

NONCE_KEY = "round-nonce"  # in the instruction's ConfigRecord (server → client) and in the reply's guard record
GUARD_RECORD = "guard"  # the reply's ConfigRecord that echoes the nonce
PEER_RATIO = 10.0  # an update farther from the reference than 10 × the round's median distance is an outlier
REFERENCE_RATIO = 100.0  # ... or farther than 100 × the reference's own norm
MIN_PEERS = 3  # the median of fewer updates can be the outlier's own


# --- client side ------------------------------------------------------------------------------------------------------


def instruction_nonce(message: Message) -> str:
    """The round nonce a [`GuardedStrategy`] put into an instruction's config (`""` when there is none)."""
    if not message.has_content():
        return ""
    for name in message.content.keys():
        record = message.content[name]
        if isinstance(record, ConfigRecord) and NONCE_KEY in record:
            return str(record[NONCE_KEY])
    return ""


def guarded_reply(message: Message, records: Mapping[str, Any]) -> Message:
    """A `ClientApp`'s reply to `message` carrying `records` and a `guard` record that echoes the instruction's round
    nonce, so the server can tell it from a replayed or stale reply.

    Args:
        message (`Message`): the instruction being answered.
        records (`Mapping[str, ArrayRecord | MetricRecord | ConfigRecord]`): the reply's records.
    """
    content = RecordDict(dict(records))
    content[GUARD_RECORD] = ConfigRecord({NONCE_KEY: instruction_nonce(message)})
    return Message(content, reply_to=message)


# --- server side ------------------------------------------------------------------------------------------------------


@dataclass
class Update:
    """One accepted reply: the sender's transport node id, its arrays (numpy, what screening and the default
    aggregation see), its weight, its checked metrics, and whatever else a method keeps (`payload`)."""

    node: int
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    weight: float = 1.0
    metrics: dict[str, float] = field(default_factory=dict)
    payload: Any = None


@dataclass
class RoundRecord:
    """What happened to one round's replies, by transport node id."""

    server_round: int
    sent: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    aggregated: bool = False


def _flat(arrays: Mapping[str, np.ndarray], keys: list[str]) -> np.ndarray:
    parts = [np.asarray(arrays[k], dtype=np.float64).reshape(-1) for k in keys]
    return np.concatenate(parts) if parts else np.zeros(0)


def robust_screen(
    updates: Mapping[int, Mapping[str, np.ndarray]],
    reference: Mapping[str, np.ndarray] | None,
    *,
    peer_ratio: float | None = PEER_RATIO,
    reference_ratio: float | None = REFERENCE_RATIO,
    min_peers: int = MIN_PEERS,
) -> dict[int, str]:
    """Outlier updates of one round, relative to the server's reference and to the other updates.

    The distance of update `i` is `d_i = ||u_i − ref||₂` over the floating-point arrays every update shares with the
    reference (without a reference: the distance to the coordinate-wise median of the updates). Update `i` is an
    outlier when `d_i > peer_ratio · median_j d_j` (only with at least `min_peers` updates, and a median > 0) or
    `d_i > reference_ratio · ||ref||₂` (only with a non-zero reference).

    Args:
        updates (`Mapping[int, Mapping[str, np.ndarray]]`): node id → arrays.
        reference (`Mapping[str, np.ndarray]`, *optional*): the server's own model this round.
        peer_ratio, reference_ratio (`float`, *optional*): the two bounds; `None` disables one.
        min_peers (`int`, defaults to 3): fewest updates for the median rule.

    Returns:
        `dict[int, str]`: node id → reason, for each outlier.
    """
    if not updates:
        return {}
    common = None
    for arrays in updates.values():
        names = {k for k, v in arrays.items() if np.asarray(v).dtype.kind == "f"}
        common = names if common is None else common & names
    if reference is not None:
        common &= {k for k, v in reference.items() if np.asarray(v).dtype.kind == "f"}
    keys = sorted(k for k in common if len({tuple(np.shape(a[k])) for a in updates.values()}) == 1)
    if reference is not None:
        keys = [k for k in keys if tuple(np.shape(reference[k])) == tuple(np.shape(next(iter(updates.values()))[k]))]
    if not keys:
        return {}
    flat = {node: _flat(arrays, keys) for node, arrays in updates.items()}
    if reference is not None:
        center = _flat(reference, keys)
    else:
        center = np.median(np.stack(list(flat.values())), axis=0)
    dist = {node: float(np.linalg.norm(v - center)) for node, v in flat.items()}
    ref_norm = float(np.linalg.norm(center)) if reference is not None else 0.0
    median = float(np.median(list(dist.values())))
    out = {}
    for node, d in dist.items():
        if peer_ratio is not None and len(dist) >= min_peers and median > 0 and d > peer_ratio * median:
            out[node] = (
                f"node {node}: update is an outlier: its distance to the server's model is {d:.3g}, more than "
                f"{peer_ratio:g} x the round's median distance {median:.3g}"
            )
        elif reference_ratio is not None and ref_norm > 0 and d > reference_ratio * ref_norm:
            out[node] = (
                f"node {node}: update is an outlier: its distance to the server's model is {d:.3g}, more than "
                f"{reference_ratio:g} x the model's own norm {ref_norm:.3g}"
            )
    return out


def _numpy(record: ArrayRecord | None) -> dict[str, np.ndarray] | None:
    if record is None:
        return None
    return {k: record[k].numpy() for k in record.keys()}


class GuardedStrategy(FedAvg):
    """FedAvg whose `aggregate_train` runs the reply guard of [`hf_ext.core.federated.strategy`] with hooks.

    Args:
        replay_protection (`bool`, defaults to `True`): send a round nonce per node and refuse replies that do not
            echo it (clients answer with [`guarded_reply`]).
        screen (`bool`, defaults to `True`): reject outliers with [`robust_screen`].
        peer_ratio, reference_ratio (`float`, *optional*), min_peers (`int`): [`robust_screen`]'s bounds.
        max_abs (`float`, *optional*, defaults to `1e6`): the absolute bound of [`reply_arrays`].
        num_partitions (`int`, *optional*): a claimed `partition-id` must lie in `[0, num_partitions)`.
        **kwargs: Flower's `FedAvg` arguments (`fraction_train`, `min_train_nodes`, ...).

    Attributes:
        records (`dict[int, RoundRecord]`): per round, who was sent to, accepted, rejected (why) and failed.
        reference (`dict[str, np.ndarray]`): the global arrays sent this round.
        partitions (`dict[int, int]`): node id → the partition bound to it.
    """

    def __init__(
        self,
        *,
        replay_protection: bool = True,
        screen: bool = True,
        peer_ratio: float | None = PEER_RATIO,
        reference_ratio: float | None = REFERENCE_RATIO,
        min_peers: int = MIN_PEERS,
        max_abs: float | None = DEFAULT_MAX_ABS,
        num_partitions: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.replay_protection = bool(replay_protection)
        self.screening = bool(screen)
        self.peer_ratio, self.reference_ratio, self.min_peers = peer_ratio, reference_ratio, int(min_peers)
        self.max_abs = max_abs
        self.num_partitions = num_partitions
        self.records: dict[int, RoundRecord] = {}
        self.reference: dict[str, np.ndarray] | None = None
        self.partitions: dict[int, int] = {}
        self._nonces: dict[int, dict[int, str]] = {}

    # --- bookkeeping ---------------------------------------------------------------------------------------------

    def record(self, server_round: int) -> RoundRecord:
        """The [`RoundRecord`] of `server_round` (created on first use)."""
        return self.records.setdefault(server_round, RoundRecord(server_round))

    @property
    def aggregated(self) -> list[int]:
        """The rounds in which the global model was updated."""
        return sorted(r for r, rec in self.records.items() if rec.aggregated)

    @property
    def rejected(self) -> dict[int, dict[str, str]]:
        """Round → {node id (as text): reason}, for every rejected reply."""
        return {r: {str(n): why for n, why in rec.rejected.items()} for r, rec in sorted(self.records.items())}

    def result_records(self) -> dict[str, ConfigRecord]:
        """The round records as `ConfigRecord`s for [`save_result`]: `rejected` and `failed` (`"<round>:<node>"` →
        reason) and `accepted` (`"<round>"` → comma-separated node ids)."""
        rejected, failed, accepted = {}, {}, {}
        for r, rec in sorted(self.records.items()):
            rejected.update({f"{r}:{n}": why for n, why in rec.rejected.items()})
            failed.update({f"{r}:{n}": why for n, why in rec.failed.items()})
            accepted[str(r)] = ",".join(str(n) for n in rec.accepted)
        return {"rejected": ConfigRecord(rejected), "failed": ConfigRecord(failed), "accepted": ConfigRecord(accepted)}

    def round_nonce(self, server_round: int, node: int) -> str:
        """The nonce of (`server_round`, `node`), drawn on first use from `secrets` (unpredictable to clients)."""
        nonces = self._nonces.setdefault(int(server_round), {})
        if int(node) not in nonces:
            nonces[int(node)] = secrets.token_hex(16)
        return nonces[int(node)]

    # --- Flower's strategy interface -----------------------------------------------------------------------------

    def configure_train(self, server_round, arrays, config, grid) -> Iterable[Message]:
        self.reference = self.reference_arrays(arrays)
        messages = list(super().configure_train(server_round, arrays, config, grid))
        out = []
        for message in messages:
            node = int(message.metadata.dst_node_id)
            content = RecordDict({k: message.content[k] for k in message.content.keys()})
            node_config = ConfigRecord(dict(content[self.configrecord_key]))
            if self.replay_protection:
                node_config[NONCE_KEY] = self.round_nonce(server_round, node)
            content[self.configrecord_key] = node_config
            out.append(Message(content=content, message_type=message.metadata.message_type, dst_node_id=node))
        self.record(server_round).sent = [int(m.metadata.dst_node_id) for m in out]
        return out

    def aggregate_train(self, server_round, replies):
        record = self.record(server_round)
        # Flower's consistency check would drop the whole round when one reply differs; each reply is checked on its
        # own against the server's reference instead, so one malformed peer is rejected alone.
        valid, errors = self._check_and_log_replies(list(replies), is_train=True, validate=False)
        for message in errors:
            record.failed[int(message.metadata.src_node_id)] = (
                f"error reply (code {message.error.code}): {message.error.reason}"
            )
        updates: dict[int, Update] = {}
        seen: set[int] = set()
        for message in valid:
            node = int(message.metadata.src_node_id)
            try:
                if node in seen:
                    updates.pop(node, None)
                    raise ValueError(f"{sender(message)} sent more than one reply this round")
                seen.add(node)
                self.check_nonce(message, server_round)
                update = self.decode_reply(message, server_round)
            except ValueError as err:
                record.rejected[node] = str(err)
                continue
            if node not in record.rejected:
                updates[node] = update
        if self.screening:
            self._reject(record, updates, self.screen(updates, server_round))
        arrays, more = self.aggregate_updates(updates, server_round)
        self._reject(record, updates, more)
        record.accepted = sorted(updates)
        record.aggregated = arrays is not None and bool(updates)
        for node, why in record.rejected.items():
            logger.warning("round %d: rejected node %s: %s", server_round, node, why)
        return (arrays if record.aggregated else None), self.round_metrics(updates, server_round)

    @staticmethod
    def _reject(record: RoundRecord, updates: dict[int, Update], reasons: Mapping[int, str]) -> None:
        for node, why in reasons.items():
            record.rejected[int(node)] = why
            updates.pop(int(node), None)

    # --- hooks ---------------------------------------------------------------------------------------------------

    def reference_arrays(self, arrays: ArrayRecord) -> dict[str, np.ndarray] | None:
        """The round's reference from the global arrays about to be sent (default: them, as numpy)."""
        return _numpy(arrays)

    def check_nonce(self, message: Message, server_round: int) -> None:
        """`ValueError` unless the reply echoes the nonce sent to its node for this round."""
        if not self.replay_protection:
            return
        node = int(message.metadata.src_node_id)
        expected = self._nonces.get(int(server_round), {}).get(node)
        if expected is None:
            raise ValueError(f"{sender(message)} was sent no instruction in round {server_round}")
        content = reply_content(message)
        guard = content[GUARD_RECORD] if GUARD_RECORD in content else None
        got = guard.get(NONCE_KEY) if isinstance(guard, ConfigRecord) else None
        if not isinstance(got, str) or not secrets.compare_digest(got, expected):
            raise ValueError(
                f"{sender(message)}: stale or replayed reply: it does not echo the round nonce sent to this node for "
                f"round {server_round}"
            )

    def decode_reply(self, message: Message, server_round: int) -> Update:
        """Decode and check one reply against `self.reference` (default: every reference array, and the
        `weighted_by_key` metric as an integer ≥ 0); raise `ValueError` to reject it."""
        if self.reference is None:
            raise ValueError("the strategy has no reference for this round (configure_train was not called)")
        weight = reply_metric(message, self.weighted_by_key, integer=True)
        arrays = reply_arrays(message, self.reference, arrays_key=self.arrayrecord_key, max_abs=self.max_abs)
        return Update(int(message.metadata.src_node_id), arrays, weight=weight)

    def screen(self, updates: Mapping[int, Update], server_round: int) -> dict[int, str]:
        """Outliers among the round's updates (default: [`robust_screen`] on `Update.arrays` vs `self.reference`)."""
        return robust_screen(
            {n: u.arrays for n, u in updates.items()},
            self.reference,
            peer_ratio=self.peer_ratio,
            reference_ratio=self.reference_ratio,
            min_peers=self.min_peers,
        )

    def aggregate_updates(
        self, updates: Mapping[int, Update], server_round: int
    ) -> tuple[ArrayRecord | None, dict[int, str]]:
        """The new global arrays from the accepted updates (default: FedAvg weighted by `Update.weight`; all-zero
        weights count every update equally) and any update rejected on the way."""
        if not updates:
            return None, {}
        items = [updates[n] for n in sorted(updates)]
        weights = [u.weight for u in items]
        if not sum(weights) > 0:
            weights = [1.0] * len(items)
        records = [ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in u.arrays.items()}) for u in items]
        return weighted_average(records, weights), {}

    def round_metrics(self, updates: Mapping[int, Update], server_round: int) -> MetricRecord:
        """The round's `MetricRecord` (default: `num-accepted`, `num-rejected`, `num-failed`)."""
        record = self.record(server_round)
        return MetricRecord(
            {"num-accepted": len(updates), "num-rejected": len(record.rejected), "num-failed": len(record.failed)}
        )

    # --- helpers for hooks ---------------------------------------------------------------------------------------

    def claimed_partition(self, message: Message, metrics_key: str = "metrics") -> int:
        """The reply's `partition-id` metric, bound to its node on first claim: `ValueError` when it lies outside
        `[0, num_partitions)`, when another node holds it, or when the node claimed another one before."""
        high = (self.num_partitions - 1) if self.num_partitions else math.inf
        pid = int(reply_metric(message, "partition-id", metrics_key=metrics_key, low=0, high=high, integer=True))
        node = int(message.metadata.src_node_id)
        holder = next((n for n, p in self.partitions.items() if p == pid and n != node), None)
        if holder is not None:
            raise ValueError(f"{sender(message)} claims partition-id {pid}, which node {holder} holds")
        if self.partitions.setdefault(node, pid) != pid:
            earlier = self.partitions[node]
            raise ValueError(f"{sender(message)} claims partition-id {pid}, but earlier claimed {earlier}")
        return pid


__all__ = [
    "GUARD_RECORD",
    "GuardedStrategy",
    "MIN_PEERS",
    "NONCE_KEY",
    "PEER_RATIO",
    "REFERENCE_RATIO",
    "RoundRecord",
    "Update",
    "guarded_reply",
    "instruction_nonce",
    "robust_screen",
]
