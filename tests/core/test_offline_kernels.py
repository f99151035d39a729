"""`hub_kernels_off_when_offline`: offline, transformers' default Hub kernels are turned off before any model loads.

On a GPU, a model loaded with transformers' default (`use_kernels=True`) resolves `kernels-community/*` on the Hub at
its first `.train()`; offline that raised in the middle of FL-LLaMA's noise verdict on an H200. These tests pin what
the switch does on the CPU: the default really is on, and the switch turns it off for models loaded afterwards.
"""

import importlib.util

import pytest

from hf_ext.core.offline import HUB_KERNELS_ENV, OFFLINE_ENV, hub_kernels_off_when_offline


@pytest.mark.parametrize(
    ("offline", "preset", "expected", "changed"),
    [
        ("1", None, "0", True),  # offline, unset: turned off
        ("TRUE", None, "0", True),
        ("1", "1", "1", False),  # the user's choice stands
        ("0", None, None, False),  # online: transformers' default stays
        (None, None, None, False),
    ],
)
def test_switch(monkeypatch, offline, preset, expected, changed):
    for name, value in (("HF_HUB_OFFLINE", offline), (HUB_KERNELS_ENV, preset)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert hub_kernels_off_when_offline() is changed
    import os

    assert os.environ.get(HUB_KERNELS_ENV) == expected


def test_offline_env_of_the_tests_has_it():
    assert OFFLINE_ENV[HUB_KERNELS_ENV] == "0"


def test_import_of_hf_ext_applies_it():
    import subprocess
    import sys

    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    code = "import os, hf_ext; print(os.environ.get('USE_HUB_KERNELS'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


@pytest.mark.skipif(importlib.util.find_spec("kernels") is None, reason="the `kernels` package is not installed")
def test_models_loaded_after_the_switch_do_not_use_hub_kernels(monkeypatch, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(HUB_KERNELS_ENV, raising=False)
    assert LlamaForCausalLM.from_pretrained(tmp_path).use_kernels  # transformers' default: on
    assert hub_kernels_off_when_offline()
    assert not LlamaForCausalLM.from_pretrained(tmp_path).use_kernels
