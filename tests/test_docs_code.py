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


def test_zygote_commands_get_the_callers_argv_folder_environment_streams_and_exit_status(zygote, tmp_path):
    """What a page's command sees when it forks from the preloaded interpreter is what a fresh one would see."""
    if zygote is None:
        pytest.skip("HF_EXT_TEST_NO_ZYGOTE=1")
    script = tmp_path / "probe.py"
    script.write_text(
        "import os, sys\n"
        "print(os.getcwd(), os.environ['PROBE'], sys.argv[1:], sys.stdin.read().strip())\n"
        "print('to stderr', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    env = {**os.environ, "PROBE": "from-the-caller"}
    proc = subprocess.run([zygote.python, str(script), "a b"], cwd=tmp_path, env=env, input="piped",
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 3
    assert proc.stdout.strip() == f"{tmp_path} from-the-caller ['a b'] piped" and proc.stderr.strip() == "to stderr"
    hf_ext = str(zygote.bin_dir / "hf-ext")
    bad = subprocess.run([hf_ext, "reproduce", "no-such-method"], capture_output=True, text=True, timeout=120)
    real = subprocess.run([str(Path(sys.executable).parent / "hf-ext"), "reproduce", "no-such-method"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == real.returncode != 0 and bad.stderr == real.stderr
    ok = subprocess.run([hf_ext, "list"], capture_output=True, text=True, timeout=120)
    assert (
        ok.returncode == 0
        and ok.stdout
        == subprocess.run(
            [str(Path(sys.executable).parent / "hf-ext"), "list"], capture_output=True, text=True, timeout=120
        ).stdout
    )
