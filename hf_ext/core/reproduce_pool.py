"""`hf-ext reproduce --jobs N`: the methods' reproductions in N processes at once.

Each method runs as `hf-ext reproduce METHOD` in its own process, exactly as it would alone (one torch thread, its
seeds and output folder), so its numbers do not depend on what runs beside it; only the wall time changes. It pays
on a machine with more cores than one reproduction uses: on the 2-core development machine two at a time were no
faster (2026-12-03: FedE4RAG, ORCA and H2Tune already keep both cores busy), so `make run` keeps one. A method's
output is written to `<work dir>/logs/<method>.log` and printed whole when it finishes, so
outputs never interleave; a line says when each one starts and ends. The longest methods start first, by the
seconds the last run of each took (`<work dir>/logs/reproduce_seconds.json`), so the pool does not end on one long
method alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .paths import work_dir

CHILD = "import sys; from hf_ext.core.cli import main; sys.exit(main())"


def _last_seconds(times_path: Path) -> dict[str, float]:
    try:
        return json.loads(times_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _longest_first(names: list[str], last: dict[str, float]) -> list[str]:
    # Unknown methods first (they may be long), then by the last measured seconds, longest first; ties keep order.
    return sorted(names, key=lambda n: -float(last.get(n, float("inf"))))


def run_pool(names: list[str], argv: list[str], jobs: int) -> tuple[list[str], dict[str, float]]:
    """Runs `hf-ext reproduce NAME *argv` for every name, `jobs` at a time; returns the failed names and each
    method's wall seconds (also saved for the next run's order)."""
    logs = work_dir("logs")
    logs.mkdir(parents=True, exist_ok=True)
    times_path = logs / "reproduce_seconds.json"
    last = _last_seconds(times_path)
    queue = _longest_first(names, last)
    running: dict[str, tuple[subprocess.Popen, float, object]] = {}
    failed, times = [], {}
    env = {**os.environ, "HF_EXT_QUIET": "1"}  # progress bars of parallel runs would interleave; the log has results
    while queue or running:
        while queue and len(running) < jobs:
            name = queue.pop(0)
            log = open(logs / f"{name}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed when the process ends
            proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, "reproduce", name, *argv], stdout=log, stderr=subprocess.STDOUT, env=env
            )
            running[name] = (proc, time.perf_counter(), log)
            print(f"[reproduce] started {name} (log: {logs / f'{name}.log'})", flush=True)
        time.sleep(0.5)
        for name, (proc, start, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[name]
            times[name] = time.perf_counter() - start
            if proc.returncode != 0:
                failed.append(name)
            print((logs / f"{name}.log").read_text(encoding="utf-8"), end="", flush=True)  # its own === header
            state = "FAILED" if proc.returncode else "ok"
            print(f"[reproduce] {name} {state} in {times[name]:.0f} s; {len(running)} running, {len(queue)} queued")
    tmp = times_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**last, **{n: round(t, 1) for n, t in times.items()}}, indent=1), encoding="utf-8")
    os.replace(tmp, times_path)  # atomic: a run killed here leaves the previous order
    return failed, times


__all__ = ["run_pool"]
