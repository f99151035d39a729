"""Input validation shared by every method: the unknown-config-key policy and small checks for entry points.

**Unknown config keys (decided once, here).** `import hf_ext` registers each method's `PreTrainedConfig`
([`~hf_ext.core.registry.register_method`]), and registration wraps the class's `__init__` with
[`guard_config_keys`]:

- building a config in code with a key that is neither a field of the class nor an attribute every
  `PreTrainedConfig` knows (`OrcaConfig(embed_dimm=8)`) raises [`UnknownConfigKeyError`] naming the key and the
  closest field;
- loading a saved `config.json` (`from_pretrained`, `from_dict`, `AutoConfig`) with such a key **warns** by name
  ([`UnknownConfigKeyWarning`]) and keeps it as an attribute, as transformers does: a config written by a newer
  hf_ext must still load in an older one (forward compatibility). Keys that Hub configs carry from older
  transformers ([`LEGACY_HUB_KEYS`], e.g. `gradient_checkpointing`) also only warn when a config is rebuilt from
  such a dict in code; [`loading_saved_config`] marks any other such rebuild explicitly.

Remote code loaded with `trust_remote_code=True` on a machine without hf_ext keeps transformers' behaviour
(unknown keys become attributes silently): the configuration files may not import hf_ext.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import math
import warnings
from collections.abc import Iterable
from typing import Any

_LOADING = contextvars.ContextVar("hf_ext_loading_saved_config", default=False)

# Keys a `PreTrainedConfig.__init__` consumes or tolerates without them being dataclass fields (see
# `PreTrainedConfig.__post_init__` in transformers 5) and keys `to_dict()` writes for every config.
_COMMON_KEYS = frozenset(
    {
        "torch_dtype",
        "dtype",
        "name_or_path",
        "_name_or_path",
        "_commit_hash",
        "output_attentions",
        "attn_implementation",
        "experts_implementation",
        "per_layer_config",
        "num_labels",
        "transformers_version",
        "architectures",
        "auto_map",
        "model_type",
        "rope_scaling",
        "rope_theta",
        "rope_type",
        "partial_rotary_factor",
        "_attn_implementation_internal",
        "_experts_implementation_internal",
        "return_dict",
        "output_hidden_states",
        "use_return_dict",
        "tie_word_embeddings",
    }
)


# Keys that configs on the Hub carry from older transformers versions (not fields in transformers 5): building a
# config from such a dict in code (e.g. `MyConfig(**pretrained.config.to_dict())`) warns about them by name
# instead of raising, as loading does.
LEGACY_HUB_KEYS = frozenset(
    {
        "gradient_checkpointing",
        "position_embedding_type",
        "torchscript",
        "use_bfloat16",
        "xla_device",
        "pruned_heads",
        "tie_encoder_decoder",
        "chunk_size_feed_forward",
        "is_decoder",
        "add_cross_attention",
        "cross_attention_hidden_size",
        "tokenizer_class",
        "prefix",
        "task_specific_params",
        "finetuning_task",
        "decoder_start_token_id",
        "sep_token_id",
        "tf_legacy_loss",
        "use_cache",
        "output_scores",
        "return_dict_in_generate",
        "classifier_dropout",
    }
)


@contextlib.contextmanager
def loading_saved_config():
    """Marks configs built inside the block as coming from a saved `config.json` (unknown keys warn, not raise).

    `from_pretrained` / `from_dict` set it themselves; use it where code rebuilds a config from another saved
    config's dict, e.g. `with loading_saved_config(): MyConfig(**pretrained.config.to_dict())`.
    """
    token = _LOADING.set(True)
    try:
        yield
    finally:
        _LOADING.reset(token)


class UnknownConfigKeyError(TypeError, ValueError):
    """A config was built with a key that is not one of its fields (a typo such as `embed_dimm`)."""


class UnknownConfigKeyWarning(UserWarning):
    """A saved `config.json` holds a key this version does not know; it is kept as an attribute."""


@functools.cache
def known_config_keys(config_class: type) -> frozenset[str]:
    """Every key `config_class(**kwargs)` accepts: its dataclass fields, its `attribute_map`, the attributes every
    `PreTrainedConfig` serialises, and the generation parameters transformers strips from old configs."""
    from dataclasses import fields

    from transformers import GenerationConfig, PreTrainedConfig

    keys = {f.name for f in fields(config_class)} | set(getattr(config_class, "attribute_map", {}) or {})
    keys |= set(PreTrainedConfig().to_dict()) | set(GenerationConfig._get_default_generation_params())
    try:  # attributes a class sets on itself in __post_init__ (e.g. tie_word_embeddings) are saved too
        keys |= set(config_class().to_dict())
    except Exception:  # noqa: BLE001  (a class with required fields has no default instance)
        pass
    return frozenset(keys | _COMMON_KEYS)


def check_config_keys(config_class: type, kwargs: dict[str, Any]) -> None:
    """Raises [`UnknownConfigKeyError`] (in code) or warns (while loading a saved config) for unknown keys."""
    if not kwargs:
        return
    known = known_config_keys(config_class)
    unknown = sorted(k for k in kwargs if k not in known)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    name = config_class.__name__
    if _LOADING.get() or all(key in LEGACY_HUB_KEYS for key in unknown):
        warnings.warn(
            f"{name}: keys of a saved config that this version does not know, kept as attributes: {', '.join(hints)}",
            UnknownConfigKeyWarning,
            stacklevel=4,
        )
        return
    raise UnknownConfigKeyError(
        f"{name} got unknown config keys {', '.join(hints)}; the fields are the "
        f"documented arguments of {name} (unknown keys are refused in code and only warned "
        f"about when loading a saved config.json)"
    )


def guard_config_keys(config_class: type) -> None:
    """Wraps a `PreTrainedConfig` subclass's `__init__` (unknown keys raise) and `from_dict` (unknown keys in a
    saved config warn). Idempotent; classes that are not `PreTrainedConfig`s (PEFT configs, dataclasses) are left
    alone."""
    from transformers import PreTrainedConfig

    if not (isinstance(config_class, type) and issubclass(config_class, PreTrainedConfig)):
        return
    if config_class.__dict__.get("_hf_ext_keys_guarded", False):
        return
    original_init = config_class.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        if type(self) is config_class:  # a subclass has its own dataclass __init__ and its own fields
            check_config_keys(config_class, kwargs)
        original_init(self, *args, **kwargs)

    original_from_dict = config_class.from_dict.__func__

    @functools.wraps(original_from_dict)
    def from_dict(cls, config_dict, **kwargs):
        with loading_saved_config():
            return original_from_dict(cls, config_dict, **kwargs)

    config_class.__init__ = __init__
    config_class.from_dict = classmethod(from_dict)
    config_class._hf_ext_keys_guarded = True


# ---- small checks for entry points (plain ValueError subclasses naming the field and the allowed range) --------


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """`value` as an int `>= minimum`; bools, floats and NaN are refused."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):  # ints and numpy ints, not floats
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_finite_number(
    name: str, value: Any, low: float = -math.inf, high: float = math.inf, low_open: bool = False
) -> float:
    """`value` as a finite float in `[low, high]` (`(low, high]` with `low_open`)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number, got {value!r}") from None
    bracket = "(" if low_open else "["
    if not math.isfinite(x) or x < low or x > high or (low_open and x == low):
        raise ValueError(f"{name} must be a finite number in {bracket}{low:g}, {high:g}], got {value!r}")
    return x


def check_ids_in_range(name: str, ids: Iterable[int], size: int) -> list[int]:
    """Token / entry ids as a list, each in `[0, size)`; the first offender is named."""
    out = [int(i) for i in ids]
    bad = [i for i in out if not 0 <= i < size]
    if bad:
        raise ValueError(f"{name} must be ids in [0, {size}), got {bad[:5]}")
    return out


__all__ = [
    "LEGACY_HUB_KEYS",
    "UnknownConfigKeyError",
    "UnknownConfigKeyWarning",
    "check_config_keys",
    "check_finite_number",
    "check_ids_in_range",
    "check_positive_int",
    "guard_config_keys",
    "known_config_keys",
    "loading_saved_config",
]
