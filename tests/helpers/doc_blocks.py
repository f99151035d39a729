"""The code blocks of the README and the docs pages, and how the suite runs them (`tests/test_docs_code.py`).

Rules a page follows:
- every ```python, ```bash, ```sh, ```shell and ```console block runs, in page order, in one process per page, in a
  fresh working folder outside the checkout (python blocks share one namespace; shell blocks run with
  `bash -euo pipefail`, with the venv's `hf-ext` on PATH, `HF_EXT_HOME` in the folder and `HF_HUB_OFFLINE=1`; the
  page's process and its `hf-ext` commands fork from a preloaded interpreter, `helpers/zygote.py`, unless
  `HF_EXT_TEST_NO_ZYGOTE=1`);
- a block that cannot run in the suite has `<!-- not run: REASON -->` on the line before its fence (a REASON is
  required: a network install, a GPU, a 4-minute reproduction `make run` already runs ...);
- ```text, ```json, ```yaml and other languages are shown, not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_LANGS = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash", "console": "bash"}
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>[^>]*?)\s*-->")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)[^\n]*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str  # "python" or "bash"
    code: str
    skip_reason: str | None


def blocks(path: Path) -> list[Block]:
    """The runnable-language blocks of a Markdown page (skipped ones included, with their reason)."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent, lang = m["fence"], m["indent"], m["lang"].lower()
        j = i + 1
        body = []
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        if lang in RUN_LANGS:
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            skip = NOT_RUN.search(prev)
            if skip is not None and not skip["reason"]:
                raise ValueError(f"{path}:{i + 1}: `<!-- not run: -->` needs a reason")
            code = "\n".join(body)
            if RUN_LANGS[lang] == "bash" and lang == "console":  # "$ cmd" lines only
                code = "\n".join(line[2:] for line in body if line.startswith("$ "))
            out.append(Block(path, i + 1, RUN_LANGS[lang], code + "\n", skip["reason"] if skip else None))
        i = j + 1
    return out


BLOCK_TIMEOUT = 300  # seconds per shell block

DRIVER = """
import os, subprocess, sys, time
ns = {"__name__": "__main__"}
for label, lang, code in BLOCKS:
    t0 = time.time()
    print(f"--- {label} ({lang})", flush=True)
    if lang == "python":
        exec(compile(code, label, "exec"), ns)
    else:
        try:  # a block that never ends (a server, a prompt) fails here, named, instead of hanging the page
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code], timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            sys.exit(f"{label}: the shell block ran past {BLOCK_TIMEOUT} s (mark it `<!-- not run: REASON -->`?)")
        if proc.returncode != 0:
            sys.exit(f"{label}: the shell block exited {proc.returncode}")
    print(f"--- {label} ok in {time.time() - t0:.1f} s", flush=True)
"""


def driver_script(page_blocks: list[Block], root: Path) -> str:
    """One Python program that runs a page's blocks in order (labels are `page:line` for the failure message)."""
    items = [(f"{b.path.relative_to(root)}:{b.line}", b.lang, b.code) for b in page_blocks if b.skip_reason is None]
    return f"BLOCKS = {items!r}\nBLOCK_TIMEOUT = {BLOCK_TIMEOUT}\n" + DRIVER
