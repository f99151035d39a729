"""One run-config parser for every federated method (part of [`hf_ext.core.federated`]).

A Flower run config is flat: `str -> bool | int | float | str` (from the app's `pyproject.toml`, `flwr run
--run-config` overrides, or a runner's `run_config=`). A method declares its knobs **once**, as a frozen dataclass
that inherits [`FlowerRunConfig`]; the mixin parses a run config into it and writes it back:

```python
@dataclass(frozen=True)
class MyRunConfig(FlowerRunConfig):
    rounds: int = field(default=3, metadata={"run_config": "num-server-rounds"})
    learning_rate: float = field(default=1e-3, metadata={"run_config": "lr"})
    local_steps: int = 20                      # key "local-steps"
    note: str = field(default="", metadata={"run_config": None})  # not a run-config key


run = MyRunConfig.from_run_config(context.run_config)
MyRunConfig.from_run_config(run.to_run_config()) == run  # True
```

Rules (the same for every method):

* **Keys.** A field's key is its name with `-` for `_`, unless `metadata={"run_config": "other-key"}` renames it;
  `metadata={"run_config": None}` keeps a field out of the run config. A field whose type is itself a dataclass is a
  *section*: its fields are flattened into the same key space (`metadata={"run_config_keys": {"seed": "data-seed"}}`
  on the section field renames its sub-keys).
* **Unknown keys are refused.** A key the dataclass does not declare raises `ValueError` naming every unknown key and
  listing the known ones (a typo such as `local-step` never falls back to a default silently). Test-only knobs
  belong to a test app, which removes its own keys before calling the shipped app.
* **Types are strict.** `int`: an int, an integral float or a decimal string (never a bool); `float`: a number or a
  numeric string (never a bool); `bool`: a bool or `"true"`/`"false"`; `str`: a string (an int or float is written
  as text); `tuple[int, ...]`: comma-separated integers (`"4,5"`) or one int. A value that does not convert raises
  `ValueError` naming the key. `metadata={"run_config_parse": fn, "run_config_dump": fn}` gives a field its own
  conversion (e.g. `-1` for `None`). Ranges are the dataclass's own business (`__post_init__`).
* Missing keys keep the field's default.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any


def _key(field: dataclasses.Field, renames: Mapping[str, str]) -> str | None:
    if field.name in renames:
        return renames[field.name]
    return field.metadata.get("run_config", field.name.replace("_", "-"))


@functools.cache
def _hints(cls) -> dict[str, Any]:
    """The resolved field types of `cls`, once per class: a run config is parsed on every Flower message (each
    ClientApp call rebuilds its settings from `context.run_config`), and resolving the string annotations
    (`typing.get_type_hints` compiles each one) was ~9 % of a Proto-EVFL run. Callers only read the dict."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 (an unresolvable annotation: fall back to the defaults' types)
        return {}


def _is_section(kind: Any) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _entries(cls, renames: Mapping[str, str] | None = None, path: tuple[str, ...] = ()):
    """`(key, path, field, type)` for every run-config key of dataclass `cls`, sections flattened."""
    hints = _hints(cls)
    out = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        kind = hints.get(field.name, field.type)
        if _is_section(kind) and "run_config" not in field.metadata:
            out.extend(_entries(kind, field.metadata.get("run_config_keys", {}), (*path, field.name)))
            continue
        key = _key(field, renames or {})
        if key is not None:
            out.append((key, (*path, field.name), field, kind))
    return out


def run_config_keys(cls) -> list[str]:
    """Every run-config key a [`FlowerRunConfig`] dataclass accepts, in field order."""
    return [key for key, *_ in _entries(cls)]


def _base_type(kind: Any) -> Any:
    """`int` for `int`, `int | None` (the non-None member), ...; the type itself otherwise."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return kind


def convert_value(key: str, raw: Any, kind: Any) -> Any:
    """`raw` (a run-config value) as `kind` (bool, int, float, str or tuple[int, ...]); `ValueError` names `key`."""
    kind = _base_type(kind)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ValueError(f"run-config key {key!r} must be a bool (true/false), got {raw!r}")
    if kind is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, float) and math.isfinite(raw) and raw == int(raw):
            return int(raw)
        if isinstance(raw, str):
            try:
                return int(raw.strip())
            except ValueError:
                pass
        raise ValueError(f"run-config key {key!r} must be an integer, got {raw!r}")
    if kind is float:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw.strip())
            except ValueError:
                pass
        raise ValueError(f"run-config key {key!r} must be a number, got {raw!r}")
    if kind is str:
        if isinstance(raw, str):
            return raw
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return str(raw)
        raise ValueError(f"run-config key {key!r} must be a string, got {raw!r}")
    if typing.get_origin(kind) is tuple and typing.get_args(kind)[:1] == (int,):
        if isinstance(raw, int) and not isinstance(raw, bool):
            return (raw,)
        if isinstance(raw, str):
            try:
                return tuple(int(v) for v in raw.split(",") if v.strip())
            except ValueError:
                pass
        raise ValueError(f'run-config key {key!r} must be comma-separated integers (e.g. "4,5"), got {raw!r}')
    raise TypeError(f"run-config key {key!r}: field type {kind!r} has no run-config conversion (give one in metadata)")


def _dump_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return value


def parse_run_config(cls, run_config: Mapping[str, Any], **overrides: Any):
    """An instance of the dataclass `cls` from a Flower run config (see the module docstring for the rules).

    Args:
        cls (`type`): a (frozen) dataclass; sections (dataclass-typed fields) are flattened.
        run_config (`Mapping[str, Any]`): the run config (`context.run_config`).
        **overrides: field values that do not come from the run config (top-level fields only).

    Returns:
        An instance of `cls`; `ValueError` names every unknown key, or the key whose value does not convert.
    """
    if not isinstance(run_config, Mapping):
        raise TypeError(f"a run config must be a mapping of str to bool/int/float/str, got {type(run_config).__name__}")
    entries = _entries(cls)
    known = {key for key, *_ in entries}
    unknown = sorted(str(k) for k in run_config if k not in known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} run-config key(s) {unknown}; the known keys are {sorted(known)}")
    values: dict[tuple[str, ...], Any] = {}
    for key, path, field, kind in entries:
        if key not in run_config:
            continue
        raw = run_config[key]
        parse = field.metadata.get("run_config_parse")
        try:
            values[path] = parse(raw) if parse is not None else convert_value(key, raw, kind)
        except (TypeError, ValueError) as err:
            if parse is None or str(key) in str(err):
                raise ValueError(str(err)) from None
            raise ValueError(f"run-config key {key!r}: {err}") from None
    return _build(cls, values, (), overrides)


def _build(cls, values: Mapping[tuple[str, ...], Any], prefix: tuple[str, ...], overrides: Mapping[str, Any]):
    hints = _hints(cls)
    kwargs = dict(overrides)
    for field in dataclasses.fields(cls):
        if not field.init or field.name in kwargs:
            continue
        path = (*prefix, field.name)
        kind = hints.get(field.name, field.type)
        if _is_section(kind) and "run_config" not in field.metadata:
            if any(p[: len(path)] == path for p in values):
                kwargs[field.name] = _build(kind, values, path, {})
        elif path in values:
            kwargs[field.name] = values[path]
    return cls(**kwargs)


def dump_run_config(obj) -> dict[str, Any]:
    """The flat run config that [`parse_run_config`] turns back into `obj` (tuples as comma-separated text)."""
    out = {}
    for key, path, field, _ in _entries(type(obj)):
        value = obj
        for name in path:
            value = getattr(value, name)
        dump = field.metadata.get("run_config_dump")
        out[key] = dump(value) if dump is not None else _dump_value(value)
    return out


# Flower hands an app the same `context.run_config` on every message of a run, and the apps rebuild their settings
# from it each time (a parse per message was ~5 % of a Proto-EVFL run). A frozen dataclass whose values all hash
# cannot be changed by whoever receives it, so one parse per distinct run config is shared. The key keeps each
# value's type (`True`, `1` and `1.0` are equal in Python but parse differently); only a successful parse is kept.
_PARSED: dict[tuple, Any] = {}
_PARSED_MAX = 64


def _cache_key(cls, run_config) -> tuple | None:
    """A hashable key of `run_config` with each value's type, or `None` when it has none (then nothing is cached)."""
    if not isinstance(run_config, Mapping):
        return None
    try:
        items = tuple(sorted((str(k), type(v).__name__, v) for k, v in run_config.items()))
        hash(items)
    except TypeError:
        return None
    return (cls, *items)


def _shareable(config) -> bool:
    """Whether one parsed `config` may be handed to every caller: a frozen dataclass whose values (sections
    included, which must then be frozen too) all hash."""
    if not (dataclasses.is_dataclass(config) and type(config).__dataclass_params__.frozen):
        return False
    try:
        hash(config)
    except TypeError:
        return False
    return True


class FlowerRunConfig:
    """Mixin for a method's frozen run-config dataclass: [`from_run_config`] and [`to_run_config`] with the rules of
    [`hf_ext.core.federated.run_config`] (unknown keys refused, strict types)."""

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, Any]):
        """Parses a Flower run config; `ValueError` names unknown keys or a value of the wrong type. The same run
        config parses once: a frozen, hashable result is shared (see [`_parse_run_config`] to extend the parse)."""
        key = _cache_key(cls, run_config)
        if key is not None and key in _PARSED:
            return _PARSED[key]
        config = cls._parse_run_config(run_config)
        if key is not None and _shareable(config):
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[key] = config
        return config

    @classmethod
    def _parse_run_config(cls, run_config: Mapping[str, Any]):
        """The parse itself ([`parse_run_config`]); a config with a key of its own overrides this, not
        [`from_run_config`], and keeps the shared-parse cache."""
        return parse_run_config(cls, run_config)

    def to_run_config(self) -> dict[str, Any]:
        """The flat Flower run config that [`from_run_config`] parses back into this config."""
        return dump_run_config(self)

    @classmethod
    def run_config_keys(cls) -> list[str]:
        """Every key this config accepts."""
        return run_config_keys(cls)


__all__ = ["FlowerRunConfig", "convert_value", "dump_run_config", "parse_run_config", "run_config_keys"]
