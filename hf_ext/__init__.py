"""hf_ext: recent research methods as Hugging Face-native artifacts.

`import hf_ext` registers every method (and its Auto classes with transformers). Each method's subpackage
registers itself in its own `__init__.py`; this file only imports them.
"""

from hf_ext.core.registry import MethodSpec, get_method, list_methods, register_method

from . import amplitudes, gpmfs, h2tune, orca, proto_evfl  # noqa: F401  (registration)

__version__ = "0.1.0"

__all__ = ["MethodSpec", "get_method", "list_methods", "register_method", "__version__"]
