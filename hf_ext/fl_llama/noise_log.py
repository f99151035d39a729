"""The noise verdict's log of finished arms ([`noise_run_log`]): a run of hours cut short keeps what it measured, and
the seeds can run in separate processes that share one log."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from hf_ext.core.run_log import RunLog

if TYPE_CHECKING:
    from .reproduce_noise import NoiseVerdictArguments

NOISE_LOG = "noise_runs.jsonl"  # under the run's --out


def noise_run_log(path, args: NoiseVerdictArguments, backbone: str, device: str, reuse: bool = True) -> RunLog:
    """The [`~hf_ext.core.run_log.RunLog`] of a noise verdict: one line per finished arm (`id`: setting, seed, a,
    noise multiple; payload `run`: the arm's record), appended as each ends. With `reuse` (`--noise_resume`) a rerun
    with the same settings trains only the arms the log lacks; the seeds can also run in separate processes sharing
    one log, and a last run over every seed decides. The settings are every argument that changes an arm's numbers
    (all but `seeds`, `n_resamples` and `confidence`), the backbone and the device."""
    settings = {k: v for k, v in asdict(args).items() if k not in ("seeds", "n_resamples", "confidence")}
    return RunLog(path, {**settings, "backbone": backbone, "device": device}, reuse=reuse)


def arm_id(setting: str, seed, a, noise_multiple: float) -> dict:
    """The `id` of one arm in the log."""
    return {"setting": setting, "seed": seed, "a": a, "noise_multiple": float(noise_multiple)}


__all__ = ["NOISE_LOG", "arm_id", "noise_run_log"]
