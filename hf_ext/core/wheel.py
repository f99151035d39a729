"""Building the hf_ext wheel from its checkout: what a Space installs (`wheels/` in the Space repo) and what the
tests install outside the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


class WheelBuildError(RuntimeError):
    """The wheel could not be built (no checkout, or `pip wheel` failed); the message says what to do instead."""


def checkout_root() -> Path | None:
    """The source checkout hf_ext is imported from (an editable install), or `None` for an installed wheel."""
    root = Path(__file__).resolve().parents[2]  # hf_ext/core/wheel.py -> the folder holding hf_ext/
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "hf_ext"' in pyproject.read_text():
        return root
    return None


def build_wheel(checkout: Path, out: Path) -> Path:
    """`pip wheel --no-deps` of a copy of the checkout at `checkout` into `out` (an in-tree build would leave build/
    and *.egg-info in the checkout); returns the wheel. The copy follows the `hf_ext/_assets` links, so the wheel
    holds real files. Nothing is downloaded (`--no-index --no-build-isolation`)."""
    src = out / "src" / "hf_ext"
    ignore = shutil.ignore_patterns(".git", ".venv", "runs", "node_modules", "__pycache__", "*.egg-info", "build",
                                    "dist", "tests", "docs", "benchmarks", "site")  # fmt: skip
    shutil.copytree(checkout, src, ignore=ignore)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=600)  # fmt: skip
    shutil.rmtree(out / "src", ignore_errors=True)
    if proc.returncode != 0:
        raise WheelBuildError(f"pip wheel failed: {proc.stderr[-3000:]}")
    (built,) = out.glob("hf_ext-*.whl")
    return built


def build_space_wheel(out: Path) -> Path:
    """The wheel a Space push uploads, built from the checkout hf_ext runs from; refuses with the fix when hf_ext is
    an installed wheel (there is no source to build from)."""
    root = checkout_root()
    if root is None:
        raise WheelBuildError(
            "hf_ext is installed from a wheel, not run from its checkout, so the Space's wheel cannot be built here; "
            "pass --wheel PATH (the hf_ext wheel you installed, or `python -m pip wheel --no-deps -w dist .` in a "
            "checkout)"
        )
    return build_wheel(root, out)
