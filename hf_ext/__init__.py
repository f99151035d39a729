"""hf_ext: recent research methods as Hugging Face-native artifacts.

`import hf_ext` registers every method (and its Auto classes with transformers). Each method's subpackage
registers itself in its own `__init__.py`; this file only imports them.
"""

from hf_ext.core.registry import MethodSpec, get_method, list_methods, register_method

# One line per method (registration happens on import).
from . import (
    amplitudes,  # noqa: F401
    codebc,  # noqa: F401
    fede4rag,  # noqa: F401
    fl_llama,  # noqa: F401
    gpmfs,  # noqa: F401
    h2tune,  # noqa: F401
    orca,  # noqa: F401
    proto_evfl,  # noqa: F401
    tba,  # noqa: F401
    tinyalign,  # noqa: F401
)

__version__ = "0.1.0"

__all__ = ["MethodSpec", "get_method", "list_methods", "register_method", "__version__"]
