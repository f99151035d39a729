"""Test-wide set-up: offline, no telemetry, a private HF_HOME, seeded RNGs. Runs before any HF library import."""

import importlib.util
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

# Load the offline switches by path: importing anything under `hf_ext` first runs `hf_ext/__init__`, which imports
# transformers and huggingface_hub, and those read HF_HUB_OFFLINE once, at import time.
_spec = importlib.util.spec_from_file_location("_hf_ext_offline", Path(__file__).parents[1] / "hf_ext/core/offline.py")
_offline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_offline)
os.environ.update(_offline.OFFLINE_ENV)
# A private HF_HOME / FLWR_HOME unless the caller chose one. Under pytest-xdist the workers inherit the controller's
# environment, so a home the controller made is replaced by one per worker: two workers never share a Hub cache or a
# Flower home (a test that counts what a cache holds sees only its own worker's writes).
_MADE_HERE: list[str] = []  # removed by this process when its session ends (pytest_unconfigure)
for _var, _prefix in (("HF_HOME", "hf_ext_test_hf_home_"), ("FLWR_HOME", "hf_ext_test_flwr_home_")):
    _made = os.environ.get(f"_HF_EXT_TEST_MADE_{_var}")
    if _var not in os.environ or (os.environ.get("PYTEST_XDIST_WORKER") and _made == os.environ[_var]):
        os.environ[_var] = tempfile.mkdtemp(prefix=_prefix)
        os.environ[f"_HF_EXT_TEST_MADE_{_var}"] = os.environ[_var]
        _MADE_HERE.append(os.environ[_var])

# Test infrastructure (the mock Hub, the browser driver, each Space's browser checks) lives in tests/helpers, not in
# the wheel; test modules import it as `helpers.*`.
sys.path.insert(0, str(Path(__file__).parent))

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    import torch

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session", autouse=True)
def _quiet_progress_bars():
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    yield


def pytest_unconfigure(config):
    """Removes the private homes this process made (an xdist worker ends without running atexit handlers)."""
    for path in _MADE_HERE:
        shutil.rmtree(path, ignore_errors=True)
