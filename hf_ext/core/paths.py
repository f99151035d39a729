"""Where hf_ext reads and writes files: the one place that decides.

Nothing here depends on the source checkout being present, so an installed wheel behaves like the checkout:

- **Work dir** ([`work_dir`]): what `hf-ext reproduce` writes and what `hf-ext demo` / `hf-ext push` read (results,
  trained artifacts, caches of derived models). `$HF_EXT_HOME` when set, else `./runs` relative to the current
  directory — in the checkout that is `<repo>/runs`, which `make run` and `make test` use.
- **User cache** ([`cache_dir`]): tools installed on first use (CodeBC's solc-js). `$HF_EXT_CACHE` when set, else
  `$XDG_CACHE_HOME/hf_ext` (default `~/.cache/hf_ext`).
- **Data dirs** ([`data_dir`]): an explicit argument, else the method's variable (`$HF_EXT_<NAME>_DATA`), else
  `$HF_EXT_DATA/<name>`, else the checkout's `../shared/data/<name>`; the error for a missing one names all of them.
- **Package assets** ([`asset`]): model-card sections, Space templates and the solc-js server ship inside the wheel
  as `hf_ext/_assets/...`; in the source checkout `hf_ext/_assets/*` are links to the top-level folders.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

# The source checkout, when hf_ext runs from one (editable install, tests); None inside an installed wheel.
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_CHECKOUT = _PACKAGE_DIR.parent if (_PACKAGE_DIR.parent / "pyproject.toml").is_file() else None

# Top-level checkout folders shipped in the wheel under `hf_ext/_assets/<name>` (see pyproject.toml's package-data).
ASSET_ROOTS = ("model_cards", "spaces", "tools")


# What each data set read in place is and where it comes from, for the "not found" error (no package ships them).
DATA_SETS: dict[str, str] = {
    "multirc": (
        "MultiRC train/val/test JSONL (SuperGLUE), as FL-LLaMA's authors used it; from the FedSEA-LLaMA repository "
        "(TAP-LLM/SplitFedLLM, FedSEA-LLaMA/Dataset/MultiRC/; research use via SuperGLUE)"
    ),
    "fede4rag": (
        "FedE4RAG's 1,000 10-K question-passage pairs (train_qa.json) and FinanceBench tests (test_100.json, "
        "test_50.json); from the FedE4RAG repository (DocAILab/FedE4RAG, FedE/select_data.json and RAGTest/data/; "
        "CC BY-NC 4.0)"
    ),
    "codebc": (
        "CodeBC's secure contracts (secure_contracts/part_*.csv), Blockchain-HumanEval (blockchain_humaneval/) and "
        "the released CodeLlama outputs (released_outputs/); from the CodeBC repository "
        "(wanglingxiang1298/CodeBC, dataset/; MIT)"
    ),
}


class DataNotFoundError(FileNotFoundError):
    """Raised when a data folder a method needs is not where any of the documented places say."""


def work_dir(*parts: str) -> Path:
    """The work dir (`$HF_EXT_HOME`, default `./runs`), joined with `parts` (e.g. `work_dir("orca", "artifact")`)."""
    return Path(os.environ.get("HF_EXT_HOME") or "runs").joinpath(*parts)


def cache_dir(*parts: str) -> Path:
    """The user cache (`$HF_EXT_CACHE`, default `$XDG_CACHE_HOME/hf_ext` or `~/.cache/hf_ext`), joined with `parts`."""
    root = os.environ.get("HF_EXT_CACHE")
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hf_ext"
    return Path(root).joinpath(*parts)


def data_env_var(name: str) -> str:
    """The variable that points at data set `name`'s folder: `HF_EXT_<NAME>_DATA`."""
    return f"HF_EXT_{name.upper()}_DATA"


def data_dir(name: str, explicit: str | os.PathLike | None = None, *, must_exist: bool = True) -> Path:
    """The folder of data set `name` (e.g. `"multirc"`, `"codebc"`, `"fede4rag"`).

    Args:
        name (`str`): the data set's folder name, as under `shared/data/`.
        explicit (`str` or `PathLike`, *optional*): a folder the caller was given; wins over everything else.
        must_exist (`bool`, *optional*, defaults to `True`): raise [`DataNotFoundError`] when the folder is missing.
    """
    candidates: list[tuple[str, Path]] = []
    if explicit is not None:
        candidates.append(("the argument", Path(explicit)))
    var = data_env_var(name)
    if os.environ.get(var):
        candidates.append((f"${var}", Path(os.environ[var])))
    if os.environ.get("HF_EXT_DATA"):
        candidates.append(("$HF_EXT_DATA", Path(os.environ["HF_EXT_DATA"]) / name))
    if _CHECKOUT is not None:
        candidates.append(("the checkout", _CHECKOUT.parent / "shared" / "data" / name))
    for _, path in candidates:
        if path.is_dir():
            return path
        if explicit is not None:
            break  # a folder the caller named that does not exist is an error, never a silent fallback
    if not must_exist and candidates:
        return candidates[0][1]
    tried = "; ".join(f"{where}: {path}" for where, path in candidates) or "no argument, no variable set"
    what = f" It is {DATA_SETS[name]}." if name in DATA_SETS else ""
    raise DataNotFoundError(
        f"data set {name!r} not found (tried {tried}).{what} Download it once, then pass its folder explicitly, "
        f"or set ${var} to it (or $HF_EXT_DATA to a folder holding {name}/)."
    )


def asset(*parts: str) -> Path:
    """A file shipped with hf_ext: `asset("model_cards", "orca.md")`, `asset("spaces", "orca")`,
    `asset("tools", "solc")`. Read from the package's `_assets/` folder: in the wheel it holds copies, in the
    checkout symbolic links to the top-level folders."""
    if not parts or parts[0] not in ASSET_ROOTS:
        raise ValueError(f"asset path must start with one of {ASSET_ROOTS}, got {parts!r}")
    return Path(str(resources.files("hf_ext"))).joinpath("_assets", *parts)
