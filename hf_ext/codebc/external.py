"""Optional real Solidity beyond the shipped corpus, read from package-manager downloads (nothing is fetched here).

- [`load_npm_contracts`]: the `.sol` files of an installed `node_modules` folder (solmate, Uniswap v2/v3-core, Aave
  core-v3, Gnosis Safe, ...), as more 0.8-line code for CI / TI. Every file keeps its package name and licence (from
  the package's `package.json`). OpenZeppelin packages are never read, and every file goes through the same leakage
  filter as the shipped corpus ([`~hf_ext.codebc.data.is_leaky`]): the Blockchain-HumanEval references are
  OpenZeppelin files.
- [`load_slither_labelled`]: the labelled detector-test contracts of the `slither-analyzer` source distribution
  (`pip download --no-binary slither-analyzer --no-deps slither-analyzer==0.11.6`), for VD evaluated on real
  contracts. A contract is `bug` when a High- or Medium-impact detector's expected output (its snapshot) for that
  file is non-empty, else `correct`: the project's vulnerability definition applied to Slither's own labels.

Paths come from the arguments or `$HF_EXT_CODEBC_NPM` / `$HF_EXT_CODEBC_SLITHER_SDIST`; both loaders are optional
(the tests and the quick run do not need them) and fail with a message naming the variable when the path is missing.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .data import Contract, is_leaky, strip_comments

NPM_ENV = "HF_EXT_CODEBC_NPM"
SLITHER_SDIST_ENV = "HF_EXT_CODEBC_SLITHER_SDIST"
_SKIP_SCOPES = ("@openzeppelin",)  # the benchmark's references are OpenZeppelin files: never train on them


def resolve_path(path, env: str, what: str, fix: str | None = None) -> Path:
    """`path`, else `$env`; a missing one is a `FileNotFoundError` naming `what`, the variable and `fix` (how to
    get it) when given."""
    raw = path if path is not None else os.environ.get(env)
    tail = f"; {fix}" if fix else ""
    if not raw:
        raise FileNotFoundError(f"{what}: pass a path or set ${env}{tail}")
    p = Path(raw)
    if not p.exists():
        raise FileNotFoundError(f"{what}: {p} does not exist (set ${env} to the right path){tail}")
    return p


def _packages(node_modules: Path):
    for manifest in sorted(node_modules.glob("*/package.json")) + sorted(node_modules.glob("@*/*/package.json")):
        folder = manifest.parent
        if folder.parent.name in _SKIP_SCOPES or folder.name.startswith("."):
            continue
        try:
            meta = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        yield folder, meta


def package_licence(meta: dict) -> str:
    """A `package.json`'s licence as a string: the `license` field (an SPDX expression, or the old `{"type": ...}`
    object), else the deprecated `licenses` list joined with ` OR `, else `"?"`."""
    lic = meta.get("license")
    if isinstance(lic, dict):
        lic = lic.get("type")
    if not lic and isinstance(meta.get("licenses"), list):
        lic = " OR ".join(str(x.get("type", "?")) if isinstance(x, dict) else str(x) for x in meta["licenses"])
    return str(lic) if lic else "?"


@dataclass
class NpmFile:
    """One candidate `.sol` file of an installed package: `rel` is its path inside the package."""

    package: str
    version: str
    licence: str
    rel: str
    raw: str

    @property
    def source(self) -> str:
        return f"{self.package}@{self.version}:{self.rel}"


def npm_files(node_modules: str | os.PathLike | None = None) -> Iterator[NpmFile]:
    """Every readable `.sol` file of an installed `node_modules` folder (default `$HF_EXT_CODEBC_NPM`), package by
    package in path order, less OpenZeppelin packages, nested `node_modules` and test / mock / script / example
    files."""
    root = resolve_path(node_modules, NPM_ENV, "npm Solidity corpus")
    for folder, meta in _packages(root):
        name, version, licence = meta.get("name", folder.name), meta.get("version", "?"), package_licence(meta)
        for path in sorted(folder.rglob("*.sol")):
            rel = path.relative_to(folder).as_posix()
            if "node_modules" in rel or re.search(r"(^|/)(test|tests|mocks?|scripts?|examples?)/", rel, re.I):
                continue
            try:
                raw = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            yield NpmFile(str(name), str(version), licence, rel, raw)


def reject_reason(raw: str, *, only_08: bool = True) -> str | None:
    """Why a source file is not a corpus contract, or `None` when it is one: `"pragmas"` (no or several
    `pragma solidity`), `"leaky"` ([`~hf_ext.codebc.data.is_leaky`]), `"old_pragma"` (with `only_08`, a pragma the
    installed solc-js 0.8.37 cannot satisfy) or `"empty"` (nothing left once comments are stripped)."""
    pragmas = re.findall(r"pragma\s+solidity\s*([^;]*);", raw)
    if len(pragmas) != 1:
        return "pragmas"
    if is_leaky(raw):
        return "leaky"
    if only_08 and not re.match(r"^(\^|>=|=|~)?\s*0\.8\.", pragmas[0].strip()):
        return "old_pragma"
    if not strip_comments(raw)[0].strip():
        return "empty"
    return None


def to_contract(f: NpmFile) -> Contract:
    """An accepted [`NpmFile`] as a corpus [`~hf_ext.codebc.data.Contract`] (comments stripped, source kept)."""
    code, comments = strip_comments(f.raw)
    return Contract(code, comments, f.raw, source=f.source, licence=f.licence)


def load_npm_contracts(node_modules: str | os.PathLike | None = None, *, only_08: bool = True) -> list[Contract]:
    """Contracts from the `.sol` files of an installed `node_modules` folder.

    Args:
        node_modules (`str` or `os.PathLike`, *optional*): the folder (default `$HF_EXT_CODEBC_NPM`).
        only_08 (`bool`, defaults to `True`): keep files whose single `pragma solidity` the installed solc-js 0.8.37
            satisfies (`^0.8.x`, `>=0.8.x`, `0.8.x`, `=0.8.x`).

    Returns:
        `list[Contract]` in path order, each with `label="[4]"` (no known finding), `source` set to
        `"<package>@<version>:<path>"` and `licence` to the package's `license` field. Files with no or several
        pragmas, test / mock / script files, leaky files and (with `only_08`) older pragmas are skipped
        ([`npm_files`], [`reject_reason`]).
    """
    return [to_contract(f) for f in npm_files(node_modules) if reject_reason(f.raw, only_08=only_08) is None]


def licences(contracts: list[Contract]) -> dict[str, str]:
    """`{"<package>@<version>": licence}` of the contracts that carry a package source."""
    return {c.source.split(":")[0]: c.licence for c in contracts if c.source and c.licence}


@dataclass
class LabelledContract:
    """One detector-test contract of the Slither sdist: `tag` is `bug` or `correct` (see the module docstring)."""

    code: str
    tag: str
    detector: str
    impact: str
    solc: str
    path: str


def _detector_table() -> dict[str, tuple[str, str]]:
    """`{class name: (argument, impact)}` of the installed Slither's detectors."""
    from slither.detectors import all_detectors
    from slither.detectors.abstract_detector import AbstractDetector

    table = {}
    for name, cls in vars(all_detectors).items():
        if isinstance(cls, type) and issubclass(cls, AbstractDetector) and cls is not AbstractDetector:
            impact = getattr(cls.IMPACT, "name", str(cls.IMPACT)).title()
            table[name] = (cls.ARGUMENT, impact)
    return table


_SNAPSHOT = re.compile(r"^detectors__detector_(?P<cls>[A-Za-z0-9]+)_(?P<ver>\d+_\d+_\d+)_(?P<file>.+)_sol__0\.txt$")


def load_slither_labelled(sdist: str | os.PathLike | None = None) -> list[LabelledContract]:
    """The detector-test contracts of the `slither-analyzer` sdist with a `correct` / `bug` label each.

    Args:
        sdist (`str` or `os.PathLike`, *optional*): the `slither_analyzer-<v>.tar.gz` or its extracted folder
            (default `$HF_EXT_CODEBC_SLITHER_SDIST`).

    Only files that some detector's snapshot names are returned (the `test_node_modules` helpers are not labelled);
    a file two detectors test is `bug` if either is High/Medium with a finding. Sorted by path.
    """
    root = resolve_path(sdist, SLITHER_SDIST_ENV, "slither-analyzer source distribution")
    files: dict[str, str] = {}
    if root.is_file():
        with tarfile.open(root) as tar:
            for m in tar.getmembers():
                if m.isfile() and "/tests/e2e/detectors/" in m.name and m.name.endswith((".sol", ".txt")):
                    files[m.name.split("/tests/e2e/detectors/", 1)[1]] = (
                        tar.extractfile(m).read().decode("utf-8", "replace")
                    )
    else:
        base = next(iter(root.glob("**/tests/e2e/detectors")), None)
        if base is None:
            raise FileNotFoundError(f"{root} holds no tests/e2e/detectors folder (is it the slither-analyzer sdist?)")
        for p in base.rglob("*"):
            if p.is_file() and p.suffix in (".sol", ".txt"):
                files[p.relative_to(base).as_posix()] = p.read_text(encoding="utf-8", errors="replace")
    table = _detector_table()
    labels: dict[str, LabelledContract] = {}
    for rel, text in files.items():
        m = _SNAPSHOT.match(rel.rsplit("/", 1)[-1]) if rel.startswith("snapshots/") else None
        if m is None or m["cls"] not in table:
            continue
        argument, impact = table[m["cls"]]
        ver = m["ver"].replace("_", ".")
        src = f"test_data/{argument}/{ver}/{m['file']}.sol"
        if src not in files:
            continue
        found = bool(text.strip()) and impact in ("High", "Medium")
        prev = labels.get(src)
        if prev is None or (found and prev.tag == "correct"):
            labels[src] = LabelledContract(
                strip_comments(files[src])[0], "bug" if found else "correct", argument, impact, ver, src
            )
    if not labels:
        raise FileNotFoundError(f"no labelled detector tests found in {root}")
    return [labels[k] for k in sorted(labels)]
