"""The noise verdict's log of finished arms ([`RunLog`]): a run of hours cut short keeps what it measured, and the
seeds can run in separate processes that share one log."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from hf_ext.core.run_log import append_record, read_records, settings_key

if TYPE_CHECKING:
    from .reproduce_noise import NoiseVerdictArguments

NOISE_LOG = "noise_runs.jsonl"  # under the run's --out


class RunLog:
    """The finished arms of a noise verdict, one JSON line each in `path` (appended and flushed as each arm ends),
    so a run cut short keeps what it measured. With `reuse` (`--noise_resume`) a rerun with the same arguments
    trains only what is missing; the seeds can also be split over processes sharing one log, and a last run over
    every seed decides ([`hf_ext.core.run_log`]).

    A line is reused only under the same key: every argument that changes an arm's numbers (all but `seeds`,
    `n_resamples` and `confidence`), the backbone and the device. A torn last line (a killed run) is skipped."""

    def __init__(self, path, args: NoiseVerdictArguments, backbone: str, device: str, reuse: bool = True):
        settings = {k: v for k, v in asdict(args).items() if k not in ("seeds", "n_resamples", "confidence")}
        self.key = settings_key({**settings, "backbone": backbone, "device": device})
        self.path, self.reused = Path(path), 0
        records = read_records(self.path) if reuse else []
        self.runs = {self._id(r["run"]): r["run"] for r in records
                     if r.get("key") == self.key and isinstance(r.get("run"), dict)}  # fmt: skip

    @staticmethod
    def _id(run: dict) -> tuple:
        return run["setting"], run["seed"], run["a"], float(run["noise_multiple"])

    def get(self, setting: str, seed, a, noise_multiple: float) -> dict | None:
        run = self.runs.get((setting, seed, a, float(noise_multiple)))
        self.reused += run is not None
        return run

    def add(self, run: dict) -> None:
        self.runs[self._id(run)] = run
        append_record(self.path, {"key": self.key, "run": run})


__all__ = ["NOISE_LOG", "RunLog"]
