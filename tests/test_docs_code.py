"""Every Python and shell block of the README and the docs runs (see `tests/helpers/doc_blocks.py` for the rules),
or says beside it why it does not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.doc_blocks import blocks, driver_script
from helpers.zygote import Zygote

REPO_ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"docs/cli.md"}  # written by scripts/gen_cli_docs.py from the parsers (usage text, not examples)
PAGES = sorted(
    p
    for p in [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", *(REPO_ROOT / "docs").rglob("*.md")]
    if p.relative_to(REPO_ROOT).as_posix() not in GENERATED
)
RUNNABLE = [p for p in PAGES if any(b.skip_reason is None for b in blocks(p))]


def test_every_page_is_parsed_and_skips_say_why():
    for page in PAGES:
        for block in blocks(page):  # raises on a `not run` marker without a reason
            assert block.skip_reason is None or len(block.skip_reason) > 3, f"{page}:{block.line}"


def _page_env() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO_ROOT),
        "MPLBACKEND": "Agg",
    }


@pytest.fixture(scope="session")
def zygote(tmp_path_factory):
    """One preloaded interpreter per test worker (`helpers/zygote.py`): the pages' `hf-ext` commands and block
    drivers fork from it instead of importing torch + transformers afresh (~10 CPU-s each, ~60 commands).
    `HF_EXT_TEST_NO_ZYGOTE=1` runs every command in a fresh interpreter instead."""
    if os.environ.get("HF_EXT_TEST_NO_ZYGOTE"):
        yield None
        return
    z = Zygote(tmp_path_factory.mktemp("zygote"), _page_env())
    yield z
    z.close()


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_page_code_blocks_run(page, tmp_path, zygote):
    script = tmp_path / "run_blocks.py"
    script.write_text(driver_script(blocks(page), REPO_ROOT))
    work = tmp_path / "work"
    work.mkdir()
    env = {**_page_env(), "HF_EXT_HOME": str(work / "runs")}
    python = sys.executable
    if zygote is not None:
        env["PATH"] = f"{zygote.bin_dir}{os.pathsep}{env['PATH']}"
        python = zygote.python
    proc = subprocess.run([python, str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{page.name}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
