"""Run config, initial arrays and the closed-form result shared by the toy ServerApp and ClientApp.

Client `i` (its `partition-id`) returns the global arrays shifted by `client-step * (i + 1)` with `n_i` examples
(1, 1, 2, 2, 4, 4, ...), and its `steps` counter plus one. A weighted FedAvg therefore moves `w` by
`client-step * sum(n_i * (i + 1)) / sum(n_i)` per round and `steps` by exactly one. With 2 or 3 clients the weights
`n_i / sum(n)` are powers of two, so the average is exact in floating point and tests can compare bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hf_ext.core.federated import FlowerRunConfig

REPLY_MODES = ("ok", "no-arrays", "no-num-examples", "raise", "no-nonce")


@dataclass(frozen=True)
class FedTestConfig(FlowerRunConfig):
    """Parsed run config of the toy app (the core's one parser: unknown keys are refused).

    Args:
        num_rounds (`int`): server rounds (`num-server-rounds`).
        client_step (`float`): how far client `i` moves `w`, times `i + 1` (`client-step`).
        reply_mode (`str`): `"ok"`, or a way for the ClientApp to misbehave (`reply-mode`, see `REPLY_MODES`).
        min_nodes (`int`): nodes the ServerApp waits for and trains on each round (`min-nodes`).
    """

    num_rounds: int = field(default=2, metadata={"run_config": "num-server-rounds"})
    client_step: float = 1.0
    reply_mode: str = "ok"
    min_nodes: int = 2

    def __post_init__(self):
        if self.reply_mode not in REPLY_MODES:
            raise ValueError(f"reply-mode must be one of {REPLY_MODES}, got {self.reply_mode!r}")


def num_examples(partition_id: int) -> int:
    return 2 ** (partition_id // 2)


def initial_arrays() -> dict[str, np.ndarray]:
    return {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "steps": np.zeros(3, dtype=np.int64)}


def expected_global(num_partitions: int, config: FedTestConfig) -> dict[str, np.ndarray]:
    """The global arrays after `config.num_rounds` rounds with every partition taking part."""
    n = np.array([num_examples(i) for i in range(num_partitions)], dtype=np.float64)
    shift = config.client_step * float((n * np.arange(1, num_partitions + 1)).sum() / n.sum())
    init = initial_arrays()
    return {
        "w": (init["w"].astype(np.float64) + config.num_rounds * shift).astype(np.float32),
        "steps": init["steps"] + config.num_rounds,
    }
