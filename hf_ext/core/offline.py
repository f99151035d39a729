"""Environment switches that keep every HF library and Flower offline and quiet (tests, CI, `make`).

Dependency-free on purpose: the test suite loads this file by path before importing anything that reads these
variables at import time (huggingface_hub reads HF_HUB_OFFLINE once).
"""

import os

HUB_KERNELS_ENV = "USE_HUB_KERNELS"

OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_EVALUATE_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_UPDATE_DOWNLOAD_COUNTS": "false",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    HUB_KERNELS_ENV: "0",
}

_TRUE = {"1", "ON", "YES", "TRUE"}


def set_offline_env() -> None:
    os.environ.update(OFFLINE_ENV)


def hub_kernels_off_when_offline() -> bool:
    """Sets `USE_HUB_KERNELS=0` when the Hub is offline (`HF_HUB_OFFLINE`) and the user has not set it; returns
    whether it did.

    transformers (5.25 here) turns Hub kernels on by default: the first `.train()` / `.eval()` of a model on a GPU
    resolves `kernels-community/*` repositories on the Hub, which offline raises a ValueError in the middle of a
    run (seen on an H200: FL-LLaMA's noise verdict stopped at its first training arm). On the CPU nothing is
    fetched, so CPU runs never showed it. The torch layers compute the same functions, so turning the kernels off
    changes speed, not the method. A value the user set is left alone.
    """
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE
    if offline and HUB_KERNELS_ENV not in os.environ:
        os.environ[HUB_KERNELS_ENV] = "0"
        return True
    return False
