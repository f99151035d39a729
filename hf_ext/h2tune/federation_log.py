"""The reproduction's log of finished federations ([`FederationLog`]): a `--pretrained` run takes hours on a CPU,
so every (variant, seed) federation is kept as it ends, and `--resume` trains only what the log lacks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hf_ext.core.run_log import RunLog

FEDERATION_LOG = "federations.jsonl"  # under the run's --out


class FederationLog:
    """The finished federations of `out/federations.jsonl` ([`~hf_ext.core.run_log.RunLog`]; `id`: variant and
    seed; payload: per-client exact match per round, bytes sent per round, seconds), appended as each ends.

    A line is reused (with `resume`) only under the same settings: the run config without its seed and folders, the
    engine and the device. The first seed's H2Tune federation also saves its clients under `out/clients`, so it is
    reused only while they are there."""

    def __init__(self, out: str | Path, run, engine: str, resume: bool = False):
        from hf_ext.core.devices import torch_device

        self.out = Path(out)
        settings = {k: v for k, v in dataclasses.asdict(run).items() if k not in ("seed", "cache_dir", "save_dir")}
        self.log = RunLog(self.out / FEDERATION_LOG, {**settings, "engine": engine, "device": torch_device()},
                          reuse=resume)  # fmt: skip
        self.path = self.log.path
        self.clients = [c.name for c in run.clients]

    @property
    def reused(self) -> int:
        return self.log.reused

    def get(self, variant: str, seed: int, needs_clients: bool = False) -> dict | None:
        """The logged result of `(variant, seed)`, or `None` when it must be trained."""
        if needs_clients and not all((self.out / "clients" / n / "adapter").is_dir() for n in self.clients):
            return None
        record = self.log.get(variant=variant, seed=seed)
        return record["result"] if record is not None else None

    def add(self, variant: str, seed: int, result: dict, seconds: float) -> None:
        """Logs one finished federation (the result as `_variant_job` returns it)."""
        self.log.add({"variant": variant, "seed": seed}, result=result, seconds=seconds)


__all__ = ["FEDERATION_LOG", "FederationLog"]
