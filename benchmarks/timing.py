"""Wall-clock helpers shared by the benchmark scripts (run as `python benchmarks/<script>.py`, so this folder is on
`sys.path`)."""

from __future__ import annotations

import time


def timed(fn, *args) -> float:
    """Seconds one call `fn(*args)` takes."""
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def best_of(fn, repeats: int) -> float:
    """Fastest of `repeats` calls of `fn()`: the least disturbed by other load on the machine."""
    return min(timed(fn) for _ in range(repeats))
