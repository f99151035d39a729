"""`hf_ext.core.parallel`: worker pools and the clean end of a distributed run."""

from __future__ import annotations

import torch.distributed as dist

from hf_ext.core.parallel import close_process_group, run_jobs


def _square(x: int) -> int:
    return x * x


def test_run_jobs_in_process_and_in_workers_give_the_same_results():
    jobs = [(i,) for i in range(5)]
    assert sorted(run_jobs(_square, jobs, workers=1, desc="t")) == [0, 1, 4, 9, 16]
    assert sorted(run_jobs(_square, jobs, workers=2, desc="t")) == [0, 1, 4, 9, 16]


def test_close_process_group_destroys_the_group_and_is_a_no_op_without_one(tmp_path):
    close_process_group()  # no group: nothing happens, nothing raises
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    assert dist.is_initialized()
    close_process_group()
    assert not dist.is_initialized()
    close_process_group()
