"""hf_ext works when installed: the wheel carries its assets, the extras cover every import, `import hf_ext` is
light, and the CLI runs outside the checkout."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from hf_ext.core.testing import build_wheel, venv_reusing_site_packages

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
METHODS = sorted(p.name for p in (REPO_ROOT / "hf_ext").iterdir() if (p / "__init__.py").is_file() and p.name != "core")
# Modules `import hf_ext` must not import (transformers' own PreTrainedModel imports scipy, so scipy is not here:
# it cannot be kept out while transformers registers the Auto classes; see the README's "Installing").
HEAVY = ("torch", "transformers", "peft", "datasets", "sklearn", "pandas", "gradio", "flwr", "faiss", "tenseal",
         "diffusers", "slither", "ray", "ot", "anny", "sentence_transformers", "pyarrow", "matplotlib")  # fmt: skip


def _pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def _requirement_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower().replace("_", "-")


def _extra_distributions(extra: str, extras: dict[str, list[str]], seen: frozenset = frozenset()) -> set[str]:
    """The distributions `pip install 'hf_ext[extra]'` asks for, following `hf_ext[...]` self-references."""
    names: set[str] = set()
    for req in extras[extra]:
        name = _requirement_name(req)
        if name == "hf-ext":
            for inner in re.search(r"\[(.*)\]", req).group(1).split(","):
                if inner.strip() not in seen:
                    names |= _extra_distributions(inner.strip(), extras, seen | {extra})
        else:
            names.add(name)
    return names


def _third_party_imports(files) -> set[str]:
    """Top-level modules imported anywhere in `files` (absolute imports only, stdlib and hf_ext left out)."""
    modules = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m != "hf_ext"}


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return md.packages_distributions()  # scans every installed distribution: once per session, not per import


def _distributions_of(module: str) -> set[str]:
    dists = _packages_distributions().get(module)
    assert dists, f"module {module!r} is imported but no installed distribution provides it"
    return {d.lower().replace("_", "-") for d in dists}


@pytest.mark.parametrize("method", METHODS)
def test_extras_cover_every_import(method):
    """Each method's extra (plus the core) brings every third-party module its code imports; its Space module
    (`demo.py`) may also use `[spaces]`, and `demo.py`'s browser checks and `testing.py` (contract fixtures) `[test]`.
    Read from the code, not a list."""
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    assert method in extras, f"pyproject has no extra [{method}]"
    core = {_requirement_name(r) for r in project["dependencies"]}
    allowed = {
        "library": core | _extra_distributions(method, extras),
        "testing": core
        | _extra_distributions(method, extras)
        | _extra_distributions("spaces", extras)
        | _extra_distributions("test", extras),
    }
    files = sorted((REPO_ROOT / "hf_ext" / method).rglob("*.py"))
    missing = {}
    for path in files:
        role = "testing" if path.stem in ("demo", "testing") else "library"
        for module in _third_party_imports([path]):
            if not _distributions_of(module) & allowed[role]:
                missing.setdefault(module, []).append(path.name)
    assert not missing, f"hf_ext[{method}] misses {missing} (add them to pyproject's [{method}] extra)"


def test_core_imports_are_core_dependencies():
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    optional = {
        "federated",
        "spaces",
        "pretrained",
        "test",
    }  # core modules that import these do so lazily, inside functions
    allowed = core | set().union(*(_extra_distributions(e, extras) for e in optional))
    for module in _third_party_imports((REPO_ROOT / "hf_ext" / "core").rglob("*.py")):
        assert _distributions_of(module) & allowed, f"hf_ext.core imports {module!r}, in no core/optional extra"


def test_all_extra_is_every_extra():
    extras = _pyproject()["project"]["optional-dependencies"]
    # `docs` (the site's tooling) and `test` are for developers, not part of a method
    union = set().union(*(_extra_distributions(e, extras) for e in extras if e not in ("all", "test", "docs")))
    assert _extra_distributions("all", extras) == union


def _run(code: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **kwargs)


def test_import_hf_ext_is_light():
    code = (
        "import sys, json, hf_ext\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'methods': [m.name for m in hf_ext.list_methods()]}))"
    )
    proc = _run(code, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == [], f"`import hf_ext` imported {out['heavy']}"
    assert out["methods"] == METHODS


def test_auto_classes_register_whichever_comes_first():
    """Auto classes resolve after `import hf_ext` then transformers, transformers then hf_ext, or a modeling
    module imported directly (its config module imports transformers half-way through)."""
    checks = {
        "hf_ext first": "import hf_ext\nfrom transformers import AutoConfig\n",
        "transformers first": "from transformers import AutoConfig\nimport hf_ext\n",
        "config module first": "import hf_ext.orca.configuration_orca\nfrom transformers import AutoConfig\n",
    }
    for name, prelude in checks.items():
        code = prelude + (
            "from transformers import AutoModel\n"
            "config = AutoConfig.for_model('hf_ext_orca', embed_dim=8)\n"
            "print(type(AutoModel.from_config(config)).__name__, "
            "type(AutoConfig.for_model('hf_ext_tba_dhng')).__name__)"
        )
        proc = _run(code, cwd=REPO_ROOT)
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
        assert proc.stdout.split() == ["OrcaModel", "TbaDhngConfig"], name


def test_h2tune_peft_hook_installs_when_peft_is_imported():
    code = (
        "import importlib.util, sys, hf_ext\nassert 'peft' not in sys.modules\n"
        # an availability check (as transformers makes) asks for peft's spec without importing it: the hook must
        # still run at the real import
        "assert importlib.util.find_spec('peft') is not None and 'peft' not in sys.modules\n"
        "from peft.config import PeftConfigMixin\n"
        "import peft\n"
        "print(getattr(peft.PEFT_TYPE_TO_CONFIG_MAPPING.get('HF_EXT_H2TUNE'), '__name__', None))"
    )
    proc = _run(code, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "H2TuneConfig"


_BLOCK_TORCH = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('torch', 'transformers'):\n"
    "            raise ImportError(f'{name} is blocked in this test')\n"
    "sys.meta_path.insert(0, _Block())\n"
)


@pytest.mark.parametrize("argv", [["list"], ["--help"], ["reproduce", "--help"], ["orca", "--help"]])
def test_cli_list_and_help_need_no_torch(argv):
    code = _BLOCK_TORCH + f"from hf_ext.core.cli import main\nsys.argv = ['hf-ext']\nraise SystemExit(main({argv!r}))"
    proc = _run(code, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if argv == ["list"]:
        assert [line.split()[0] for line in proc.stdout.splitlines()] == METHODS


def test_missing_extra_names_the_pip_line():
    from hf_ext.core.lazy import MissingExtraError, require

    with pytest.raises(MissingExtraError, match=r"pip install 'hf_ext\[fede4rag\]'"):
        require("hf_ext_no_such_module", "fede4rag", purpose="CKKS")


def test_paths_work_dir_and_data_dir(tmp_path, monkeypatch):
    from hf_ext.core import paths

    monkeypatch.delenv("HF_EXT_HOME", raising=False)
    assert paths.work_dir("orca") == Path("runs") / "orca"
    monkeypatch.setenv("HF_EXT_HOME", str(tmp_path / "home"))
    assert paths.work_dir("orca", "artifact") == tmp_path / "home" / "orca" / "artifact"
    monkeypatch.setenv("HF_EXT_MULTIRC_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setenv("HF_EXT_DATA", str(tmp_path))
    (tmp_path / "multirc").mkdir()
    assert paths.data_dir("multirc") == tmp_path / "multirc"  # the variable's folder is missing: next place
    with pytest.raises(paths.DataNotFoundError, match=r"HF_EXT_MULTIRC_DATA.*HF_EXT_DATA"):
        paths.data_dir("multirc", tmp_path / "also-missing")  # an explicit folder never falls back
    with pytest.raises(paths.DataNotFoundError, match=r"\$HF_EXT_NO_SUCH_SET_DATA"):
        paths.data_dir("no_such_set")
    # outside the checkout, with nothing set: the error says what the data set is and where it comes from
    monkeypatch.setattr(paths, "_CHECKOUT", None)
    monkeypatch.delenv("HF_EXT_DATA")
    monkeypatch.delenv("HF_EXT_MULTIRC_DATA")
    with pytest.raises(paths.DataNotFoundError, match=r"no argument, no variable set.*MultiRC.*SplitFedLLM"):
        paths.data_dir("multirc")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(REPO_ROOT, tmp_path_factory.mktemp("dist"))


def test_assets_are_shipped(wheel):
    """The built wheel holds every card section, Space template and the solc-js server, and its licence."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for method in METHODS:
        assert f"hf_ext/_assets/model_cards/{method}.md" in names
        for file in ("app.py", "README.md", "requirements.txt"):
            assert f"hf_ext/_assets/spaces/{method}/{file}" in names
    for file in ("package.json", "package-lock.json", "server.js", "solc"):
        assert f"hf_ext/_assets/tools/solc/{file}" in names
    assert not any("node_modules" in n or "__pycache__" in n for n in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_wheel_ships_no_test_infrastructure(wheel):
    """The mock Hub server, the browser driver and the Spaces' browser checks are test code (tests/helpers), not
    package code: no module of the wheel defines or imports them."""
    zf = zipfile.ZipFile(wheel)
    names = [n for n in zf.namelist() if n.endswith(".py")]
    assert "hf_ext/core/testing_hub.py" not in names and "hf_ext/core/browser.py" not in names
    offenders = []
    for name in names:
        text = zf.read(name).decode("utf-8", "replace")
        if any(marker in text for marker in ("def browser_check", "class MockHub", "playwright", "helpers.hub_server")):
            offenders.append(name)
    assert not offenders, f"test infrastructure shipped in the wheel: {offenders}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory, wheel):
    """A fresh venv with the built wheel installed `--no-deps`; its other packages come from this venv's
    site-packages through a filtered view without hf_ext (see `venv_reusing_site_packages`)."""
    root = tmp_path_factory.mktemp("installed")
    python = venv_reusing_site_packages(root)
    # a clean environment: no PYTHONPATH / VIRTUAL_ENV / HF_EXT_* leaking the checkout into the fresh venv (pip
    # would then see the checkout's hf_ext as "already satisfied" and install nothing)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_EXT_", "PIP_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "--force-reinstall", str(wheel)], capture_output=True, text=True, timeout=300,
                          env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, env=env).stdout.strip())  # fmt: skip
    assert (site / "hf_ext" / "__init__.py").is_file(), f"the wheel was not installed:\n{proc.stdout[-3000:]}"
    work = root / "work"  # an empty folder outside the checkout
    work.mkdir()
    env.update(HF_HUB_OFFLINE="1", HF_EXT_CACHE=str(root / "cache"))
    return {"python": python, "bin": python.parent, "work": work, "env": env, "site": site}


def _in_venv(installed, args, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=installed["work"], env=installed["env"], capture_output=True, text=True,
                          timeout=kwargs.pop("timeout", 300), **kwargs)  # fmt: skip
    assert proc.returncode == 0, f"{args}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_installed_wheel_is_used(installed):
    proc = _in_venv(installed, [str(installed["python"]), "-c", "import hf_ext; print(hf_ext.__file__)"])
    assert Path(proc.stdout.strip()).is_relative_to(installed["site"]), proc.stdout


def test_installed_list_and_push_dry_run(installed):
    proc = _in_venv(installed, [str(installed["bin"] / "hf-ext"), "list"])
    assert [line.split()[0] for line in proc.stdout.splitlines()] == METHODS
    make = (
        "import torch, hf_ext\nfrom hf_ext.core.hub import save_artifact\n"
        "from hf_ext.orca import OrcaModel\nfrom hf_ext.orca.testing import tiny_config\n"
        "torch.manual_seed(0)\nsave_artifact(OrcaModel(tiny_config()).eval(), 'art', hf_ext.get_method('orca'))"
    )
    _in_venv(installed, [str(installed["python"]), "-c", make])
    proc = _in_venv(installed, [str(installed["bin"] / "hf-ext"), "push", "orca", "--repo-id", "someone/orca",
                                "--from", "art", "--dry-run", "--out", "push", "--allow-untrained"])  # fmt: skip
    folder = installed["work"] / "push"
    card = (folder / "README.md").read_text()
    assert "ORCA" in card and "untrained" in card.lower()  # a random-init artifact is published as such
    assert (folder / "model.safetensors").is_file() or any(folder.rglob("model.safetensors")), proc.stdout


def test_installed_space_builds(installed):
    code = (
        "import hf_ext\nfrom hf_ext.core.cli import load_space_app\n"
        "spec = hf_ext.get_method('orca')\nprint(spec.space_dir)\n"
        "demo = load_space_app(spec).build_demo()\nprint(type(demo).__name__)"
    )
    proc = _in_venv(installed, [str(installed["python"]), "-c", code])
    space_dir, kind = proc.stdout.split()[-2:]
    assert Path(space_dir).is_relative_to(installed["site"]) and kind == "Blocks"


@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None, reason="CodeBC needs node + npm")
def test_installed_codebc_setup_and_score(installed):
    """`hf-ext setup codebc` installs solc-js into the user cache (npm's own cache makes it offline after
    `make tools`), and `hf-ext codebc score` scores two released files outside the checkout."""
    _in_venv(installed, [str(installed["bin"] / "hf-ext"), "setup", "codebc"], timeout=600)
    released = SHARED_DATA / "codebc" / "released_outputs" / "codellama"
    preds = installed["work"] / "preds"
    preds.mkdir(exist_ok=True)
    for name in ("Address.txt_0.sol", "Base64.txt_0.sol"):
        shutil.copy(released / name, preds / name)
    refs = SHARED_DATA / "codebc" / "blockchain_humaneval" / "clean_code"
    proc = _in_venv(installed, [str(installed["bin"] / "hf-ext"), "codebc", "score", "--predictions", "preds",
                                "--references", str(refs), "--no-analyse", "--json"])  # fmt: skip
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["total"] == 2 and sorted(summary["files"]) == ["Address.txt_0.sol", "Base64.txt_0.sol"]
    assert summary["compiled"] >= 1, summary["failure_reasons"]  # the released Address.txt_0 compiles
