"""Fails loudly when the private PEFT hooks H2Tune relies on change (then re-verify and move TESTED_PEFT_RANGE)."""

from __future__ import annotations

import inspect

import peft
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import hf_ext.h2tune  # noqa: F401
from hf_ext.h2tune.config import TESTED_PEFT_RANGE


def test_peft_version_in_tested_range():
    assert Version(peft.__version__) in SpecifierSet(",".join(TESTED_PEFT_RANGE)), (
        f"peft {peft.__version__} is outside the range H2Tune was tested with {TESTED_PEFT_RANGE}: re-run "
        "tests/h2tune and check the hooks below before widening it"
    )


def test_from_peft_type_hook_is_installed_and_still_the_dispatch_point():
    from peft.config import PeftConfigMixin

    wrapper = PeftConfigMixin.__dict__["from_peft_type"].__func__
    assert getattr(wrapper, "_hf_ext_h2tune", False), "H2Tune config hook not installed"
    original = inspect.getsource(wrapper._hf_ext_original)
    assert "PEFT_TYPE_TO_CONFIG_MAPPING[peft_type]" in original, "PEFT changed how from_peft_type picks the class"
    # every loading path must still go through from_peft_type
    assert "from_peft_type" in inspect.getsource(PeftConfigMixin.from_pretrained)


def test_lora_variant_and_custom_module_api_unchanged():
    from peft.tuners.lora.layer import LoraLayer, LoraVariant

    for name in ("init", "forward", "merge_safe", "merge_unsafe", "unmerge"):
        assert hasattr(LoraVariant, name), f"LoraVariant.{name} is gone"
    assert "is_lora_variant" in inspect.getsource(LoraLayer.resolve_lora_variant)
    assert "_custom_modules" in inspect.getsource(peft.tuners.lora.model.LoraModel._create_new_module)
    assert hasattr(peft.LoraConfig, "_register_custom_module")
