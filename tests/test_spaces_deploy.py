"""A Space deployed as Hugging Face would: its folder as pushed (app.py, README.md, requirements.txt, wheels/),
`pip install -r requirements.txt` into a fresh virtual environment, then `python app.py`, driven in headless
Chromium like a visitor.

The fresh venv installs hf_ext only from the locally built wheel (`--no-index`: nothing is downloaded); its other
requirements come from the test venv's site-packages, linked in through a `.pth` file pointing at a view of that
folder without hf_ext (so the checkout's editable install cannot leak in). That costs seconds, not a reinstall of
torch. GPMFS is deployed in `make test`; the other Spaces' deploy tests are `slow`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import browser

import hf_ext
from hf_ext.core.hub import write_space_folder
from hf_ext.core.testing import build_wheel, venv_reusing_site_packages

ROOT = Path(__file__).resolve().parents[1]
FAST = "gpmfs"
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(ROOT, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def fresh_python(tmp_path_factory) -> Path:
    """A new venv whose site-packages sees the test venv's packages except hf_ext (through a filtered view)."""
    return venv_reusing_site_packages(tmp_path_factory.mktemp("deploy"))


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def deployed(method: str, wheel: Path, python: Path, tmp: Path):
    """Installs the Space's requirements into `python`'s venv and serves `app.py`; yields `(url, space_dir, log)`."""
    spec = hf_ext.get_method(method)
    space = write_space_folder(spec, tmp / "space", model_repo_id=f"tester/{method}", wheel=wheel)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False", HF_HUB_DISABLE_TELEMETRY="1")
    # pip runs from the venv's python (the test venv's pip, reached through the .pth view)
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-build-isolation",
            "-q",
            "--disable-pip-version-check",
            "-r",
            "requirements.txt",
        ],
        cwd=space,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    where = subprocess.check_output(
        [str(python), "-c", "import hf_ext; print(hf_ext.__file__)"], cwd=space, env=env, text=True
    ).strip()
    assert where.startswith(str(python.parent.parent)), f"hf_ext imported from {where}, not from the wheel"
    port = _free_port()
    env.update(GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port))
    log = tmp / "app.log"
    with open(log, "w") as out:
        app = subprocess.Popen([str(python), "app.py"], cwd=space, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert app.poll() is None, f"app.py exited with {app.returncode}:\n{log.read_text()[-3000:]}"
            with contextlib.closing(socket.socket()) as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail(f"app.py did not listen within 300 s:\n{log.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{port}/", space, log
    finally:
        app.terminate()
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            app.kill()


def _drive(method: str, url: str) -> None:
    spec = hf_ext.get_method(method)
    checks = browser.browser_script(spec)
    with browser.chromium() as context:
        page = browser.open_space(context, url)
        checks["browser_check"](page)
        browser.assert_no_traceback(page)
        page.close()
        page = browser.open_space(context, url)
        checks["browser_check_bad_input"](page)
        page.close()


def test_gpmfs_space_deploys_from_wheel(wheel, fresh_python, tmp_path):
    from helpers.browser_checks.gpmfs import browser_check_caps
    from playwright.sync_api import expect

    requirements = (hf_ext.get_method(FAST).space_dir / "requirements.txt").read_text()
    assert f"./wheels/{wheel.name}[gpmfs]" in requirements, "the Space must install the pinned wheel it ships"
    with deployed(FAST, wheel, fresh_python, tmp_path) as (url, space, log):
        assert not any((space / p).exists() for p in ("runs", "shared")), "a Space reads nothing outside itself"
        _drive(FAST, url)
        wide = tmp_path / "wide.csv"
        wide.write_text(",".join(f"c{i}" for i in range(3000)) + "\n" + ",".join("1" for _ in range(3000)) + "\n")
        with browser.chromium() as context:
            page = browser.open_space(context, url)
            # offline, the linked model repo cannot load: the page says so instead of failing
            expect(page.locator("#gpmfs-model")).to_contain_text("could not load the linked model repo tester/gpmfs")
            browser_check_caps(page, wide)
            page.close()
    assert "Traceback" not in log.read_text()


SLOW = [m.name for m in hf_ext.list_methods() if m.name != FAST]


@pytest.mark.slow
@pytest.mark.parametrize("method", SLOW)
def test_space_deploys_from_wheel(method, wheel, fresh_python, tmp_path):
    with deployed(method, wheel, fresh_python, tmp_path) as (url, _, _):
        _drive(method, url)
