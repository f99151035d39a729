"""Server-side aggregation for H2Tune and the HetLoRA baseline, with validation of every client update.

Policy: an update with the wrong shape or dtype, or with NaN/Inf, is rejected with a logged reason and never
averaged in; a client that crashed or timed out simply has no update. The round completes with the valid updates
(at least one); with none, the global tensor is kept unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import torch

logger = logging.getLogger(__name__)


def update_problem(update, expected_shape: tuple[int, ...]) -> str | None:
    """Why `update` cannot be averaged, or `None` when it is fine."""
    arr = np.asarray(update.detach().cpu() if isinstance(update, torch.Tensor) else update)
    if not np.issubdtype(arr.dtype, np.floating):
        return f"dtype {arr.dtype} is not floating point"
    if tuple(arr.shape) != tuple(expected_shape):
        return f"shape {tuple(arr.shape)} != expected {tuple(expected_shape)}"
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        return f"{bad} non-finite value(s) (NaN/Inf)"
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
    valid, rejected = [], {}
    for cid, upd in updates.items():
        reason = update_problem(upd, expected_shape)
        if reason is not None:
            logger.warning("h2tune: rejected update from client %s: %s", cid, reason)
            rejected[cid] = reason
            continue
        valid.append(torch.as_tensor(np.asarray(upd.detach().cpu() if isinstance(upd, torch.Tensor) else upd),
                                     dtype=torch.float32))
    if not valid:
        logger.warning("h2tune: no valid update this round; keeping the global tensor")
        return current, rejected
    return torch.stack(valid).mean(0), rejected


def server_update(
    mode: str, payloads: Mapping[str, Mapping[str, np.ndarray]], global_shape: tuple[int, ...],
    current: Mapping[str, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray] | None, dict[str, str]]:
    """The server's step for every compared method, on what the clients sent (client id → named arrays).

    - `"h2tune"`: G ← unweighted mean of the valid G_c (key `"g"`); with none valid, `current` is kept.
    - `"hetlora"`: pad → mean per LoRA factor ([`~hf_ext.h2tune.baselines.hetlora_mean`]).
    - `"local"`: nothing is exchanged.

    Returns `(message, rejected)`: the arrays sent back to every client (`None`: nothing), client id → reason.
    """
    from .baselines import hetlora_mean

    if mode == "local":
        return None, {}
    if mode == "hetlora":
        mean, rejected = hetlora_mean(payloads)
        return (mean or (dict(current) if current else None)), rejected
    if mode != "h2tune":
        raise ValueError(f"unknown aggregation mode {mode!r}")
    prev = torch.from_numpy(np.asarray(current["g"])) if current and "g" in current else None
    updates = {cid: p["g"] if "g" in p else np.zeros(0, dtype=np.float32) for cid, p in payloads.items()}
    glob, rejected = aggregate_mean(updates, global_shape, current=prev)
    return (None if glob is None else {"g": glob.numpy().astype(np.float32)}), rejected


def make_strategy(global_shape: tuple[int, ...], mode: str = "h2tune", **kwargs):
    """An [`H2TuneStrategy`] for `mode` ("h2tune", "hetlora" or "local"; built lazily so importing this module does
    not import Flower). Extra keyword arguments go to Flower's `FedAvg`."""
    from flwr.app import Array, ArrayRecord, MetricRecord
    from flwr.serverapp.strategy import FedAvg

    class H2TuneStrategy(FedAvg):
        """FedAvg with the aggregation of [`server_update`]: H2Tune's unweighted mean of the valid G_c, HetLoRA's
        pad → mean, or nothing (local-only).

        Replies carrying an error (a client that crashed or timed out) are dropped by FedAvg's reply check and the
        round completes with the others; an update with the wrong shape or dtype, or with NaN/Inf, is rejected with
        a logged reason. Kept per round: `rejected` (client → reason), `client_accuracy` (partition → the accuracy
        the client measured after its local training) and `bytes_received` (what the clients sent).
        """

        def __init__(self, **kw):
            super().__init__(**kw)
            self.global_shape = tuple(global_shape)
            self.mode = mode
            self.rejected: dict[int, dict[str, str]] = {}
            self.client_accuracy: dict[int, dict[str, float]] = {}
            self.bytes_received: dict[int, int] = {}
            self.current: dict[str, np.ndarray] | None = None

        def aggregate_train(self, server_round, replies):
            # Flower's own consistency check would skip the whole round when one reply's keys differ (and HetLoRA
            # clients of different depths legitimately send different keys); each payload is validated per client
            # by server_update instead, so one malformed peer is rejected alone.
            valid, _ = self._check_and_log_replies(list(replies), is_train=True, validate=False)
            payloads = {}
            for msg in valid:
                metrics = msg.content["metrics"] if "metrics" in msg.content else {}
                cid = str(metrics.get("partition-id", msg.metadata.src_node_id))
                arrays = msg.content["arrays"] if "arrays" in msg.content else {}
                payloads[cid] = {k: v.numpy() for k, v in arrays.items()}
                if "accuracy" in metrics:
                    self.client_accuracy.setdefault(server_round, {})[cid] = float(metrics["accuracy"])
            self.bytes_received[server_round] = int(sum(a.nbytes for p in payloads.values() for a in p.values()))
            message, rejected = server_update(self.mode, payloads, self.global_shape, current=self.current)
            self.rejected[server_round] = rejected
            self.current = message
            accepted = [m.content for m in valid if "metrics" in m.content and str(m.content["metrics"].get(
                "partition-id", m.metadata.src_node_id)) not in rejected]
            metrics = self.train_metrics_aggr_fn(accepted, self.weighted_by_key) if accepted else None
            if metrics is not None:
                metrics = MetricRecord({**dict(metrics), "num-rejected": len(rejected), "num-accepted": len(accepted)})
            if message is None and self.mode != "local":
                return None, metrics
            return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in (message or {}).items()}), metrics

    return H2TuneStrategy(**kwargs)
