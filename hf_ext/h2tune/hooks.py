"""The one PEFT hook H2Tune relies on, so plain `PeftModel.from_pretrained(base, dir)` restores an H2Tune adapter.

An H2Tune adapter is saved with `peft_type: "HF_EXT_H2TUNE"` (PEFT's `PeftType` enum is closed), so PEFT without
hf_ext refuses it (`KeyError: 'HF_EXT_H2TUNE'` from `PEFT_TYPE_TO_CONFIG_MAPPING`) instead of silently loading vanilla
LoRA. With hf_ext, that key maps to [`~hf_ext.h2tune.config.H2TuneConfig`], and every config-loading path of PEFT
0.21 (`PeftModel.from_pretrained`, `load_adapter`, `PeftConfig.from_pretrained`) ends in
`PeftConfigMixin.from_peft_type(**kwargs)`; we wrap it so that kwargs carrying `use_h2tune: true` (the new marker, or
the `LORA` of adapters saved before it) build an `H2TuneConfig` (which re-registers the H2Tune layers). Everything
else is untouched.

`tests/h2tune/test_hooks.py` fails loudly when this hook point or the PEFT version changes.
"""

from __future__ import annotations

import functools
import warnings

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .config import H2TUNE_MARKER, H2TUNE_PEFT_TYPE, TESTED_PEFT_RANGE


def peft_version_is_tested() -> bool:
    import peft

    return Version(peft.__version__) in SpecifierSet(",".join(TESTED_PEFT_RANGE))


def install_config_hook() -> None:
    """Wraps `PeftConfigMixin.from_peft_type` once (idempotent)."""
    from peft.config import PeftConfigMixin
    from peft.mapping import PEFT_TYPE_TO_CONFIG_MAPPING

    from .config import H2TuneConfig

    PEFT_TYPE_TO_CONFIG_MAPPING.setdefault(H2TUNE_PEFT_TYPE, H2TuneConfig)
    original = PeftConfigMixin.__dict__["from_peft_type"]
    if getattr(original.__func__, "_hf_ext_h2tune", False):
        return
    if not peft_version_is_tested():
        import peft

        warnings.warn(
            f"hf_ext.h2tune was tested with peft{','.join(TESTED_PEFT_RANGE)}, found {peft.__version__}; "
            "the H2Tune adapter relies on private PEFT API (LoraVariant, _register_custom_module, from_peft_type)",
            stacklevel=2,
        )

    @functools.wraps(original.__func__)
    def from_peft_type(cls, **kwargs):
        peft_type = str(kwargs.get("peft_type", "LORA")).upper()
        if kwargs.get(H2TUNE_MARKER) and (peft_type.endswith("LORA") or peft_type == H2TUNE_PEFT_TYPE):
            kwargs = {k: v for k, v in kwargs.items() if k != "peft_type"}  # else PEFT maps LORA -> LoraConfig
            return original.__func__(H2TuneConfig, **kwargs)
        return original.__func__(cls, **kwargs)

    from_peft_type._hf_ext_h2tune = True
    from_peft_type._hf_ext_original = original.__func__
    PeftConfigMixin.from_peft_type = classmethod(from_peft_type)
