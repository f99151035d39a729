"""What a registration does: Auto classes with transformers and the load/save guard of every registered model class.

[`hf_ext.core.registry`] holds data only; this module subscribes to it ([`~hf_ext.core.registry.on_register`]) and,
for each method, registers its `(config, {Auto class: model class})` pairs with transformers as soon as the
modeling module is imported, imports every modeling module as soon as transformers is, and wraps each registered
model class's `from_pretrained` / `save_pretrained`:

- `from_pretrained` verifies the checkpoint first ([`~hf_ext.core.integrity.verify_checkpoint`]: config,
  safetensors sizes, the **mandatory** sha256 checksums, `model_type`), then loads strictly.
- `save_pretrained` is atomic: the model is written into a temporary folder (holding a copy of what the target
  folder already had) that is swapped into place in one exchange, with the checksum file, so a kill at any instant
  leaves the previous complete artifact or the new one.

`hf_ext/__init__.py` imports this module before any method registers.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .integrity import CheckpointError, atomic_write_dir, verify_checkpoint
from .lazy import when_imported
from .registry import RegistryError, _load_object, on_register

if TYPE_CHECKING:
    from .registry import MethodSpec


def _copy_existing(src: Path, dst: Path) -> None:
    """Copies what an existing artifact folder holds into the (empty) temporary folder of its atomic re-save.

    Real copies, never hard links: the save then overwrites files in place, which must not touch the old artifact.
    """
    if not src.is_dir():
        return
    for item in src.iterdir():
        if item.name.startswith("."):
            continue
        if item.is_dir() and not item.is_symlink():
            shutil.copytree(item, dst / item.name, symlinks=True)
        else:
            shutil.copy2(item, dst / item.name, follow_symlinks=False)


def _guard_from_pretrained(model_class: type) -> None:
    """Turns a corrupt, incomplete or foreign checkpoint into one clear error for every registered model class.

    `from_pretrained` first runs [`~hf_ext.core.integrity.verify_checkpoint`] (config, safetensors sizes, the sha256 of
    every weight/table file, and `model_type` equal to the class's), then loads strictly: missing, unexpected or
    mismatched tensors raise [`~hf_ext.core.integrity.CheckpointError`] instead of a load report over a partly random
    model (`hf_ext_strict=False` restores transformers' lenient report). `save_pretrained` writes the checksum file.

    The modeling files stay self-contained (they are copied to the Hub as remote code and may not import hf_ext),
    so the guard is attached here, once, instead of being repeated in each method's modeling file.
    """
    if getattr(model_class, "_hf_ext_guarded", False) or "from_pretrained" not in dir(model_class):
        return
    original = model_class.from_pretrained.__func__
    original_save = model_class.save_pretrained

    @functools.wraps(original)
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        strict = kwargs.pop("hf_ext_strict", True)
        given = kwargs.get("config")
        own_config = given is not None and not isinstance(given, (str, os.PathLike))
        model_type = None if own_config else getattr(cls.config_class, "model_type", None)
        # a part saved in a subfolder of a local artifact (Proto-EVFL's parties/party-<k>/, FL-LLaMA's client/) is
        # checked there, not against the root's config
        subfolder = kwargs.get("subfolder")
        local = os.path.isdir(pretrained_model_name_or_path)
        target = (
            os.path.join(pretrained_model_name_or_path, subfolder)
            if subfolder and local
            else pretrained_model_name_or_path
        )
        require_checksums = kwargs.pop("hf_ext_verify_checksums", True)
        verify_checkpoint(target, model_type=model_type or None, require_checksums=require_checksums)
        if not strict:
            return original(cls, pretrained_model_name_or_path, *args, **kwargs)
        wants_info = kwargs.pop("output_loading_info", False)
        model, info = original(cls, pretrained_model_name_or_path, *args, output_loading_info=True, **kwargs)
        problems = {
            k: sorted(map(str, info.get(k) or ()))
            for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")
        }
        problems = {k: v for k, v in problems.items() if v}
        if problems:
            detail = "; ".join(
                f"{k.replace('_', ' ')}: {v[:8]}{' ...' if len(v) > 8 else ''}" for k, v in problems.items()
            )
            raise CheckpointError(
                f"{pretrained_model_name_or_path} does not match {cls.__name__}: {detail} "
                f"(pass hf_ext_strict=False to load anyway with transformers' load report)"
            )
        return (model, info) if wants_info else model

    @functools.wraps(original_save)
    def save_pretrained(self, save_directory, *args, **kwargs):
        if not kwargs.get("is_main_process", True) or os.path.isfile(save_directory) or kwargs.get("push_to_hub"):
            return original_save(self, save_directory, *args, **kwargs)
        target = Path(save_directory)

        def write(tmp: Path) -> None:
            _copy_existing(target, tmp)
            original_save(self, tmp, *args, **kwargs)

        atomic_write_dir(target, write)  # writes the checksum file of the finished folder
        return None

    model_class.from_pretrained = classmethod(from_pretrained)
    model_class.save_pretrained = save_pretrained
    model_class._hf_ext_guarded = True


def _resolve(obj: type | str) -> type:
    return _load_object(obj) if isinstance(obj, str) else obj


def _register_auto(method: str, config_class: type | str, auto_classes: Mapping[str, type | str]) -> None:
    import transformers

    from .validation import guard_config_keys

    config_class = _resolve(config_class)
    transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    guard_config_keys(config_class)  # unknown keys raise in code, warn when loading a saved config.json
    # Hub artifacts carry the modeling code: a pushed repo loads with trust_remote_code=True without hf_ext.
    config_class.register_for_auto_class()
    for auto_name, model_class in auto_classes.items():
        model_class = _resolve(model_class)
        auto_class = getattr(transformers, auto_name, None)
        if auto_class is None:
            raise RegistryError(f"{method}: transformers has no Auto class {auto_name!r}")
        auto_class.register(config_class, model_class, exist_ok=True)
        model_class.register_for_auto_class(auto_name)
        _guard_from_pretrained(model_class)


def _module_of(obj: type | str) -> str:
    return obj.partition(":")[0] if isinstance(obj, str) else obj.__module__


def _auto_pairs(spec: MethodSpec) -> list[tuple[type | str, Mapping[str, type | str]]]:
    pairs = [(spec.config_class, spec.auto_classes)] if spec.config_class is not None and spec.auto_classes else []
    return [*pairs, *spec.extra_auto_classes]


def _import_modeling_modules(spec: MethodSpec) -> None:
    for _, auto_classes in _auto_pairs(spec):
        for model_class in auto_classes.values():
            importlib.import_module(_module_of(model_class))


def _install(spec: MethodSpec) -> None:
    for config_class, auto_classes in _auto_pairs(spec):
        if not auto_classes:
            continue
        trigger = _module_of(next(iter(auto_classes.values())))
        when_imported(trigger, functools.partial(_register_auto, spec.name, config_class, auto_classes))
    when_imported("transformers", functools.partial(_import_modeling_modules, spec))


on_register(_install)

__all__ = ["CheckpointError"]
