"""Server-side aggregation for H2Tune and the HetLoRA baseline, with validation of every client update.

Policy: the server trusts the transport, not the payload. Updates are keyed by the node id Flower's SuperLink
stamps on each reply (it checks that a reply comes from the node the instruction went to), never by the
`partition-id` a client reports; a node's first claimed `partition-id` is bound to it, and a node claiming a partition
another node holds is rejected. Every reply is checked against the server's own reference (its global G: keys, shape,
float32, finite, |x| < 1e6; a finite non-negative integer `num-examples`; an accuracy in [0, 1]); a malformed one
(undecodable bytes, a ConfigRecord where arrays belong, extra or missing keys, ...) is rejected alone with a logged
reason and never averaged in; a client that crashed or timed out simply has no update. The round completes with the
valid updates (at least one); with none, the global tensor is kept unchanged and the round does not count as
aggregated (the ServerApp fails a run with fewer aggregated rounds than `min-rounds`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import torch

logger = logging.getLogger(__name__)
MAX_ABS = 1e6  # |G_c| entries live around 1e-2..1e1; anything this large is an attack or a divergence


def update_problem(update, expected_shape: tuple[int, ...], max_abs: float | None = MAX_ABS) -> str | None:
    """Why `update` cannot be averaged (dtype, shape, NaN/Inf, |x| ≥ `max_abs`), or `None` when it is fine."""
    arr = np.asarray(update.detach().cpu() if isinstance(update, torch.Tensor) else update)
    if not np.issubdtype(arr.dtype, np.floating):
        return f"dtype {arr.dtype} is not floating point"
    if tuple(arr.shape) != tuple(expected_shape):
        return f"shape {tuple(arr.shape)} != expected {tuple(expected_shape)}"
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        return f"{bad} non-finite value(s) (NaN/Inf)"
    if max_abs is not None and arr.size and not float(np.abs(arr).max()) < max_abs:
        return f"|value| up to {float(np.abs(arr).max()):.3g}, the bound is < {max_abs:.3g}"
    return None


def aggregate_mean(
    updates: Mapping[str, object], expected_shape: tuple[int, ...], current: torch.Tensor | None = None
) -> tuple[torch.Tensor | None, dict[str, str]]:
    """G ← (1/N)·Σ_c G_c over the valid updates: an *unweighted* mean, as in the paper.

    Args:
        updates (`Mapping[str, array]`): client id → G_c.
        expected_shape (`tuple`): (L_max, M, R, R).
        current (`torch.Tensor`, *optional*): returned unchanged when no update is valid.

    Returns:
        `(G, rejected)`: the new global tensor, and client id → reason for each rejected update.
    """
    from .checks import check_shape

    expected_shape = check_shape("expected_shape", expected_shape)
    valid, rejected = [], {}
    for cid, upd in updates.items():
        reason = update_problem(upd, expected_shape)
        if reason is not None:
            logger.warning("h2tune: rejected update from client %s: %s", cid, reason)
            rejected[cid] = reason
            continue
        valid.append(
            torch.as_tensor(
                np.asarray(upd.detach().cpu() if isinstance(upd, torch.Tensor) else upd), dtype=torch.float32
            )
        )
    if not valid:
        logger.warning("h2tune: no valid update this round; keeping the global tensor")
        return current, rejected
    return torch.stack(valid).mean(0), rejected


def server_update(
    mode: str,
    payloads: Mapping[str, Mapping[str, np.ndarray]],
    global_shape: tuple[int, ...],
    current: Mapping[str, np.ndarray] | None = None,
    groups: Mapping[str, str] | None = None,
) -> tuple[dict[str, np.ndarray] | None, dict[str, str]]:
    """The server's step for every compared method, on what the clients sent (client id → named arrays).

    - `"h2tune"`: G ← unweighted mean of the valid G_c (key `"g"`); with none valid, `current` is kept.
    - `"hetlora"`: rank-pad → mean per LoRA factor within a feature space ([`~hf_ext.h2tune.baselines.hetlora_mean`]).
    - `"flora"`: the stacked factors per module shape ([`~hf_ext.h2tune.baselines.flora_stack`]).
    - `"local"`: nothing is exchanged.

    `groups` (client id → base group, from the server's own run config) keeps HetLoRA / FLoRA within one base.

    Returns `(message, rejected)`: the arrays sent back to every client (`None`: nothing), client id → reason.
    """
    from .baselines import flora_stack, hetlora_mean

    if mode == "local":
        return None, {}
    if mode in ("hetlora", "flora"):
        mean, rejected = (hetlora_mean if mode == "hetlora" else flora_stack)(payloads, groups=groups)
        if mode == "flora" and not mean:
            return None, rejected  # FLoRA's ΔW was merged already: never resend an old one
        return (mean or (dict(current) if current else None)), rejected
    if mode != "h2tune":
        raise ValueError(f"unknown aggregation mode {mode!r}")
    prev = torch.from_numpy(np.asarray(current["g"])) if current and "g" in current else None
    updates = {cid: p["g"] if "g" in p else np.zeros(0, dtype=np.float32) for cid, p in payloads.items()}
    glob, rejected = aggregate_mean(updates, global_shape, current=prev)
    return (None if glob is None else {"g": glob.numpy().astype(np.float32)}), rejected


def make_strategy(
    global_shape: tuple[int, ...],
    mode: str = "h2tune",
    *,
    num_partitions: int | None = None,
    max_abs: float = MAX_ABS,
    hetlora_bounds: Mapping[str, int] | None = None,
    base_groups: Mapping[int, str] | None = None,
    **kwargs,
):
    """An [`H2TuneStrategy`] for `mode` ("h2tune", "hetlora", "flora" or "local"; built lazily so importing this
    module does not import Flower).

    Args:
        global_shape (`tuple`): (L_max, M, R, R), the server's own G (the reference every reply is checked against).
        mode (`str`): "h2tune", "hetlora", "flora" or "local".
        num_partitions (`int`, *optional*): a claimed `partition-id` must lie in `[0, num_partitions)`.
        max_abs (`float`, defaults to `1e6`): every |value| of an update must be below it.
        hetlora_bounds (`Mapping`, *optional*): `max_layers`, `num_slots`, `max_dim` for HetLoRA payloads.
        base_groups (`Mapping[int, str]`, *optional*): partition → base group (from the server's run config):
            HetLoRA / FLoRA average only within a group, keyed by the partition bound to the sending node.
        **kwargs: go to Flower's `FedAvg`.
    """
    from flwr.app import Array, ArrayRecord, MetricRecord
    from flwr.serverapp.strategy import FedAvg

    from .checks import check_shape

    global_shape = check_shape("global_shape", global_shape, ndim=4)

    from hf_ext.core.federated.guard import reply_arrays, reply_content, reply_metric, sender

    from .baselines import payload_problem

    class H2TuneStrategy(FedAvg):
        """FedAvg with the aggregation of [`server_update`]: H2Tune's unweighted mean of the valid G_c, HetLoRA's
        pad → mean, or nothing (local-only); replies are checked as the module docstring says.

        Kept per round: `rejected` (node id → reason), `client_accuracy` (partition → the accuracy the client
        measured after its local training, only for nodes whose claim is bound to them), `bytes_received` (what the
        accepted clients sent) and `aggregated` (rounds in which the global model was updated). `partitions` maps
        node id → the partition bound to it.
        """

        def __init__(self, **kw):
            super().__init__(**kw)
            self.global_shape = tuple(global_shape)
            self.mode = mode
            self.rejected: dict[int, dict[str, str]] = {}
            self.client_accuracy: dict[int, dict[str, float]] = {}
            self.bytes_received: dict[int, int] = {}
            self.current: dict[str, np.ndarray] | None = None
            self.partitions: dict[int, int] = {}
            self.aggregated: list[int] = []

        def _partition(self, msg) -> int:
            pid = reply_metric(
                msg, "partition-id", low=0, high=(num_partitions - 1) if num_partitions else float("inf"), integer=True
            )
            pid, node = int(pid), int(msg.metadata.src_node_id)
            holder = next((n for n, p in self.partitions.items() if p == pid and n != node), None)
            if holder is not None:
                raise ValueError(f"{sender(msg)} claims partition-id {pid}, which node {holder} holds")
            if self.partitions.setdefault(node, pid) != pid:
                raise ValueError(
                    f"{sender(msg)} claims partition-id {pid}, but earlier claimed {self.partitions[node]}"
                )
            return pid

        def _payload(self, msg) -> dict[str, np.ndarray]:
            reply_metric(msg, "num-examples", low=0, integer=True)
            if "accuracy" in reply_content(msg)["metrics"]:
                reply_metric(msg, "accuracy", low=0.0, high=1.0)
            if self.mode == "local":
                return {}
            if self.mode == "h2tune":
                return reply_arrays(msg, {"g": (self.global_shape, np.float32)}, max_abs=max_abs)
            record = reply_content(msg)["arrays"] if "arrays" in reply_content(msg) else None
            if not isinstance(record, ArrayRecord):
                raise ValueError(f"{sender(msg)}: record 'arrays' is a {type(record).__name__}, not an ArrayRecord")
            payload = {}
            for key in record.keys():
                value = record[key]
                if not isinstance(value, Array):
                    raise ValueError(f"{sender(msg)}: {key!r} is not a flwr Array")
                try:
                    payload[key] = value.numpy()
                except Exception as err:  # noqa: BLE001 (corrupt bytes: np.load raises many types)
                    raise ValueError(f"{sender(msg)}: {key!r} cannot be decoded ({type(err).__name__})") from err
            problem = payload_problem(payload, max_abs=max_abs, **dict(hetlora_bounds or {}))
            if problem:
                raise ValueError(f"{sender(msg)}: {problem}")
            return payload

        def aggregate_train(self, server_round, replies):
            # Flower's own consistency check would skip the whole round when one reply's keys differ (and HetLoRA
            # clients of different depths legitimately send different keys); each reply is checked on its own
            # against the server's reference instead, so one malformed peer is rejected alone.
            valid, _ = self._check_and_log_replies(list(replies), is_train=True, validate=False)
            payloads, rejected, accepted, seen = {}, {}, [], set()
            for msg in valid:
                node = str(msg.metadata.src_node_id)
                try:
                    if node in seen:
                        payloads.pop(node, None)
                        raise ValueError(f"{sender(msg)} sent more than one reply this round")
                    seen.add(node)
                    pid = self._partition(msg)
                    payload = self._payload(msg)
                except ValueError as err:
                    logger.warning("h2tune round %d: rejected %s", server_round, err)
                    rejected[node] = str(err)
                    continue
                payloads[node] = payload
                accepted.append((node, pid, msg))
            accepted = [(n, p, m) for n, p, m in accepted if n in payloads]
            groups = {n: base_groups[p] for n, p, _ in accepted} if base_groups is not None else None
            message, more = server_update(self.mode, payloads, self.global_shape, current=self.current, groups=groups)
            rejected.update(more)
            accepted = [(n, p, m) for n, p, m in accepted if n not in rejected]
            for node, pid, msg in accepted:
                if "accuracy" in msg.content["metrics"]:
                    self.client_accuracy.setdefault(server_round, {})[str(pid)] = float(
                        msg.content["metrics"]["accuracy"]
                    )
            self.bytes_received[server_round] = int(sum(a.nbytes for n, _, _ in accepted for a in payloads[n].values()))
            self.rejected[server_round] = rejected
            if accepted and (self.mode == "local" or message is not None):
                self.aggregated.append(server_round)
            if message is not None:
                self.current = message
            # Only the checked metrics are aggregated (FedAvg's generic aggregation would take whatever a client
            # puts in its MetricRecord and divide by a total weight that may be zero).
            metrics = {"num-rejected": len(rejected), "num-accepted": len(accepted)}
            scored = [
                (float(m.content["metrics"]["num-examples"]), float(m.content["metrics"]["accuracy"]))
                for _, _, m in accepted
                if "accuracy" in m.content["metrics"]
            ]
            total = sum(w for w, _ in scored)
            if scored:
                metrics["accuracy"] = (
                    sum(w * a for w, a in scored) / total if total > 0 else sum(a for _, a in scored) / len(scored)
                )
            metrics = MetricRecord(metrics)
            if self.mode == "local":
                return ArrayRecord(), metrics
            if message is None or not accepted:
                return None, metrics
            return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in message.items()}), metrics

    return H2TuneStrategy(**kwargs)
