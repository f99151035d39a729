"""`hf-ext reproduce codebc` runs at a fixed torch thread count (the core's one thread, or
`$HF_EXT_REPRODUCE_THREADS`): the committed quick results were made at 1, and at 2 threads the same code gives other
last digits (BLEU 13.50 vs 13.43, a probe AUROC 0.39 vs 0.58, measured), so a rerun on a machine with more cores must
not inherit its default."""

from __future__ import annotations

import pytest
import torch

from hf_ext.codebc import reproduce
from hf_ext.core import cli


class _Stop(Exception):
    pass


@pytest.mark.parametrize(("env", "want"), [(None, 1), ("2", 2)])
def test_the_run_uses_the_requested_thread_count_and_restores_it(monkeypatch, tmp_path, env, want):
    seen = []

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise _Stop

    monkeypatch.setattr(reproduce, "run", spy)
    monkeypatch.setattr(reproduce, "toolchain_problem", lambda: None)
    monkeypatch.setattr(cli, "require_method", lambda spec: None)
    if env is None:
        monkeypatch.delenv("HF_EXT_REPRODUCE_THREADS", raising=False)
    else:
        monkeypatch.setenv("HF_EXT_REPRODUCE_THREADS", env)
    before = torch.get_num_threads()
    torch.set_num_threads(3)  # a machine default other than both
    try:
        assert cli.main(["reproduce", "codebc", "--out", str(tmp_path)]) == 1  # the spy's stop counts as a failure
        assert seen == [want]
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
