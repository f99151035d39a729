"""Lazy imports, so `import hf_ext` stays light.

`import hf_ext` registers every method (its config and model classes with transformers' Auto classes), which needs
torch and transformers; everything else a method uses (peft, datasets, scikit-learn, scipy, pandas, gradio, flwr,
faiss, tenseal, diffusers, slither, ...) is imported only when the user touches it:

- [`lazy_exports`] gives a method subpackage PEP 562 `__getattr__`/`__dir__`, so `hf_ext.gpmfs.GPMFSSelector`
  imports `hf_ext.gpmfs.selector` (and scikit-learn) on first access.
- [`when_imported`] runs a callback once a module is imported by anyone, e.g. H2Tune's PEFT config hook runs when
  `peft` is imported, so plain `PeftModel.from_pretrained` restores an H2Tune adapter without `import hf_ext`
  pulling peft in.
- [`require`] imports an optional dependency or raises one [`MissingExtraError`] naming the pip extra.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


class MissingExtraError(ImportError):
    """A method's optional dependency is not installed; the message names the extra that brings it."""


def require(module: str, extra: str, *, purpose: str | None = None) -> ModuleType:
    """Imports `module`, or raises [`MissingExtraError`] with the `pip install 'hf_ext[extra]'` line.

    Args:
        module (`str`): the module to import, e.g. `"tenseal"`.
        extra (`str`): the hf_ext extra that installs it, e.g. `"fede4rag"`.
        purpose (`str`, *optional*): what it is needed for, shown in the message.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        why = f" for {purpose}" if purpose else ""
        raise MissingExtraError(
            f"{module} is needed{why} but is not installed ({err}); install it with: pip install 'hf_ext[{extra}]'"
        ) from err


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """PEP 562 hooks for a subpackage whose public names live in heavier submodules.

    Args:
        package (`str`): the subpackage's `__name__`.
        exports (`Mapping[str, str]`): public name to the submodule that defines it, relative (`".selector"`).

    Returns:
        `(__getattr__, __dir__)` to assign at module level.
    """
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name], package), name)
        setattr(module, name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(exports))

    return __getattr__, __dir__


class _PostImportHooks:  # a meta path finder (not subclassing importlib.abc: it costs `hf-ext list` ~15 ms)
    """Runs callbacks right after a watched module finishes executing (first import only).

    A callback never runs while one of hf_ext's own modules is half-initialised in the same thread: it waits until
    the outermost such import has finished. (Otherwise `import hf_ext.orca.configuration_orca`, which imports
    transformers, would have the transformers callback import `modeling_orca`, which needs the half-done config.)
    """

    def __init__(self, prefix: str = "hf_ext."):
        self.prefix = prefix
        self.callbacks: dict[str, list[Callable[[], None]]] = {}
        self._lock = threading.RLock()
        self._busy: set[str] = set()
        self._local = threading.local()

    @property
    def _state(self):
        if not hasattr(self._local, "depth"):
            self._local.depth, self._local.pending = 0, []
        return self._local

    def defer(self, callback: Callable[[], None]) -> None:
        state = self._state
        state.pending.append(callback)
        if state.depth == 0:
            self._flush()

    def _flush(self) -> None:
        state = self._state
        while state.pending and state.depth == 0:
            state.pending.pop(0)()

    def find_spec(self, fullname, path=None, target=None):
        with self._lock:
            watched = fullname in self.callbacks
            if not (watched or fullname.startswith(self.prefix)) or fullname in self._busy:
                return None
            self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            with self._lock:
                self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module
        counts = fullname.startswith(self.prefix)

        def exec_then_call(module):
            state = self._state
            state.depth += counts
            try:
                exec_module(module)
            finally:
                state.depth -= counts
            # Taken only once the module has run: `importlib.util.find_spec("peft")` (transformers' availability
            # checks) asks this finder for a spec it never executes, and must not use up the callbacks.
            with self._lock:
                callbacks = self.callbacks.pop(fullname, [])
            state.pending.extend(callbacks)
            if state.depth == 0:
                self._flush()

        spec.loader.exec_module = exec_then_call
        return spec


_HOOKS = _PostImportHooks()


def when_imported(module: str, callback: Callable[[], None]) -> None:
    """Calls `callback()` once `module` (e.g. `"peft"`, `"hf_ext.orca.modeling_orca"`) has been imported by
    anyone: now if it is imported already, else right after its first import; never while one of hf_ext's own
    modules is half-initialised in this thread (then right after the outermost one finishes)."""
    if _HOOKS not in sys.meta_path:
        sys.meta_path.insert(0, _HOOKS)
    loaded = sys.modules.get(module)
    if loaded is not None and not getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        _HOOKS.defer(callback)
        return
    with _HOOKS._lock:
        _HOOKS.callbacks.setdefault(module, []).append(callback)
