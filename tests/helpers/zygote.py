"""A preloaded Python for the docs-page tests: one server per test worker imports torch and transformers once, then
forks a child per command (`hf-ext ...` in a page's shell block, or a page's block driver), so each of the ~60
commands the pages run skips the ~10 CPU-seconds that importing torch + transformers costs a fresh interpreter.

The child is the command as a user runs it, started from a copy of an interpreter that has imported those libraries:
it gets the caller's argv, working folder, whole environment and its stdin / stdout / stderr (passed over the Unix
socket as file descriptors), runs `hf_ext.core.cli.main` (what the `hf-ext` console script calls) or the script, and
its exit status is the caller's. Only libraries that read nothing the pages change at import time are preloaded
(the method modules, some of which read `$HF_EXT_HOME` at import, load in the child). When the caller dies (a
timeout), its child is killed. The packaging tests still run the real console script.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

PRELOAD = (
    "torch",
    "numpy",
    "transformers",
    "transformers.modeling_utils",
    "transformers.trainer",
    "datasets",
    "safetensors.torch",
    "hf_ext",
    "hf_ext.core.cli",
)

# The client: stdlib only, started with -S (no site-packages) so it costs milliseconds. Its name picks the kind:
# `hf-ext ARGS` runs the CLI, `zygote-python SCRIPT ARGS` runs a script.
CLIENT = """
import json, os, socket, struct, sys
kind = "hf-ext" if os.path.basename(sys.argv[0]) == "hf-ext" else "python"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({sock!r})
body = json.dumps({{"kind": kind, "argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(s, [struct.pack("!Q", len(body))], [0, 1, 2])
s.sendall(body)
reply = b""
while True:
    chunk = s.recv(64)
    if not chunk:
        break
    reply += chunk
if not reply:
    sys.exit("zygote: the command's process ended without an exit status (killed?)")
sys.exit(int(reply))
"""


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client closed the connection")
        data += chunk
    return data


def _run_child(conn: socket.socket, request: dict) -> int:
    import random
    import runpy
    import threading
    import traceback

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    random.seed()  # a fresh interpreter's random state, not the server's copy
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()

    def watch():  # the caller gone (killed on a timeout) takes its command with it
        try:
            while conn.recv(64):
                pass
        except OSError:
            pass
        os._exit(137)

    threading.Thread(target=watch, daemon=True).start()
    try:
        if request["kind"] == "hf-ext":
            from hf_ext.core.cli import main

            sys.argv = ["hf-ext", *request["argv"]]
            code = main()
        else:
            sys.argv = list(request["argv"])
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:  # noqa: BLE001 — printed as the interpreter would, exit status 1
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    return code


def serve(sock_path: str) -> None:
    """The server loop: preload, listen on `sock_path`, fork one child per request."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(16)
    listener.settimeout(1.0)
    Path(sock_path + ".ready").write_text(str(os.getpid()))
    while True:
        try:  # reap finished children
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        header, fds, _, _ = socket.recv_fds(conn, 8, 3)
        request = json.loads(_recv_exact(conn, struct.unpack("!Q", header)[0]))
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            code = 1
            try:
                code = _run_child(conn, request)
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    conn.sendall(str(code).encode())
                finally:
                    os._exit(code if 0 <= code < 256 else 1)
        for fd in fds:
            os.close(fd)
        conn.close()


class Zygote:
    """Starts the server (`env`: the environment it imports under) and writes the two client commands into
    `bin_dir`: `bin_dir/hf-ext` (put it first on PATH) and `bin_dir/zygote-python` (`zygote-python SCRIPT`)."""

    def __init__(self, bin_dir: Path, env: dict[str, str], timeout: float = 300.0):
        bin_dir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = bin_dir
        self.sock = str(bin_dir / "zygote.sock")
        self.log = bin_dir / "zygote.log"
        here = str(Path(__file__).parent)
        code = f"import sys; sys.path.insert(0, {here!r}); from zygote import serve; serve({self.sock!r})"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        deadline = time.monotonic() + timeout
        while not Path(self.sock + ".ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the zygote did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.1)
        client = f"#!{sys.executable} -S\n" + CLIENT.format(sock=self.sock)
        for name in ("hf-ext", "zygote-python"):
            path = bin_dir / name
            path.write_text(client)
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.python = str(bin_dir / "zygote-python")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
