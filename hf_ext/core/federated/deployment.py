"""Flower's deployment engine on 127.0.0.1: [`LoopbackFederation`] and [`run_deployment`] (part of
[`hf_ext.core.federated`]).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hf_ext.core.federated.results import RESULT_DIR_ENV, Record, load_result

# Environment of every Flower process started here: no telemetry, no update check, no `uv sync` from PyPI.
_FLWR_OFFLINE_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
}


# --- Deployment engine on loopback ------------------------------------------------------------------------------------

# `flwr run` exits 0 even when the run fails, so its output (ANSI colours removed) is searched for Flower's ERROR
# log lines, tracebacks, exit-code notices and an unreachable SuperLink.
_FAILURE_LINE = re.compile(r"^ERROR\b|Traceback \(most recent call last\)|Exit Code: \d+|Connection to the SuperLink")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open until chosen, so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _proc_stat(pid: int | str) -> list[str] | None:
    """Fields of `/proc/<pid>/stat` after the command name (Linux); `None` for a gone or zombie process."""
    try:
        # The command name is in parentheses and may contain spaces, so split after its closing one.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in "ZX" else fields


def _descendants(pid: int) -> list[tuple[int, str]]:
    """Living descendants of `pid` as `(pid, start time)` pairs (Linux `/proc`; empty elsewhere).

    Flower starts `flower-superexec` in a new session, so killing our process groups alone would miss it. The start
    time tells a descendant from a later process that reuses its pid.
    """
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        fields = _proc_stat(entry.name)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append((int(entry.name), fields[19]))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _alive(pid: int, started: str) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and fields[19] == started


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise ValueError(f"run/node config values must be bool, int, float or str, got {type(value).__name__}")


class LoopbackFederation:
    """A SuperLink and N SuperNodes on 127.0.0.1 (Flower's deployment engine), for `flwr run`.

    Starts `flower-superlink --insecure` and `flower-supernode --insecure` processes on free loopback ports with a
    private `FLWR_HOME` (its `config.toml` holds one connection, `loopback`), telemetry, update checks and runtime
    dependency installation off. Every process runs from this interpreter's `bin` folder, which is also put on
    `PATH` because Flower starts `flower-superexec` by name. [`stop`] (or leaving the `with` block) kills every
    process it started, with their process groups and descendants. Use one federation for several runs to pay the
    start-up once.

    Args:
        num_supernodes (`int`): number of SuperNodes; node `i` gets `partition-id=i num-partitions=N`.
        node_configs (`Sequence[Mapping]`, *optional*): extra node config per SuperNode.
        startup_timeout (`float`, defaults to `60`): seconds to wait for the processes to listen.
        workdir (`str` or `os.PathLike`, *optional*): where `FLWR_HOME`, logs and results go; defaults to a new
            temporary folder, removed by [`stop`].

    Example:

    ```python
    with LoopbackFederation(num_supernodes=2) as federation:
        result = federation.run("path/to/app", run_config={"num-server-rounds": 1})
    ```
    """

    def __init__(
        self,
        num_supernodes: int,
        *,
        node_configs: Sequence[Mapping[str, Any]] | None = None,
        startup_timeout: float = 60.0,
        workdir: str | os.PathLike | None = None,
    ) -> None:
        if num_supernodes < 1:
            raise ValueError(f"num_supernodes must be at least 1, got {num_supernodes}")
        if node_configs is not None and len(node_configs) != num_supernodes:
            raise ValueError(f"{len(node_configs)} node_configs for {num_supernodes} SuperNodes")
        self.num_supernodes = num_supernodes
        self.node_configs = [dict(c) for c in node_configs] if node_configs else [{} for _ in range(num_supernodes)]
        self.startup_timeout = startup_timeout
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else None
        self._processes: list[subprocess.Popen] = []
        self._logs: list[Any] = []
        self.superlink_port: int | None = None

    # -- life cycle -------------------------------------------------------------------------------------------

    def __enter__(self) -> LoopbackFederation:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        """Process ids of the SuperLink and SuperNodes started (not their children)."""
        return [process.pid for process in self._processes]

    @property
    def bin_dir(self) -> Path:
        # Not resolved: a venv's `python` is a symlink to the base interpreter, whose bin has no Flower scripts.
        return Path(sys.executable).parent

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(_FLWR_OFFLINE_ENV)
        env["FLWR_HOME"] = str(self.workdir / "flwr_home")
        env[RESULT_DIR_ENV] = str(self.workdir / "results")
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 (closed in stop())
        self._logs.append(log)
        process = subprocess.Popen(
            [str(self.bin_dir / args[0]), *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self._env(),
            cwd=self.workdir,
            start_new_session=True,  # its own process group, killed as a whole in stop()
        )
        self._processes.append(process)
        return process

    def _wait_listening(self, name: str, process: subprocess.Popen, port: int, deadline: float) -> None:
        while not _port_open(port):
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with code {process.returncode} before listening on 127.0.0.1:{port}:\n"
                    + _tail(self.workdir / f"{name}.log")
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{name} did not listen on 127.0.0.1:{port} within {self.startup_timeout} s:\n"
                    + _tail(self.workdir / f"{name}.log")
                )
            time.sleep(0.2)

    def start(self) -> None:
        """Start the SuperLink, then the SuperNodes, and wait until all of them listen."""
        if self._processes:
            raise RuntimeError("this federation is already started")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="hf_ext_flwr_"))
        for sub in ("flwr_home", "results"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        ports = _free_ports(1 + self.num_supernodes)
        self.superlink_port, node_ports = ports[0], ports[1:]
        (self.workdir / "flwr_home" / "config.toml").write_text(
            '[superlink]\ndefault = "loopback"\n\n'
            f'[superlink.loopback]\naddress = "127.0.0.1:{self.superlink_port}"\ninsecure = true\n'
        )
        deadline = time.monotonic() + self.startup_timeout
        try:
            superlink = self._spawn(
                "superlink",
                ["flower-superlink", "--insecure", "--host", "127.0.0.1", "--port", str(self.superlink_port),
                 "--disable-runtime-dependency-installation"],
            )  # fmt: skip
            self._wait_listening("superlink", superlink, self.superlink_port, deadline)
            for i, port in enumerate(node_ports):
                node_config = {"partition-id": i, "num-partitions": self.num_supernodes, **self.node_configs[i]}
                self._spawn(
                    f"supernode-{i}",
                    ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{self.superlink_port}",
                     "--host", "127.0.0.1", "--port", str(port),
                     "--node-config", " ".join(f"{k}={_toml_value(v)}" for k, v in node_config.items())],
                )  # fmt: skip
            for i, (process, port) in enumerate(zip(self._processes[1:], node_ports)):
                self._wait_listening(f"supernode-{i}", process, port, deadline)
        except BaseException:
            self.stop()
            raise

    def stop(self, grace: float = 10.0) -> None:
        """Kill every process this federation started (SuperNodes first), their groups and descendants.

        Args:
            grace (`float`, defaults to `10`): seconds between SIGTERM and SIGKILL.
        """
        processes, self._processes = list(reversed(self._processes)), []
        # Collect descendants before anything dies: orphans are re-parented and could no longer be found.
        tracked = [child for process in processes for child in _descendants(process.pid)]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for process in processes:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, sig)
            for pid, started in tracked:
                if _alive(pid, started):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
            deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
            while any(p.poll() is None for p in processes) or any(_alive(*child) for child in tracked):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            else:
                break  # everything is gone: no SIGKILL needed
        for log in self._logs:
            log.close()
        self._logs = []
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    # -- runs ---------------------------------------------------------------------------------------------------

    def logs(self) -> str:
        """The SuperLink's and SuperNodes' logs so far (for error messages and debugging)."""
        if self.workdir is None:
            return ""
        return "\n".join(f"===== {p.name}\n{_ANSI.sub('', _tail(p))}" for p in sorted(self.workdir.glob("*.log")))

    def run(
        self, app_dir: str | os.PathLike, *, run_config: Mapping[str, Any] | None = None, timeout: float = 300.0
    ) -> dict[str, Record]:
        """Run a Flower app (`flwr run <app_dir> loopback --stream`) and return what its ServerApp saved.

        Args:
            app_dir (`str` or `os.PathLike`): the app folder (its `pyproject.toml` names the components).
            run_config (`Mapping`, *optional*): run config overrides; keys must exist in the app's
                `[tool.flwr.app.config]`.
            timeout (`float`, defaults to `300`): seconds for the whole run.

        Returns:
            `dict[str, ArrayRecord | MetricRecord | ConfigRecord]`: the ServerApp's `context.state` as of its last
            [`save_result`].
        """
        if self.workdir is None or not self._processes:
            raise RuntimeError("start the federation first (use it as a context manager)")
        results = self.workdir / "results"
        before = set(results.glob("result-*.pb"))
        command = [str(self.bin_dir / "flwr"), "run", str(Path(app_dir).resolve()), "loopback", "--stream"]
        if run_config:
            overrides = self.workdir / f"run-config-{uuid.uuid4().hex[:8]}.toml"
            overrides.write_text("".join(f"{_toml_value(k)} = {_toml_value(v)}\n" for k, v in run_config.items()))
            command += ["--run-config", str(overrides)]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self._env(),
            cwd=self.workdir,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            raise TimeoutError(
                f"`flwr run` did not finish within {timeout} s. Output:\n{output.decode(errors='replace')[-4000:]}\n"
                + self.logs()
            ) from None
        text = _ANSI.sub("", output.decode(errors="replace"))
        failures = [line.strip() for line in text.splitlines() if _FAILURE_LINE.search(line)]
        if process.returncode != 0 or failures:
            raise RuntimeError(
                f"`flwr run` failed (exit code {process.returncode}; flagged lines: {failures[:5]}). Output:\n"
                f"{text[-6000:]}\n{self.logs()}"
            )
        new = sorted(set(results.glob("result-*.pb")) - before)
        if len(new) != 1:
            raise RuntimeError(
                f"the ServerApp saved {len(new)} results (expected 1: does its main end with save_result?). "
                f"Output:\n{text[-6000:]}\n{self.logs()}"
            )
        return load_result(new[0])


def run_deployment(
    app_dir: str | os.PathLike,
    *,
    num_supernodes: int,
    run_config: Mapping[str, Any] | None = None,
    node_configs: Sequence[Mapping[str, Any]] | None = None,
    timeout: float = 300.0,
) -> dict[str, Record]:
    """Run a Flower app on a fresh [`LoopbackFederation`] and tear it down.

    Args:
        app_dir (`str` or `os.PathLike`): the app folder.
        num_supernodes (`int`): number of SuperNodes.
        run_config (`Mapping`, *optional*): run config overrides (keys must exist in the app's config).
        node_configs (`Sequence[Mapping]`, *optional*): extra node config per SuperNode.
        timeout (`float`, defaults to `300`): seconds for the run (start-up has its own 60 s bound).

    Returns:
        `dict[str, ArrayRecord | MetricRecord | ConfigRecord]`: what the ServerApp saved with [`save_result`].
    """
    with LoopbackFederation(num_supernodes, node_configs=node_configs) as federation:
        return federation.run(app_dir, run_config=run_config, timeout=timeout)
