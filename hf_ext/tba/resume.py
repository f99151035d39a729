"""`hf-ext reproduce tba --resume`: the budgets a run cut short already finished are read back from its
`results.json` instead of attacked again. Every budget is independent (its own tuning, seeds and test images), so a
finished one is the same table whether it ran in this process or an earlier one; only runs with the same setting
(everything but the list of budgets) may be resumed, or the budgets would not be comparable."""

from __future__ import annotations

import json
from pathlib import Path

from hf_ext.core.reporting import Verdict, nan_for_none

# `results.json` → "setting" keys that must agree for a budget of an earlier run to stand in for one of this run.
RESUME_KEYS = (
    "body",
    "steps",
    "num_test",
    "seeds",
    "reference_steps",
    "beta",
    "tuned",
    "full",
    "victim_input_size",
    "loss",
    "training",
)


def _restored(x, key: str = ""):
    """A stored value as a fresh run holds it: verdicts as [`Verdict`] objects, missing numbers (JSON null: an SD
    over one seed) as NaN ([`nan_for_none`])."""
    if key.startswith("verdict_") and isinstance(x, dict):
        return Verdict.from_dict(x)
    if isinstance(x, dict):
        return {k: _restored(v, k) for k, v in x.items()}
    if isinstance(x, list):
        return [_restored(v) for v in x]
    return nan_for_none(x)


def load_finished(path: Path, setting: dict, eps_wanted: list[float]) -> tuple[dict, dict, dict, dict]:
    """The budgets of `eps_wanted` that the run at `path` finished: `(by_eps, tuning, timings, earlier)`, keyed like
    `results.json` ("8/255"); `timings[key]` is the per-seed list of attack times (an older record kept only their
    mean, which is repeated once per seed so that means over budgets still weight every seed once); `earlier` holds
    the earlier run's victim-gradient counts and wall time. Returns empty dicts when `path` does not exist; raises
    `ValueError` naming the first setting that differs."""
    if not path.exists():
        return {}, {}, {}, {}
    record = json.loads(path.read_text(encoding="utf-8"))
    old = record.get("setting", {})
    for key in RESUME_KEYS:
        if old.get(key) != setting.get(key):
            raise ValueError(
                f"--resume {path}: its {key} is {old.get(key)!r}, this run's is {setting.get(key)!r}; resume only a "
                "run with the same setting (or choose another --out)"
            )
    by_eps, tuning, timings = {}, {}, {}
    for key, entry in record.get("by_eps", {}).items():
        if not any(abs(entry["eps"] - e) < 1e-12 for e in eps_wanted):
            continue
        timings[key] = entry.get("timings_s") or [record["attack_time_s"]] * len(entry["per_seed"])
        # the budget's own attack times stay with it, so a run resumed twice still has them per budget
        by_eps[key] = {**{k: _restored(v) for k, v in entry.items() if k != "timings_s"}, "timings_s": timings[key]}
        if key in record.get("tuning", {}):
            tuning[key] = record["tuning"][key]
    earlier = {
        "victim_gradient_evaluations": record.get("victim_gradient_evaluations"),
        "wall_time_s": record.get("wall_time_s", 0.0) + record.get("resumed", {}).get("earlier_wall_time_s", 0.0),
    }
    return by_eps, tuning, timings, earlier


__all__ = ["RESUME_KEYS", "load_finished"]
