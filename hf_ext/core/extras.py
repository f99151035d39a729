"""Which optional dependencies ("extras") are installed, read from hf_ext's own package metadata.

`pip install 'hf_ext[orca]'` installs the core and ORCA's extra. Every entry point of the command line (`reproduce`,
`train`, a method's own scripts, `demo`, `push`) checks the method's extra **before any work** and stops with the
pip line that fixes it ([`MissingExtraError`]); `hf-ext list` shows each method's installed and missing extras.
A module is "missing" when its distribution is not installed or the module cannot be found on `sys.path`; the check
imports nothing (`importlib.util.find_spec`), so it costs milliseconds.
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from importlib import metadata

from .lazy import MissingExtraError

PACKAGE = "hf_ext"
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_SELF_REF = re.compile(r"^hf[-_]ext\[([^\]]+)\]", re.IGNORECASE)


def _dist_name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[(]", requirement.strip(), maxsplit=1)[0]


@lru_cache(maxsize=1)
def _requirements() -> dict[str, list[str]]:
    """Extra name → its requirement strings (self-references `hf_ext[a,b]` kept as written)."""
    try:
        requires = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return {}
    out: dict[str, list[str]] = {}
    for req in requires:
        marker = _EXTRA_MARKER.search(req)
        if marker:
            # extra names are normalised in metadata (PEP 685: `fl_llama` is written `fl-llama`)
            out.setdefault(_normalise(marker.group(1)), []).append(req.split(";", 1)[0].strip())
    return out


def has_extra(extra: str) -> bool:
    return _normalise(extra) in _requirements()


def known_extras() -> list[str]:
    """The extras hf_ext declares, in their normalised spelling (`fl-llama`)."""
    return sorted(_requirements())


def extra_distributions(extra: str, _seen: frozenset[str] = frozenset()) -> list[str]:
    """The distributions `pip install 'hf_ext[extra]'` brings besides the core, self-references followed."""
    names: list[str] = []
    for req in _requirements().get(_normalise(extra), []):
        ref = _SELF_REF.match(req)
        if ref:
            for inner in ref.group(1).split(","):
                inner = inner.strip()
                if inner and _normalise(inner) not in _seen and _normalise(inner) != _normalise(extra):
                    names += extra_distributions(inner, _seen | {_normalise(extra)})
        else:
            names.append(_dist_name(req))
    return sorted(set(names), key=names.index)


@lru_cache(maxsize=1)
def _modules_by_distribution() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            out.setdefault(_normalise(dist), []).append(module)
    return out


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _module_missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent that fails to import, or a module blocked in sys.modules
        return True


def missing_for_extra(extra: str) -> list[str]:
    """Modules or distributions of `extra` that are not installed or not importable (empty when all are)."""
    missing = []
    modules = _modules_by_distribution()
    for dist in extra_distributions(extra):
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            missing.append(dist)
            continue
        names = [m for m in modules.get(_normalise(dist), []) if not m.startswith("_") and m.isidentifier()]
        missing += [m for m in names if _module_missing(m)]
    return missing


def check_extras(method: str, *extras: str, purpose: str | None = None) -> None:
    """Raises [`MissingExtraError`] with the pip line when any of `extras` (default: the method's own) is missing.

    A method without an extra of its own (one added outside this package) passes.
    """
    wanted = extras or ((method,) if has_extra(method) else ())
    problems = {extra: missing_for_extra(extra) for extra in wanted}
    problems = {extra: names for extra, names in problems.items() if names}
    if problems:
        line = ",".join([method, *[e for e in problems if e != method]] if has_extra(method) else problems)
        names = sorted({n for names in problems.values() for n in names})
        why = f" for {purpose}" if purpose else ""
        raise MissingExtraError(
            f"{method}{why} needs {', '.join(names)}, which {'is' if len(names) == 1 else 'are'} not installed; "
            f"install with: pip install 'hf_ext[{line}]'"
        )


def extras_status(method: str, *extras: str) -> dict[str, list[str]]:
    """`{extra: missing modules}` for the method's extra and `extras` (an empty list means installed)."""
    wanted = [e for e in ((method,) if has_extra(method) else ()) + extras if has_extra(e)]
    return {extra: missing_for_extra(extra) for extra in wanted}
