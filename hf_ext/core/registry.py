"""The method registry: each method declares itself once, and everything else (Auto classes, CLI, cards, Spaces,
the contract test) is built from that declaration.

A method's subpackage calls [`register_method`] in its `__init__.py` and nowhere else, in the spirit of PEFT's
`register_peft_method`. Methods are of different *kinds* (a `PreTrainedModel`, a PEFT adapter, a scikit-learn
estimator, a numerics library with Hub datasets), so the spec names the kind and the contract test runs the checks
that make sense for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

MethodKind = Literal["model", "adapter", "estimator", "numerics"]
METHOD_KINDS: tuple[str, ...] = ("model", "adapter", "estimator", "numerics")

# Checks the shared contract runs for each kind (see tests/test_method_contract.py).
CONTRACT_CHECKS: dict[str, tuple[str, ...]] = {
    "model": ("config_roundtrip", "save_load_outputs", "integrity", "trainer_step", "card", "space", "cli_help"),
    "adapter": ("config_roundtrip", "save_load_outputs", "integrity", "trainer_step", "card", "space", "cli_help"),
    "estimator": (
        "config_roundtrip",
        "save_load_outputs",
        "integrity",
        "fit_changes_state",
        "card",
        "space",
        "cli_help",
    ),
    "numerics": ("config_roundtrip", "save_load_outputs", "integrity", "card", "space", "cli_help"),
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
        evaluate (`str`, *optional*): `"module:function"` of `hf-ext evaluate <name>`, `main(argv) -> dict`: the
            method's metrics of a trained artifact (`--model DIR`) on the user's test split (`--data SOURCE`),
            paired against `--baseline DIR` where the method has one.
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
        card_path (`str`, *optional*): the hand-written card sections; defaults to the packaged
            `model_cards/<name>.md`. A method outside this repository (an `hf_ext.methods` entry point, or one
            scaffolded from the template) points at its own file.
        space_path (`str`, *optional*): the Space folder (`app.py`, `README.md`, `requirements.txt`); defaults to
            the packaged `spaces/<name>/`.
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
    evaluate: str | None = None
    datasets: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    pipeline_tag: str | None = None
    library_name: str = "transformers"
    license: str = "apache-2.0"
    status: str = "implemented"
    extra_auto_classes: tuple[tuple[type | str, Mapping[str, type | str]], ...] = ()
    usage: str | None = None
    commands: Mapping[str, str] = field(default_factory=dict)
    card_path: str | None = None
    space_path: str | None = None

    def __post_init__(self):
        if not self.name.isidentifier() or self.name.lower() != self.name:
            raise RegistryError(f"MethodSpec.name must be a lowercase identifier, got {self.name!r}")
        if self.kind not in METHOD_KINDS:
            raise RegistryError(f"MethodSpec.kind must be one of {METHOD_KINDS}, got {self.kind!r}")
        for attr in (
            ("reproduce", "demo", "contract")
            + (("train",) if self.train else ())
            + (("evaluate",) if self.evaluate else ())
        ):
            if ":" not in getattr(self, attr):
                raise RegistryError(f"MethodSpec.{attr} must look like 'module:function', got {getattr(self, attr)!r}")
        for command, path in self.commands.items():
            if (
                command in ("reproduce", "train", "evaluate")
                or not command.replace("-", "_").isidentifier()
                or ":" not in path
            ):
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
        """The method's Space template (`spaces/<name>/`, shipped in the wheel as package data, or `space_path`)."""
        if self.space_path is not None:
            return Path(self.space_path)
        from .paths import asset

        return asset("spaces", self.name)

    @property
    def card_file(self) -> Path:
        """The hand-written card sections (`model_cards/<name>.md` as package data, or `card_path`)."""
        if self.card_path is not None:
            return Path(self.card_path)
        from .paths import asset

        return asset("model_cards", f"{self.name}.md")

    def load(self, entry: str) -> Callable[..., Any]:
        """The entry point `entry`: "reproduce", "train", "evaluate", "demo", "contract" or one of [`commands`]."""
        path = self.commands[entry] if entry in self.commands else getattr(self, entry, None)
        if path is None:
            raise RegistryError(f"method {self.name!r} has no {entry} entry point")
        return _load_object(path)


_REGISTRY: dict[str, MethodSpec] = {}


_ON_REGISTER: list[Callable[[MethodSpec], None]] = []


def on_register(callback: Callable[[MethodSpec], None]) -> None:
    """Calls `callback(spec)` for every method registered so far and every one registered later.

    The registry holds data only; what a registration *does* (Auto classes, the load guard; see
    [`hf_ext.core.auto`]) subscribes here, so this module imports nothing else from hf_ext at module level.
    """
    _ON_REGISTER.append(callback)
    for spec in list(_REGISTRY.values()):
        callback(spec)


def register_method(spec: MethodSpec) -> MethodSpec:
    """Registers a method. Call once, from the method subpackage's `__init__.py`.

    Classes may be given as `"module:attr"` paths, so that `import hf_ext` imports neither torch nor the method's
    own dependencies (`hf-ext list` stays instant). [`hf_ext.core.auto`] then registers each `(config, {Auto:
    model})` pair with transformers right after its modeling module is imported.
    """
    if not isinstance(spec, MethodSpec):
        raise RegistryError(f"register_method takes a MethodSpec, got {type(spec).__name__}")
    existing = _REGISTRY.get(spec.name)
    if existing is not None and existing != spec:
        raise RegistryError(f"method {spec.name!r} is already registered with a different spec")
    _REGISTRY[spec.name] = spec
    if existing is None:
        for callback in list(_ON_REGISTER):
            callback(spec)
    return spec


def get_method(name: str) -> MethodSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise RegistryError(f"unknown method {name!r}; registered methods: {known}") from None


def list_methods() -> list[MethodSpec]:
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]
