"""FL-LLaMA tests run torch on one intra-op thread: on a shared 2-core machine the default thread pool spin-waits
and a tiny training step takes seconds instead of milliseconds."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
