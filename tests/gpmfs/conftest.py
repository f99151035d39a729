"""Shared fixtures of the GPMFS tests: offline, single-threaded BLAS (the 2-core machine is shared), small data."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from hf_ext.core.testing import set_offline_env

set_offline_env()  # at import: huggingface_hub reads HF_HUB_OFFLINE when it is first imported


@pytest.fixture(autouse=True, scope="session")
def _single_thread_blas():
    import scipy.linalg  # noqa: F401 - load both OpenBLAS copies before limiting them

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def planted():
    from hf_ext.gpmfs.planted import make_planted

    return make_planted(seed=0)


@pytest.fixture(scope="session")
def yeast():
    from hf_ext.gpmfs.data import load_yeast

    return load_yeast()


@pytest.fixture(scope="session")
def small():
    """120 x 12 planted data with 3 labels: fast enough for many fits."""
    from hf_ext.gpmfs.planted import make_planted

    return make_planted(n_samples=120, n_features=12, n_shared=2, n_labels=3, n_private=2, seed=1)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
