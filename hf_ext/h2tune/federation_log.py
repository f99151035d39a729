"""The reproduction's log of finished federations ([`FederationLog`]): a `--pretrained` run takes hours on a CPU,
so every (variant, seed) federation is kept as it ends, and `--resume` trains only what the log lacks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hf_ext.core.run_log import append_record, read_records, settings_key

FEDERATION_LOG = "federations.jsonl"  # under the run's --out


class FederationLog:
    """The finished federations of `out/federations.jsonl`, one JSON line each (per-client exact match per round,
    bytes sent per round, seconds), appended and fsynced as each ends ([`hf_ext.core.run_log`]).

    A line is reused (with `resume`) only under the same key: the run config without its seed and folders, the
    engine and the device. The first seed's H2Tune federation also saves its clients under `out/clients`, so it is
    reused only while they are there."""

    def __init__(self, out: str | Path, run, engine: str, resume: bool = False):
        from hf_ext.core.devices import torch_device

        self.out = Path(out)
        self.path = self.out / FEDERATION_LOG
        settings = {k: v for k, v in dataclasses.asdict(run).items() if k not in ("seed", "cache_dir", "save_dir")}
        self.key = settings_key({**settings, "engine": engine, "device": torch_device()})
        records = read_records(self.path) if resume else []
        self.runs = {(r["variant"], r["seed"]): r["result"] for r in records
                     if r.get("key") == self.key and isinstance(r.get("result"), dict)}  # fmt: skip
        self.clients = [c.name for c in run.clients]
        self.reused = 0

    def get(self, variant: str, seed: int, needs_clients: bool = False) -> dict | None:
        """The logged result of `(variant, seed)`, or `None` when it must be trained."""
        result = self.runs.get((variant, seed))
        if result is not None and needs_clients:
            if not all((self.out / "clients" / name / "adapter").is_dir() for name in self.clients):
                return None
        self.reused += result is not None
        return result

    def add(self, variant: str, seed: int, result: dict, seconds: float) -> None:
        """Logs one finished federation (the result as `_variant_job` returns it)."""
        self.runs[(variant, seed)] = result
        record = {"key": self.key, "variant": variant, "seed": seed, "result": result, "seconds": seconds}
        append_record(self.path, record)


__all__ = ["FEDERATION_LOG", "FederationLog"]
