"""H2Tune's Flower strategy: the core's [`~hf_ext.core.federated.GuardedStrategy`] with H2Tune's hooks.

What the base does for every round (see [`hf_ext.core.federated.strategy`], whose docstring also says what cannot be
detected): a round nonce per node against replayed replies, each reply checked on its own against the server's own
reference, outliers screened relative to that reference and to the round's other updates, every rejected reply named
by transport node id in the round's record. H2Tune's hooks:

* `decode_reply`: the node's claimed `partition-id` is bound to it (a node claiming a partition another node holds,
  or changing its claim, is rejected); `num-examples` a non-negative integer; `accuracy`, when sent, in [0, 1]; then
  the payload: for H2Tune G_c checked against the server's G (key `"g"`, shape (L_max, M, R, R), float32, finite,
  |x| < 1e6); for HetLoRA / FLoRA the LoRA factors ([`~hf_ext.h2tune.baselines.payload_problem`]); nothing for
  local-only.
* `screen`: H2Tune's G_c against the G the server sent ([`~hf_ext.core.federated.robust_screen`]), over the slots
  the client has ([`masked_to_reference`]). HetLoRA / FLoRA
  payloads have per-base shapes and no server-side reference, so only their absolute bounds apply.
* `aggregate_updates`: [`~hf_ext.h2tune.aggregation.server_update`], on the accepted payloads: H2Tune's unweighted
  mean **per slot over the clients that have the slot**, HetLoRA's pad → mean within a base, FLoRA's stacking.

Kept per round besides the base's records: `client_accuracy` (partition → the accuracy the client measured after its
local training), `bytes_received` (what the accepted clients sent).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from flwr.app import Array, ArrayRecord, Message, MetricRecord

from hf_ext.core.federated import (
    GuardedStrategy,
    Update,
    reply_arrays,
    reply_content,
    reply_metric,
    robust_screen,
    sender,
)
from hf_ext.core.federated.guard import _decode

from .aggregation import MAX_ABS, server_update, slot_presence
from .validation import check_shape

MODES = ("h2tune", "hetlora", "flora", "local")


def masked_to_reference(arrays: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray] | None) -> dict:
    """G_c with the slots the client does not have (all zero: it abstains there) replaced by the reference's, so
    a client without k/v/gate modules is not measured as "far" from G for slots it has no say in."""
    if reference is None or "g" not in arrays or "g" not in reference:
        return dict(arrays)
    g = np.asarray(arrays["g"])
    have = slot_presence(g)[None, :, None, None]
    return {**arrays, "g": np.where(have, g, np.asarray(reference["g"], dtype=g.dtype))}


class H2TuneStrategy(GuardedStrategy):
    """H2Tune's server (and the compared methods') on Flower: see the module docstring.

    Args:
        global_shape (`tuple`): (L_max, M, R, R), the shape of the server's own G.
        mode (`str`, defaults to `"h2tune"`): `"h2tune"`, `"hetlora"`, `"flora"` or `"local"`.
        num_partitions (`int`, *optional*): a claimed `partition-id` must lie in `[0, num_partitions)`.
        hetlora_bounds (`Mapping`, *optional*): `max_layers`, `num_slots`, `max_dim` for HetLoRA / FLoRA payloads.
        base_groups (`Mapping[int, str]`, *optional*): partition → base group (from the server's run config):
            HetLoRA / FLoRA average only within a group, keyed by the partition bound to the sending node.
        max_abs (`float`, defaults to `1e6`): every |value| of an update must be below it.
        **kwargs: [`~hf_ext.core.federated.GuardedStrategy`]'s and Flower's `FedAvg`'s arguments.
    """

    def __init__(
        self,
        global_shape: tuple[int, ...],
        mode: str = "h2tune",
        *,
        num_partitions: int | None = None,
        hetlora_bounds: Mapping[str, int] | None = None,
        base_groups: Mapping[int, str] | None = None,
        max_abs: float = MAX_ABS,
        **kwargs,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown aggregation mode {mode!r}; choose from {MODES}")
        super().__init__(num_partitions=num_partitions, max_abs=max_abs, **kwargs)
        self.global_shape = check_shape("global_shape", global_shape, ndim=4)
        self.mode = mode
        self.hetlora_bounds = dict(hetlora_bounds or {})
        self.base_groups = dict(base_groups) if base_groups is not None else None
        self.current: dict[str, np.ndarray] | None = None  # the last global message (HetLoRA keeps it when empty)
        self.client_accuracy: dict[int, dict[str, float]] = {}
        self.bytes_received: dict[int, int] = {}

    def reference_arrays(self, arrays: ArrayRecord) -> dict[str, np.ndarray] | None:
        # H2Tune: the G about to be sent; the baselines send per-base factors, which are no reference for a client
        if self.mode != "h2tune" or "g" not in arrays:
            return None
        return {"g": arrays["g"].numpy()}

    def decode_reply(self, message: Message, server_round: int) -> Update:
        pid = self.claimed_partition(message)
        weight = reply_metric(message, "num-examples", low=0, integer=True)
        metrics = {}
        if "accuracy" in reply_content(message)["metrics"]:
            metrics["accuracy"] = reply_metric(message, "accuracy", low=0.0, high=1.0)
        node = int(message.metadata.src_node_id)
        if self.mode == "local":
            arrays = {}
        elif self.mode == "h2tune":
            arrays = reply_arrays(message, {"g": (self.global_shape, np.float32)}, max_abs=self.max_abs)
        else:
            arrays = self._factors(message)
        return Update(node, arrays, weight=weight, metrics=metrics, payload=pid)

    def _factors(self, message: Message) -> dict[str, np.ndarray]:
        """A HetLoRA / FLoRA payload: its keys differ per base, so it is decoded key by key and bounded."""
        from .baselines import payload_problem

        content = reply_content(message)
        record = content["arrays"] if "arrays" in content else None
        if not isinstance(record, ArrayRecord):
            raise ValueError(f"{sender(message)}: record 'arrays' is a {type(record).__name__}, not an ArrayRecord")
        payload = {}
        for key in record.keys():
            try:
                payload[key] = _decode(key, record[key])
            except ValueError as err:
                raise ValueError(f"{sender(message)}: {err}") from err
        problem = payload_problem(payload, max_abs=self.max_abs, **self.hetlora_bounds)
        if problem:
            raise ValueError(f"{sender(message)}: {problem}")
        return payload

    def screen(self, updates: Mapping[int, Update], server_round: int) -> dict[int, str]:
        if self.mode != "h2tune":
            return {}
        return robust_screen(
            {n: masked_to_reference(u.arrays, self.reference) for n, u in updates.items()},
            self.reference,
            peer_ratio=self.peer_ratio,
            reference_ratio=self.reference_ratio,
            min_peers=self.min_peers,
        )

    def aggregate_updates(self, updates: Mapping[int, Update], server_round: int):
        if not updates:
            return None, {}
        if self.mode == "local":
            return ArrayRecord(), {}
        payloads = {str(n): updates[n].arrays for n in sorted(updates)}
        groups = None
        if self.base_groups is not None:
            groups = {str(n): self.base_groups[updates[n].payload] for n in sorted(updates)}
        message, rejected = server_update(self.mode, payloads, self.global_shape, current=self.current, groups=groups)
        if message is not None:
            self.current = message
        rejected = {int(n): why for n, why in rejected.items()}
        if message is None:
            return None, rejected
        return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in message.items()}), rejected

    def round_metrics(self, updates: Mapping[int, Update], server_round: int) -> MetricRecord:
        metrics = dict(super().round_metrics(updates, server_round))
        scored = [(u.weight, u.metrics["accuracy"]) for u in updates.values() if "accuracy" in u.metrics]
        for update in updates.values():
            if "accuracy" in update.metrics:
                self.client_accuracy.setdefault(server_round, {})[str(update.payload)] = update.metrics["accuracy"]
        self.bytes_received[server_round] = int(sum(a.nbytes for u in updates.values() for a in u.arrays.values()))
        # only the checked metrics are aggregated (FedAvg's generic aggregation would take whatever a client puts in
        # its MetricRecord and divide by a total weight that may be zero)
        if scored:
            total = sum(w for w, _ in scored)
            metrics["accuracy"] = (
                sum(w * a for w, a in scored) / total if total > 0 else sum(a for _, a in scored) / len(scored)
            )
        return MetricRecord(metrics)


__all__ = ["H2TuneStrategy", "MODES", "masked_to_reference"]
