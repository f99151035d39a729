"""hf_ext: recent research methods as Hugging Face-native artifacts.

`import hf_ext` registers every method. Methods are discovered, not listed: each subpackage of `hf_ext` (other than
`core` and private ones) registers itself in its own `__init__.py`, and so does every installed package that
declares an entry point in the `hf_ext.methods` group (an extension outside this repository). Adding a method is
adding one folder (see CONTRIBUTING.md). Importing this package imports no torch and none of a method's own
dependencies: each method exports its classes lazily.
"""

import importlib as _importlib
import pkgutil as _pkgutil
from importlib import metadata as _metadata

from hf_ext import core as _core  # noqa: F401
from hf_ext._version import __version__
from hf_ext.core import auto as _auto  # noqa: F401  (subscribes Auto registration to the registry first)
from hf_ext.core.offline import hub_kernels_off_when_offline as _hub_kernels_off_when_offline
from hf_ext.core.registry import MethodSpec, get_method, list_methods, register_method

ENTRY_POINT_GROUP = "hf_ext.methods"

_hub_kernels_off_when_offline()  # offline, transformers' default Hub kernels would fail a GPU run at its first .train()


def _discover() -> None:
    for info in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg and info.name != "core" and not info.name.startswith("_"):
            _importlib.import_module(f"{__name__}.{info.name}")
    for entry in _metadata.entry_points(group=ENTRY_POINT_GROUP):
        entry.load()  # the extension's package registers itself on import


_discover()

__all__ = ["ENTRY_POINT_GROUP", "MethodSpec", "__version__", "get_method", "list_methods", "register_method"]
