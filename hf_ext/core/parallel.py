"""Running a reproduction's independent jobs (seeds × variants × settings) in parallel worker processes.

The methods' models are small: on a 2-core machine two single-threaded processes beat one two-threaded process,
so each worker is started with one torch thread and quiet progress bars.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any

THREADS_ENV = "HF_EXT_REPRODUCE_THREADS"


def reproduction_thread_count() -> int:
    """`$HF_EXT_REPRODUCE_THREADS` (default 1), refused unless an integer >= 1."""
    raw = os.environ.get(THREADS_ENV, "1")
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"${THREADS_ENV} must be an integer >= 1, got {raw!r}")
    return threads


@contextmanager
def reproduction_threads() -> Iterator[int]:
    """Runs the block at a fixed torch intra-op thread count — 1, or `$HF_EXT_REPRODUCE_THREADS` — and restores
    the previous count after.

    The order of a float sum follows the thread count, so a reproduction's last digits depend on it (measured: at 2
    threads CodeBC's BLEU is 13.50 and TinyAlign's small-LM loss 0.33058217 instead of the committed 13.43 and
    0.33058214, made at 1); torch's default is the machine's core count. Fixing it makes `hf-ext reproduce` give
    the committed numbers on any machine. Methods that parallelise do it over processes ([`run_jobs`]).
    """
    import torch

    threads = reproduction_thread_count()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def quiet_worker_init(quiet_loggers: tuple[str, ...] = ()) -> None:
    """Per-worker set-up: one torch thread, no progress bars, library logging at ERROR."""
    import datasets
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    for name in quiet_loggers:
        logging.getLogger(name).setLevel(logging.ERROR)


def run_jobs(
    fn: Callable[..., Any],
    jobs: Iterable[tuple],
    *,
    workers: int,
    desc: str,
    quiet_loggers: tuple[str, ...] = (),
    ordered: bool = False,
) -> Iterator[Any]:
    """Yields `fn(*job)` for every job, in completion order, with a progress bar ([`~hf_ext.core.progress.progress`]).

    Args:
        fn (`Callable`): a module-level function (it is pickled to spawned workers).
        jobs (`Iterable[tuple]`): positional arguments of each call.
        workers (`int`): worker processes; `<= 1` runs every job in this process (tests, debugging).
        desc (`str`): progress-bar label.
        quiet_loggers (`tuple[str, ...]`): loggers set to ERROR in the workers.
        ordered (`bool`): yield in the order of `jobs` instead (after the last job ends when `workers > 1`): what
            a caller needs whose output lists results in the order they arrive, so that a rerun writes the same file.
    """
    from .progress import progress

    jobs = list(jobs)
    bar = progress(total=len(jobs), desc=desc, unit="run")  # silent under --quiet, CI or a redirected stream
    try:
        if workers <= 1:
            for job in jobs:
                yield fn(*job)
                bar.update()
            return
        ctx = multiprocessing.get_context("spawn")  # fork would copy torch's thread pools and locks
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=quiet_worker_init, initargs=(tuple(quiet_loggers),)
        ) as pool:
            futures = [pool.submit(fn, *job) for job in jobs]
            for future in as_completed(futures):
                if not ordered:
                    yield future.result()
                else:
                    future.result()  # a failed job raises now, not after the others
                bar.update()
            if ordered:
                yield from (f.result() for f in futures)
    finally:
        bar.close()


def close_process_group() -> None:
    """Ends a `torch.distributed` run cleanly: all ranks meet at a barrier, then the process group is destroyed.

    A gloo process group left alive at interpreter exit lets one rank tear down its communication threads while the
    other still talks to it; C++ then aborts that rank (`terminate called without an active exception`, SIGABRT) and
    `accelerate launch` reports the whole run as failed although training finished. No-op outside a distributed run.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
