"""Configuration of the H2Tune triple-matrix LoRA adapter (arXiv 2507.22633), its PEFT registration and its
integrity checks.

**How H2Tune plugs into PEFT.** H2Tune is a LoRA *variant*: a [`~peft.LoraConfig`] subclass whose `use_h2tune` field
is tagged `is_lora_variant`, so PEFT's own LoRA tuner (`LoraModel`, `lora_` parameter names) builds the
[`~hf_ext.h2tune.layer.H2TuneVariant`] in every targeted layer, and whose `__post_init__` registers
[`~hf_ext.h2tune.layer.H2TuneLinear`] for `nn.Linear` and GPT-2's `Conv1D` through `_register_custom_module`
(PEFT's documented, experimental custom-layer hook; the mapping is not serialized, so it is redone on every
construction). An adapter folder stores `peft_type: "HF_EXT_H2TUNE"`, so PEFT without hf_ext refuses it
(`KeyError: 'HF_EXT_H2TUNE'`) instead of silently building an ordinary LoRA without the middle matrix (logits off by
up to 0.42).

**Registration and the version guard.** [`register_peft_type`] maps that `peft_type` to [`H2TuneConfig`] through
PEFT's public API where the installed PEFT offers one: it first calls `peft.utils.register_peft_method`. PEFT 0.21.2
(the tested range [`TESTED_PEFT_RANGE`]) has that function, but it accepts only names already in its closed `PeftType`
enum and a parameter prefix no other method uses, so it refuses a LoRA variant (`ValueError: Unknown PEFT type
HF_EXT_H2TUNE`). H2Tune then adds its one entry to `peft.PEFT_TYPE_TO_CONFIG_MAPPING` (exported at PEFT's top level;
the same dict `register_peft_method` fills) and changes nothing else: no PEFT function or method is wrapped or
replaced. [`REGISTERED_VIA`] records which path was taken; `tests/h2tune/test_hooks.py` fails when PEFT starts to
accept the public call or changes the mapping's role, and when the installed PEFT leaves the tested range.

**Integrity.** `save_pretrained` of an H2Tune adapter writes `hf_ext_checksums.json` (sha256 of its safetensors)
beside `adapter_config.json`; [`H2TuneConfig.from_pretrained`], which `PeftModel.from_pretrained` and `load_adapter`
call, verifies it before any weight is read: a corrupted, truncated or edited weights file, or one with a tensor
removed, is refused with [`~hf_ext.core.hub.CheckpointError`]; so is an adapter with no checksum file, unless the caller
opts out with `verify_checksums=False`. Not covered: a caller that hands PEFT a config object it loaded itself
(`PeftModel.from_pretrained(base, path, config=...)`, which `AutoPeftModelForCausalLM` does) skips this method, so
nothing is verified there; call [`verify_adapter`] first, or load through `PeftModel.from_pretrained(base, path)`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peft import LoraConfig

# PEFT versions this module was tested against (the version guard; see the module docstring).
TESTED_PEFT_RANGE = (">=0.21.2", "<0.22")

H2TUNE_MARKER = "use_h2tune"
# The `peft_type` written to adapter_config.json (see the module docstring).
H2TUNE_PEFT_TYPE = "HF_EXT_H2TUNE"
# How this process registered H2TUNE_PEFT_TYPE with PEFT: "register_peft_method" (PEFT's public registration) or
# "PEFT_TYPE_TO_CONFIG_MAPPING" (the public mapping, where the public call refuses a LoRA variant); None before.
REGISTERED_VIA: str | None = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _require_int(name: str, value: Any, low: int) -> None:
    if not _is_int(value):
        raise TypeError(f"H2TuneConfig.{name} must be an integer >= {low}, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"H2TuneConfig.{name} must be an integer >= {low}, got {value!r}")


def _require_number(name: str, value: Any, *, low: float, high: float | None = None, low_open: bool = False) -> None:
    bound = f"{'>' if low_open else '>='} {low:g}" + (f" and < {high:g}" if high is not None else "")
    if not _is_number(value):
        raise TypeError(f"H2TuneConfig.{name} must be a finite number {bound}, got {type(value).__name__} {value!r}")
    ok = math.isfinite(value) and (value > low if low_open else value >= low) and (high is None or value < high)
    if not ok:
        raise ValueError(f"H2TuneConfig.{name} must be a finite number {bound}, got {value!r}")


def _require_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"H2TuneConfig.{name} must be True or False, got {type(value).__name__} {value!r}")


def _require_str_or_list(name: str, value: Any, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, str) or (
        isinstance(value, (list, tuple, set)) and all(isinstance(v, str) for v in value) and len(value) > 0
    ):
        return
    none = " or None" if allow_none else ""
    raise TypeError(
        f"H2TuneConfig.{name} must be a module name, a regex string or a non-empty list of names{none}, "
        f"got {type(value).__name__} {value!r}"
    )


@dataclass
class H2TuneConfig(LoraConfig):
    """Config of a client's H2Tune adapter: ΔW = (α/r)·B(T+I)A with T an r×r block picked out of a shared R×R
    middle matrix by a top-k (k = r²) of a learnable score matrix S.

    Paper: [H2Tune: Federated Foundation Model Fine-Tuning with Hybrid Heterogeneity](https://arxiv.org/abs/2507.22633).

    Args:
        r (`int`, defaults to 8): the client's LoRA rank r_c (its resource budget; k = r_c² entries of the shared
            matrix are trained).
        global_rank (`int`, defaults to 16): R = max_c r_c, the side of the shared middle matrix (`lora_lT`) and of
            the score matrix S (`lora_S`). Must be ≥ every layer's rank.
        sparsify (`bool`, defaults to `True`): pick T by top-k of S. `False` is the "no sparsification" ablation:
            no learned selection, T is the fixed leading r×r block of the shared matrix (the whole R×R matrix,
            k = R², when r == R; the spec's ablation, extended to smaller ranks).
        use_h2tune (`bool`, defaults to `True`): the LoRA-variant switch PEFT dispatches on (must be `True`).
        lora_alpha (`int`, defaults to 16) and lora_dropout (`float`, defaults to 0.05): the paper's code defaults.
        target_modules (defaults to `"all-linear"`): every linear layer of the decoder except the output head.
    """

    r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: Any = "all-linear"
    global_rank: int = field(default=16, metadata={"help": "R: side of the shared middle matrix and of S."})
    sparsify: bool = field(
        default=True, metadata={"help": "Top-k selection of T; False = fixed leading block (ablation)."}
    )
    use_h2tune: bool = field(default=True, metadata={"is_lora_variant": True, "help": "H2Tune LoRA variant switch."})

    def __post_init__(self):
        self.check()
        super().__post_init__()
        ranks = [self.r, *(self.rank_pattern or {}).values()]
        if self.global_rank < max(ranks):
            raise ValueError(f"H2TuneConfig.global_rank R={self.global_rank} must be >= every LoRA rank, got {ranks}")
        from torch import nn
        from transformers.pytorch_utils import Conv1D

        from .layer import H2TuneLinear

        self._register_custom_module({nn.Linear: H2TuneLinear, Conv1D: H2TuneLinear})

    def check(self) -> None:
        """Types and ranges of every field H2Tune reads, naming the field (`TypeError` for a wrong type, such as a
        string or `None` where a number is needed; `ValueError` for a value out of range). Runs at construction and
        therefore on every load (`from_pretrained`, `from_dict`, `PeftModel.from_pretrained`)."""
        _require_int("r", self.r, 1)
        _require_int("global_rank", self.global_rank, 1)
        _require_number("lora_alpha", self.lora_alpha, low=0.0, low_open=True)
        _require_number("lora_dropout", self.lora_dropout, low=0.0, high=1.0)
        for name in ("sparsify", "use_rslora", "fan_in_fan_out", "inference_mode", "use_dora"):
            _require_bool(name, getattr(self, name))
        _require_bool(H2TUNE_MARKER, self.use_h2tune)
        if not self.use_h2tune:
            raise ValueError(
                f"H2TuneConfig.{H2TUNE_MARKER} must be True: without it PEFT builds plain LoRA (use LoraConfig)"
            )
        if self.use_dora:
            raise ValueError("H2TuneConfig.use_dora must be False: H2Tune does not combine with DoRA")
        _require_str_or_list("target_modules", self.target_modules, allow_none=False)
        for name, kind in (("rank_pattern", "int"), ("alpha_pattern", "number")):
            pattern = getattr(self, name)
            if pattern is None:
                continue
            if not isinstance(pattern, dict):
                raise TypeError(f"H2TuneConfig.{name} must be a dict of module name -> {kind}, got {pattern!r}")
            for key, value in pattern.items():
                if not isinstance(key, str):
                    raise TypeError(f"H2TuneConfig.{name} keys must be module names (str), got {key!r}")
                if kind == "int":
                    _require_int(f"{name}[{key!r}]", value, 1)
                else:
                    _require_number(f"{name}[{key!r}]", value, low=0.0, low_open=True)
        if not isinstance(self.init_lora_weights, (bool, str)):
            raise TypeError(
                f"H2TuneConfig.init_lora_weights must be a bool or a PEFT init name, got {self.init_lora_weights!r}"
            )

    def save_pretrained(self, save_directory: str, **kwargs) -> None:
        """PEFT's save with `peft_type` set to [`H2TUNE_PEFT_TYPE`] in `adapter_config.json` (see above), then
        `hf_ext_checksums.json` for the folder's safetensors. `PeftModel.save_pretrained` writes the weights before
        the config, so the checksums cover the adapter just saved."""
        import json

        from peft.utils import CONFIG_NAME

        from hf_ext.core.hub import write_checksums

        super().save_pretrained(save_directory, **kwargs)
        path = os.path.join(save_directory, CONFIG_NAME)
        with open(path) as f:
            data = json.load(f)
        data["peft_type"] = H2TUNE_PEFT_TYPE
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(json.dumps(data, indent=2, sort_keys=True))
        os.replace(tmp, path)
        write_checksums(save_directory)

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str,
        subfolder: str | None = None,
        *,
        verify_checksums: bool = True,
        **kwargs,
    ) -> H2TuneConfig:
        """Loads an adapter's config after checking the adapter folder's integrity ([`verify_adapter`]).

        `PeftModel.from_pretrained(base, path)` and `PeftModel.load_adapter(path, name)` reach this method through
        PEFT's config mapping, so plain PEFT loading verifies too.

        Args:
            pretrained_model_name_or_path (`str`): a local adapter folder or a Hub repo id.
            subfolder (`str`, *optional*): the adapter's folder inside it.
            verify_checksums (`bool`, defaults to `True`): `False` loads an adapter whose `hf_ext_checksums.json` is
                missing or does not match, unchecked (an explicit opt-out; e.g.
                `PeftModel.from_pretrained(base, path, verify_checksums=False)`).
        """
        if verify_checksums:
            hub_kwargs = {k: kwargs[k] for k in ("revision", "cache_dir", "token", "local_files_only") if k in kwargs}
            verify_adapter(pretrained_model_name_or_path, subfolder, **hub_kwargs)
        return super().from_pretrained(pretrained_model_name_or_path, subfolder=subfolder, **kwargs)

    @classmethod
    def from_dict(cls, config_dict: dict) -> H2TuneConfig:
        """Inverse of `to_dict()` (keys that are not fields, such as PEFT's bookkeeping, are ignored); the fields are
        checked as at construction."""
        if not isinstance(config_dict, dict):
            raise TypeError(f"H2TuneConfig.from_dict needs a dict, got {type(config_dict).__name__}")
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        return cls(**{k: v for k, v in config_dict.items() if k in names and k != "peft_type"})


ADAPTER_WEIGHTS = "adapter_model.safetensors"


def verify_adapter(path: str | os.PathLike, subfolder: str | None = None, **hub_kwargs) -> Path:
    """Checks an H2Tune adapter folder (local, or on the Hub) against its `hf_ext_checksums.json`.

    Raises [`~hf_ext.core.hub.CheckpointError`] when the checksum file is missing, does not list the adapter weights,
    or any listed file is missing or has another sha256 (a corrupted or truncated file, a tensor removed or added).
    For a Hub repo the checksum file and the files it lists are fetched into the cache (the same files PEFT then
    loads). Returns the local folder that was checked.
    """
    from hf_ext.core.integrity import CHECKSUMS_FILE, CheckpointError, MissingChecksumsError, verify_checksums

    local = Path(path) / subfolder if subfolder else Path(path)
    if not local.is_dir():
        local = _fetch_adapter(str(path), subfolder, **hub_kwargs)
    manifest = local / CHECKSUMS_FILE
    if not manifest.is_file():
        raise MissingChecksumsError(
            f"H2Tune adapter {local} has no {CHECKSUMS_FILE}, so its integrity cannot be checked: re-save it with "
            "hf_ext (save_pretrained writes it), or load it unchecked with verify_checksums=False"
        )
    verify_checksums(local)  # raises naming the first bad or missing file
    import json

    listed = json.loads(manifest.read_text())["files"]
    if (local / ADAPTER_WEIGHTS).is_file() and ADAPTER_WEIGHTS not in listed:
        raise CheckpointError(f"{manifest} does not list {ADAPTER_WEIGHTS}: the checksums are not this adapter's")
    return local


def _fetch_adapter(repo_id: str, subfolder: str | None, **hub_kwargs) -> Path:
    """The Hub adapter's checksum file and the files it lists, from the cache (downloaded if needed)."""
    import json

    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    from hf_ext.core.integrity import CHECKSUMS_FILE, MissingChecksumsError

    try:
        manifest = Path(hf_hub_download(repo_id, CHECKSUMS_FILE, subfolder=subfolder, **hub_kwargs))
    except EntryNotFoundError:
        where = f"{repo_id}/{subfolder}" if subfolder else repo_id
        raise MissingChecksumsError(
            f"H2Tune adapter {where} has no {CHECKSUMS_FILE}, so its integrity cannot be checked: push it with "
            "hf_ext, or load it unchecked with verify_checksums=False"
        ) from None
    for rel in json.loads(manifest.read_text()).get("files", {}):
        hf_hub_download(repo_id, rel, subfolder=subfolder, **hub_kwargs)
    return manifest.parent


def register_peft_type() -> str:
    """Makes PEFT map `peft_type` [`H2TUNE_PEFT_TYPE`] to [`H2TuneConfig`] (idempotent); returns how (see the module
    docstring): through `peft.utils.register_peft_method` where PEFT accepts the call, else the one entry in
    `peft.PEFT_TYPE_TO_CONFIG_MAPPING`. Warns when the installed PEFT is outside [`TESTED_PEFT_RANGE`]."""
    global REGISTERED_VIA
    import peft

    mapping = peft.PEFT_TYPE_TO_CONFIG_MAPPING
    if mapping.get(H2TUNE_PEFT_TYPE) is H2TuneConfig and REGISTERED_VIA is not None:
        return REGISTERED_VIA
    if not peft_version_is_tested():
        import warnings

        warnings.warn(
            f"hf_ext.h2tune was tested with peft{','.join(TESTED_PEFT_RANGE)}, found {peft.__version__}; the H2Tune "
            "adapter builds on PEFT's LoRA variant and custom-module hooks (LoraVariant, _register_custom_module)",
            stacklevel=2,
        )
    register = getattr(getattr(peft, "utils", None), "register_peft_method", None)
    if register is not None:
        from peft.tuners.lora import LoraModel

        try:
            register(name=H2TUNE_PEFT_TYPE.lower(), config_cls=H2TuneConfig, model_cls=LoraModel, prefix="lora_")
        except (ValueError, KeyError):
            pass  # PEFT refuses a type outside its PeftType enum, or LoRA's shared "lora_" prefix
        else:
            REGISTERED_VIA = "register_peft_method"
            return REGISTERED_VIA
    mapping[H2TUNE_PEFT_TYPE] = H2TuneConfig
    REGISTERED_VIA = "PEFT_TYPE_TO_CONFIG_MAPPING"
    return REGISTERED_VIA


def peft_version_is_tested() -> bool:
    """Whether the installed PEFT lies in [`TESTED_PEFT_RANGE`]."""
    import peft
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return Version(peft.__version__) in SpecifierSet(",".join(TESTED_PEFT_RANGE))


__all__ = [
    "H2TUNE_PEFT_TYPE",
    "TESTED_PEFT_RANGE",
    "H2TuneConfig",
    "peft_version_is_tested",
    "register_peft_type",
    "verify_adapter",
]
