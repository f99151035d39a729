"""Environment switches that keep every HF library and Flower offline and quiet (tests, CI, `make`).

Dependency-free on purpose: the test suite loads this file by path before importing anything that reads these
variables at import time (huggingface_hub reads HF_HUB_OFFLINE once).
"""

import os

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
}


def set_offline_env() -> None:
    os.environ.update(OFFLINE_ENV)
