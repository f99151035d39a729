"""`hf_ext.core.parallel`: worker pools and the clean end of a distributed run."""

from __future__ import annotations

import time

from hf_ext.core.parallel import close_process_group, run_jobs


def _square(x: int) -> int:
    return x * x


def test_run_jobs_in_process_gives_every_result():
    jobs = [(i,) for i in range(5)]
    assert sorted(run_jobs(_square, jobs, workers=1, desc="t")) == [0, 1, 4, 9, 16]


def _sleep_then_return(x: int, seconds: float) -> int:
    time.sleep(seconds)
    return x


def test_ordered_run_jobs_in_workers_yields_in_job_order_although_later_jobs_finish_first():
    # The first job sleeps longest, so the second worker finishes jobs 1 and 2 before it.
    jobs = [(0, 3.0), (1, 0.0), (2, 0.0)]
    assert list(run_jobs(_sleep_then_return, jobs, workers=2, desc="t", ordered=True)) == [0, 1, 2]
    assert list(run_jobs(_square, [(i,) for i in range(3)], workers=1, desc="t", ordered=True)) == [0, 1, 4]


def test_close_process_group_destroys_the_group_and_is_a_no_op_without_one(tmp_path):
    import torch.distributed as dist  # here, not at the top: the spawned workers import this module

    close_process_group()  # no group: nothing happens, nothing raises
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    assert dist.is_initialized()
    close_process_group()
    assert not dist.is_initialized()
    close_process_group()
