"""How H2Tune registers with PEFT, and the version guard: fails loudly when the PEFT API it relies on changes (then
re-verify and move TESTED_PEFT_RANGE, or switch to the public registration)."""

from __future__ import annotations

import inspect

import peft
import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import hf_ext.h2tune  # noqa: F401  (registers the peft_type when peft is imported)
from hf_ext.h2tune import config as h2config
from hf_ext.h2tune.config import H2TUNE_PEFT_TYPE, TESTED_PEFT_RANGE, H2TuneConfig, register_peft_type


def test_peft_version_in_tested_range():
    assert Version(peft.__version__) in SpecifierSet(",".join(TESTED_PEFT_RANGE)), (
        f"peft {peft.__version__} is outside the range H2Tune was tested with {TESTED_PEFT_RANGE}: re-run "
        "tests/h2tune and check the tests below before widening it"
    )


def test_registration_uses_the_public_mapping_and_patches_no_peft_method():
    from peft.config import PeftConfigMixin

    assert peft.PEFT_TYPE_TO_CONFIG_MAPPING[H2TUNE_PEFT_TYPE] is H2TuneConfig
    assert register_peft_type() == h2config.REGISTERED_VIA == "PEFT_TYPE_TO_CONFIG_MAPPING"  # idempotent
    # nothing of PEFT is wrapped: from_peft_type is PEFT's own function
    assert PeftConfigMixin.from_peft_type.__func__.__module__ == "peft.config"
    assert not hasattr(PeftConfigMixin.from_peft_type.__func__, "_hf_ext_h2tune")


def test_peft_public_registration_still_refuses_a_lora_variant():
    """The version guard: PEFT's `register_peft_method` accepts only members of its closed PeftType enum (and a prefix
    of its own). When this test fails, PEFT accepts the call: `register_peft_type` then takes the public path, and
    this test and the expectation above are to be updated."""
    from peft.tuners.lora import LoraModel
    from peft.utils import register_peft_method

    with pytest.raises(ValueError, match="Unknown PEFT type"):
        register_peft_method(name="hf_ext_h2tune", config_cls=H2TuneConfig, model_cls=LoraModel, prefix="lora_")
    # the mapping is what PEFT's loaders read the config class from, and what register_peft_method fills
    assert "PEFT_TYPE_TO_CONFIG_MAPPING[peft_type]" in inspect.getsource(peft.config.PeftConfigMixin.from_peft_type)
    assert "PEFT_TYPE_TO_CONFIG_MAPPING[peft_type] = config_cls" in inspect.getsource(register_peft_method)
    src = inspect.getsource(peft.PeftModel.from_pretrained) + inspect.getsource(peft.PeftModel.load_adapter)
    assert src.count("PEFT_TYPE_TO_CONFIG_MAPPING[") >= 2 and ".from_pretrained(" in src  # our checksum hook


def test_lora_variant_and_custom_module_api_unchanged():
    from peft.tuners.lora.layer import LoraLayer, LoraVariant

    for name in ("init", "forward", "merge_safe", "merge_unsafe", "unmerge"):
        assert hasattr(LoraVariant, name), f"LoraVariant.{name} is gone"
    assert "is_lora_variant" in inspect.getsource(LoraLayer.resolve_lora_variant)
    assert "_custom_modules" in inspect.getsource(peft.tuners.lora.model.LoraModel._create_new_module)
    assert hasattr(peft.LoraConfig, "_register_custom_module")


def test_plain_peft_without_hf_ext_refuses_an_h2tune_adapter(tmp_path):
    """The saved peft_type is not PEFT's: a process that never imported hf_ext gets a KeyError, not plain LoRA."""
    import subprocess
    import sys

    from hf_ext.h2tune.testing import make_adapter, tiny_config

    make_adapter(tiny_config()).save_pretrained(tmp_path)
    code = (
        "import sys, peft\n"
        "from peft import PeftConfig\n"
        "try:\n"
        f"    PeftConfig.from_pretrained({str(tmp_path)!r})\n"
        "except KeyError as e:\n"
        "    print('refused', e); sys.exit(0)\n"
        "print('loaded'); sys.exit(1)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and H2TUNE_PEFT_TYPE in proc.stdout, proc.stdout + proc.stderr[-2000:]
