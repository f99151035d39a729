"""Run config, initial arrays and the closed-form result shared by the toy ServerApp and ClientApp.

Client `i` (its `partition-id`) returns the global arrays shifted by `client-step * (i + 1)` with `n_i` examples
(1, 1, 2, 2, 4, 4, ...), and its `steps` counter plus one. A weighted FedAvg therefore moves `w` by
`client-step * sum(n_i * (i + 1)) / sum(n_i)` per round and `steps` by exactly one. With 2 or 3 clients the weights
`n_i / sum(n)` are powers of two, so the average is exact in floating point and tests can compare bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REPLY_MODES = ("ok", "no-arrays", "no-num-examples", "raise")


@dataclass(frozen=True)
class FedTestConfig:
    """Parsed run config of the toy app.

    Args:
        num_rounds (`int`): server rounds (`num-server-rounds`).
        client_step (`float`): how far client `i` moves `w`, times `i + 1` (`client-step`).
        reply_mode (`str`): `"ok"`, or a way for the ClientApp to misbehave (`reply-mode`, see `REPLY_MODES`).
        min_nodes (`int`): nodes the ServerApp waits for and trains on each round (`min-nodes`).
    """

    num_rounds: int = 2
    client_step: float = 1.0
    reply_mode: str = "ok"
    min_nodes: int = 2

    @classmethod
    def from_run_config(cls, run_config) -> FedTestConfig:
        config = cls(
            num_rounds=int(run_config.get("num-server-rounds", cls.num_rounds)),
            client_step=float(run_config.get("client-step", cls.client_step)),
            reply_mode=str(run_config.get("reply-mode", cls.reply_mode)),
            min_nodes=int(run_config.get("min-nodes", cls.min_nodes)),
        )
        if config.reply_mode not in REPLY_MODES:
            raise ValueError(f"reply-mode must be one of {REPLY_MODES}, got {config.reply_mode!r}")
        return config


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
