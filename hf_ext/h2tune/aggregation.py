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


def hetlora_aggregate(factors: Mapping[str, torch.Tensor], ranks: Mapping[str, int]) -> dict[str, torch.Tensor]:
    """HetLoRA-style baseline for one LoRA factor of one module: zero-pad each client's factor to the max rank along
    dim 0 (A: r×d) , average, and truncate back to each client's rank. All clients must share the other dimension
    (same width), which is why HetLoRA cannot mix hidden sizes and H2Tune can.

    Returns client id → its truncated average.
    """
    max_r = max(ranks.values())
    padded = []
    for cid, f in factors.items():
        pad = torch.zeros(max_r, *f.shape[1:], dtype=f.dtype)
        pad[: f.shape[0]] = f
        padded.append(pad)
    mean = torch.stack(padded).mean(0)
    return {cid: mean[: ranks[cid]].clone() for cid in factors}


def make_strategy(global_shape: tuple[int, ...], **kwargs):
    """An [`H2TuneStrategy`] (built lazily so importing this module does not import Flower)."""
    from flwr.app import Array, ArrayRecord, MetricRecord
    from flwr.serverapp.strategy import FedAvg

    class H2TuneStrategy(FedAvg):
        """FedAvg with H2Tune's aggregation: G ← unweighted mean of the valid G_c (key `"g"`).

        Replies carrying an error (a client that crashed or timed out) are dropped by FedAvg's reply check and the
        round completes with the others; a G_c with the wrong shape or dtype, or with NaN/Inf, is rejected with a
        logged reason. The reasons are kept in `self.rejected` (round → client → reason).
        """

        def __init__(self, **kw):
            super().__init__(**kw)
            self.global_shape = tuple(global_shape)
            self.rejected: dict[int, dict[str, str]] = {}
            self.current = None

        def aggregate_train(self, server_round, replies):
            valid, _ = self._check_and_log_replies(list(replies), is_train=True)
            updates = {}
            for msg in valid:
                cid = str(msg.content["metrics"].get("partition-id", msg.metadata.src_node_id))
                record = msg.content["arrays"]
                updates[cid] = record["g"].numpy() if "g" in record else np.zeros(0, dtype=np.float32)
            glob, rejected = aggregate_mean(updates, self.global_shape, current=self.current)
            self.rejected[server_round] = rejected
            self.current = glob
            if glob is None:
                return None, None
            accepted = [m.content for m in valid if str(m.content["metrics"].get(
                "partition-id", m.metadata.src_node_id)) not in rejected]
            metrics = self.train_metrics_aggr_fn(accepted, self.weighted_by_key) if accepted else None
            if metrics is not None:
                metrics = MetricRecord({**dict(metrics), "num-rejected": len(rejected), "num-accepted": len(accepted)})
            return ArrayRecord({"g": Array(glob.numpy().astype(np.float32))}), metrics

    return H2TuneStrategy(**kwargs)
