"""The method registry: each method declares itself once, and everything else (Auto classes, CLI, cards, Spaces,
the contract test) is built from that declaration.

A method's subpackage calls [`register_method`] in its `__init__.py` and nowhere else, in the spirit of PEFT's
`register_peft_method`. Methods are of different *kinds* (a `PreTrainedModel`, a PEFT adapter, a scikit-learn
estimator, a numerics library with Hub datasets), so the spec names the kind and the contract test runs the checks
that make sense for it.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

MethodKind = Literal["model", "adapter", "estimator", "numerics"]
METHOD_KINDS: tuple[str, ...] = ("model", "adapter", "estimator", "numerics")

# Checks the shared contract runs for each kind (see tests/test_method_contract.py).
CONTRACT_CHECKS: dict[str, tuple[str, ...]] = {
    "model": ("config_roundtrip", "save_load_outputs", "trainer_step", "card", "space", "cli_help"),
    "adapter": ("config_roundtrip", "save_load_outputs", "trainer_step", "card", "space", "cli_help"),
    "estimator": ("config_roundtrip", "save_load_outputs", "fit_changes_state", "card", "space", "cli_help"),
    "numerics": ("config_roundtrip", "save_load_outputs", "card", "space", "cli_help"),
}


class RegistryError(ValueError):
    """Raised when a method declaration is malformed or a method name is unknown."""


def _load_object(path: str) -> Any:
    """Imports `"package.module:attr"` lazily, so `hf-ext list` does not import torch for every method."""
    module_name, _, attr = path.partition(":")
    if not attr:
        raise RegistryError(f"entry point {path!r} must look like 'package.module:attribute'")
    return getattr(importlib.import_module(module_name), attr)


@dataclass(frozen=True)
class MethodSpec:
    """Everything hf_ext needs to know about one method.

    Args:
        name (`str`): short lowercase id used by the CLI, the Space folder and the card file (`"orca"`).
        title (`str`): the paper's title.
        arxiv_id (`str`, *optional*): arXiv identifier, rendered as an `arxiv:` tag and a link on the card.
        kind (`str`): one of `"model"`, `"adapter"`, `"estimator"`, `"numerics"`; decides the contract checks.
        summary (`str`): one sentence on what the method is, in HF terms.
        tags (`tuple[str, ...]`): extra Hub tags.
        config_class (`type` or `str`, *optional*): the `PreTrainedConfig` (or dataclass) that holds the method's
            config, or its `"module:attr"` path when importing it would pull a heavy dependency into `import hf_ext`
            (H2Tune's config is a PEFT `LoraConfig`); [`resolved_config_class`] imports it on demand.
        auto_classes (`Mapping[str, type | str]`): Auto class name to model class (or its `"module:attr"` path),
            e.g. `{"AutoModel": "hf_ext.orca.modeling_orca:OrcaModel"}`; registered with transformers (see
            [`register_method`]).
        reproduce (`str`): `"module:function"` of the reproduce entry point, `main(argv) -> dict`.
        train (`str`, *optional*): `"module:function"` of the training entry point, `main(argv) -> Any`.
        demo (`str`): `"module:function"` returning a `gradio.Blocks` (what `spaces/<name>/app.py` re-exports).
        contract (`str`): `"module:function"` returning a [`~hf_ext.core.testing.ContractFixture`] for the
            contract test.
        datasets (`tuple[str, ...]`): dataset ids or names for the card metadata.
        metrics (`tuple[str, ...]`): metric names for the card metadata.
        pipeline_tag (`str`, *optional*): Hub pipeline tag.
        library_name (`str`): the library a Hub user loads the artifact with.
        license (`str`): licence of the released code and artifacts.
        status (`str`): one line for the README table.
        extra_auto_classes (`tuple[tuple[type, Mapping[str, type]], ...]`): further `(config class, {Auto class
            name: model class})` pairs, for methods that ship several artifacts (e.g. one model per party).
        usage (`str`, *optional*): Python snippet for the card's "How to use", with `{repo_id}` as placeholder;
            defaults to loading through the first Auto class.
        commands (`Mapping[str, str]`): further `hf-ext <name> <command>` scripts, command name to
            `"module:function"` taking `argv` (e.g. CodeBC's `score`).
    """

    name: str
    title: str
    kind: MethodKind
    summary: str
    reproduce: str
    demo: str
    contract: str
    arxiv_id: str | None = None
    tags: tuple[str, ...] = ()
    config_class: type | str | None = None
    auto_classes: Mapping[str, type | str] = field(default_factory=dict)
    train: str | None = None
    datasets: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    pipeline_tag: str | None = None
    library_name: str = "transformers"
    license: str = "apache-2.0"
    status: str = "implemented"
    extra_auto_classes: tuple[tuple[type | str, Mapping[str, type | str]], ...] = ()
    usage: str | None = None
    commands: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if not self.name.isidentifier() or self.name.lower() != self.name:
            raise RegistryError(f"MethodSpec.name must be a lowercase identifier, got {self.name!r}")
        if self.kind not in METHOD_KINDS:
            raise RegistryError(f"MethodSpec.kind must be one of {METHOD_KINDS}, got {self.kind!r}")
        for attr in ("reproduce", "demo", "contract") + (("train",) if self.train else ()):
            if ":" not in getattr(self, attr):
                raise RegistryError(f"MethodSpec.{attr} must look like 'module:function', got {getattr(self, attr)!r}")
        for command, path in self.commands.items():
            if command in ("reproduce", "train") or not command.replace("-", "_").isidentifier() or ":" not in path:
                raise RegistryError(f"MethodSpec.commands: bad entry {command!r} -> {path!r}")
        if self.kind in ("model", "adapter") and self.config_class is None:
            raise RegistryError(f"method {self.name!r} of kind {self.kind!r} needs a config_class")

    @property
    def resolved_config_class(self) -> type | None:
        """The config class, imported now if it was declared by path."""
        if isinstance(self.config_class, str):
            return _load_object(self.config_class)
        return self.config_class

    @property
    def model_type(self) -> str | None:
        return getattr(self.resolved_config_class, "model_type", None)

    @property
    def arxiv_url(self) -> str | None:
        return f"https://arxiv.org/abs/{self.arxiv_id}" if self.arxiv_id else None

    @property
    def contract_checks(self) -> tuple[str, ...]:
        return CONTRACT_CHECKS[self.kind]

    @property
    def space_dir(self) -> Path:
        """The method's Space template (`spaces/<name>/`), shipped in the wheel as package data."""
        from .paths import asset

        return asset("spaces", self.name)

    @property
    def card_file(self) -> Path:
        """The hand-written card sections (`model_cards/<name>.md`), shipped in the wheel as package data."""
        from .paths import asset

        return asset("model_cards", f"{self.name}.md")

    def load(self, entry: str) -> Callable[..., Any]:
        """The entry point `entry`: "reproduce", "train", "demo", "contract" or one of [`commands`]."""
        path = self.commands[entry] if entry in self.commands else getattr(self, entry, None)
        if path is None:
            raise RegistryError(f"method {self.name!r} has no {entry} entry point")
        return _load_object(path)


_REGISTRY: dict[str, MethodSpec] = {}


def _guard_from_pretrained(model_class: type) -> None:
    """Turns a corrupt, incomplete or foreign checkpoint into one clear error for every registered model class.

    `from_pretrained` first runs [`~hf_ext.core.hub.verify_checkpoint`] (config, safetensors sizes, the sha256 of
    every weight/table file, and `model_type` equal to the class's), then loads strictly: missing, unexpected or
    mismatched tensors raise [`~hf_ext.core.hub.CheckpointError`] instead of a load report over a partly random
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
        from .hub import CheckpointError, verify_checkpoint

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
        verify_checkpoint(target, model_type=model_type or None)
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
        from .hub import write_checksums

        result = original_save(self, save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True) and os.path.isdir(save_directory):
            write_checksums(save_directory)
        return result

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


def register_method(spec: MethodSpec) -> MethodSpec:
    """Registers a method and its Auto classes. Call once, from the method subpackage's `__init__.py`.

    Classes may be given as `"module:attr"` paths, so that `import hf_ext` imports neither torch nor the method's
    own dependencies (`hf-ext list` stays instant). Each `(config, {Auto: model})` pair is then registered with
    transformers right after its modeling module is imported, and every modeling module is imported as soon as
    transformers is: `AutoModel.from_pretrained(dir)` finds the model type whichever of `import hf_ext` and
    `import transformers` came first.
    """
    from .lazy import when_imported

    existing = _REGISTRY.get(spec.name)
    if existing is not None and existing != spec:
        raise RegistryError(f"method {spec.name!r} is already registered with a different spec")
    _REGISTRY[spec.name] = spec
    if existing is not None:
        return spec
    for config_class, auto_classes in _auto_pairs(spec):
        if not auto_classes:
            continue
        trigger = _module_of(next(iter(auto_classes.values())))
        when_imported(trigger, functools.partial(_register_auto, spec.name, config_class, auto_classes))
    when_imported("transformers", functools.partial(_import_modeling_modules, spec))
    return spec


def get_method(name: str) -> MethodSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise RegistryError(f"unknown method {name!r}; registered methods: {known}") from None


def list_methods() -> list[MethodSpec]:
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]
