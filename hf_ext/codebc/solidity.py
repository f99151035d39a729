"""The real Solidity toolchain behind CodeBC's metrics: solc-js (npm `solc`) for compilation, Slither for analysis.

Both run offline from a local solc-js install ([`solc_dir`]): `$HF_EXT_SOLC_DIR`, else the checkout's `tools/solc/`
after `make tools`, else the user cache (`~/.cache/hf_ext/solc`) that `hf-ext setup codebc` fills from the files
shipped in the wheel (it runs `npm ci` once; Node.js and npm must be installed):

- [`SolcServer`] keeps **one** node process with solc-js loaded and sends it one JSON request per contract, which
  avoids the ~1 s `soljson.js` start-up of a process per file (see `benchmarks/codebc_compile.py`).
- [`analyze`] runs Slither's Python API on a contract, with crytic-compile pointed at `tools/solc/solc`, a small
  node executable that answers `--version` and `--standard-json` through solc-js (the native `solc` binary is not
  installable offline).

Every failure is reported per file as a [`CompileResult`] / [`AnalysisResult`] with a reason (`"syntax"`,
`"version_pragma"`, `"type"`, `"node_missing"`, `"analyser_crash"`, ...) instead of an exception, so a scoring run
never aborts on one bad file.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hf_ext.core.paths import asset, cache_dir

SOLC_FILES = ("package.json", "package-lock.json", "server.js", "solc")


def _solcjs_installed(folder: Path) -> bool:
    return (folder / "node_modules" / "solc" / "soljson.js").is_file()


def solc_dir() -> Path:
    """The solc-js folder in use: `$HF_EXT_SOLC_DIR`, else the shipped `tools/solc` when solc-js is installed there
    (the checkout after `make tools`), else `cache_dir("solc")` (what `hf-ext setup codebc` installs)."""
    if os.environ.get("HF_EXT_SOLC_DIR"):
        return Path(os.environ["HF_EXT_SOLC_DIR"])
    shipped = asset("tools", "solc")
    return shipped if _solcjs_installed(shipped) else cache_dir("solc")


TOOLS_DIR = solc_dir()
SERVER_JS = TOOLS_DIR / "server.js"
SHIM = TOOLS_DIR / "solc"
SOLC_JS_VERSION = "0.8.37"


class ToolchainError(RuntimeError):
    """node or solc-js is missing or the compile server died; the message names the fix."""


def node_executable() -> str | None:
    return os.environ.get("HF_EXT_NODE") or shutil.which("node")


def toolchain_problem() -> str | None:
    """`None` when node and the project-local solc-js are usable, else one line saying what is missing."""
    if node_executable() is None:
        return "node is not installed (solc-js needs Node.js >= 12 on PATH)"
    if not _solcjs_installed(TOOLS_DIR):
        return f"solc-js is not installed in {TOOLS_DIR} (run `hf-ext setup codebc`, or `make tools` in a checkout)"
    return None


def install_solc(target: str | os.PathLike | None = None, *, prefer_offline: bool = True) -> Path:
    """Installs solc-js (the version pinned by the shipped `package-lock.json`) into `target` (default
    `cache_dir("solc")`): copies the server and shim shipped with hf_ext, then runs `npm ci` there.

    Raises [`ToolchainError`] naming what is missing when Node.js or npm is not installed.
    """
    target = Path(target) if target is not None else cache_dir("solc")
    npm = shutil.which("npm")
    if node_executable() is None or npm is None:
        raise ToolchainError(
            "CodeBC needs Node.js and npm for solc-js; install them (Debian/Ubuntu: `apt-get install nodejs npm`), "
            "then run `hf-ext setup codebc` again"
        )
    target.mkdir(parents=True, exist_ok=True)
    for name in SOLC_FILES:
        shutil.copy2(asset("tools", "solc", name), target / name)
    cmd = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"] + (["--prefer-offline"] if prefer_offline else [])
    done = subprocess.run(cmd, cwd=target, capture_output=True, text=True)
    if done.returncode != 0 or not _solcjs_installed(target):
        raise ToolchainError(f"`npm ci` in {target} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return target


def setup_main(argv: list[str] | None = None) -> int:
    """`hf-ext setup codebc`: installs solc-js into the user cache (or `--target DIR`)."""
    from hf_ext.core.arguments import ArgumentParser

    parser = ArgumentParser(prog="hf-ext setup codebc", description=install_solc.__doc__.split("\n\n")[0])
    parser.add_argument("--target", help="folder to install into (default: ~/.cache/hf_ext/solc or $HF_EXT_CACHE)")
    args = parser.parse_args(argv)
    folder = install_solc(args.target)
    print(
        f"solc-js installed in {folder}"
        + ("" if args.target is None or Path(args.target) == TOOLS_DIR else f"; set HF_EXT_SOLC_DIR={folder} to use it")
    )
    return 0


@dataclass
class CompileResult:
    """Outcome of compiling one source file.

    Args:
        name (`str`): the file name.
        ok (`bool`): no error-severity diagnostics (warnings allowed).
        reason (`str`, *optional*): why it failed: `"syntax"`, `"version_pragma"`, `"declaration"`, `"type"`,
            `"codegen"`, `"empty"`, `"node_missing"`, `"server_error"` or `"other"`.
        errors (`list[str]`): the error messages.
        warnings (`int`): number of warnings.
        contracts (`list[str]`): `file:Contract` names produced.
    """

    name: str
    ok: bool
    reason: str | None = None
    errors: list[str] = field(default_factory=list)
    warnings: int = 0
    contracts: list[str] = field(default_factory=list)


def _reason(errors: list[dict]) -> str:
    types = [e.get("type", "") for e in errors if e.get("severity") == "error"]
    messages = " ".join(e.get("message", "") for e in errors if e.get("severity") == "error")
    if "requires different compiler version" in messages:
        return "version_pragma"
    for t, reason in (
        ("ParserError", "syntax"),
        ("SyntaxError", "syntax"),
        ("DeclarationError", "declaration"),
        ("TypeError", "type"),
        ("CodeGenerationError", "codegen"),
        ("CompilerError", "codegen"),
        ("ServerError", "server_error"),
    ):
        if t in types:
            return reason
    return "other"


class SolcServer:
    """A long-lived `node tools/solc/server.js` process compiling contracts with solc-js.

    Use as a context manager or call [`close`]. Thread-safe (one request in flight at a time).

    Args:
        codegen (`bool`, defaults to `True`): also generate bytecode, so code-generation errors count as failures
            (the paper's check ran `solc --combined-json bin,...`).
        timeout (`float`, defaults to 120): seconds one compilation may take; past it the server is killed (it is
            restarted for the next file) and the file is reported with reason `timeout`.
    """

    def __init__(self, codegen: bool = True, timeout: float = 120.0):
        self.codegen, self.timeout = codegen, timeout
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._next_id = 1
        self.version: str | None = None

    def _start(self) -> None:
        problem = toolchain_problem()
        if problem:
            raise ToolchainError(problem)
        self._proc = subprocess.Popen(
            [node_executable(), str(SERVER_JS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        hello = self._proc.stdout.readline()
        try:
            msg = json.loads(hello)
        except json.JSONDecodeError:
            self.close()
            raise ToolchainError(f"solc-js compile server did not start (said {hello!r})") from None
        if not msg.get("ready"):
            self.close()
            raise ToolchainError(f"solc-js compile server failed: {msg.get('fatal', msg)}")
        self.version = msg["version"]

    def compile(self, source: str, name: str = "Contract.sol", *, parse_only: bool = False) -> CompileResult:
        """Compiles one file; never raises for bad source or a missing toolchain (the reason says why).

        `parse_only=True` stops solc after parsing: `ok` then means "syntactically valid Solidity" (no name
        resolution, no type check, no bytecode; a wrong `pragma` is not checked either).
        """
        if not source.strip():
            return CompileResult(name, False, "empty", ["empty source"])
        request = {"sources": {name: source}, "codegen": self.codegen}
        if parse_only:
            request["parseOnly"] = True
        reply = self._request(request, name, ("errors", "contracts"))
        if isinstance(reply, CompileResult):
            return reply
        errors = [e for e in reply["errors"] if e["severity"] == "error"]
        warnings = sum(e["severity"] == "warning" for e in reply["errors"])
        if errors:
            return CompileResult(name, False, _reason(reply["errors"]), [e["message"] for e in errors], warnings)
        return CompileResult(name, True, None, [], warnings, reply["contracts"])

    def standard_json(self, standard: dict, name: str = "standard.json") -> dict | CompileResult:
        """solc's standard-JSON output for a standard-JSON `standard` input (sources given by `content`), as solc
        writes it (what crytic-compile parses), or a [`CompileResult`] saying why the server gave none."""
        reply = self._request({"standard": standard}, name, ("output",))
        return reply if isinstance(reply, CompileResult) else reply["output"]

    def _request(self, payload: dict, name: str, keys: tuple[str, ...]) -> dict | CompileResult:
        """Sends one request and returns the server's reply (a dict with `keys`), or the failure as a result."""
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                req_id = self._next_id
                self._next_id += 1
                self._proc.stdin.write(json.dumps({"id": req_id, **payload}) + "\n")
                self._proc.stdin.flush()
                # the server answers one JSON line per request; wait for it with a deadline so that one
                # pathological file cannot block a scoring run forever
                ready, _, _ = select.select([self._proc.stdout], [], [], self.timeout)
                if not ready:
                    self._proc.kill()
                    self._proc.wait()
                    self._proc = None
                    return CompileResult(name, False, "timeout", [f"solc-js gave no answer in {self.timeout:g} s"])
                line = self._proc.stdout.readline()
                if not line:
                    self._proc = None
                    return CompileResult(name, False, "server_error", ["solc-js compile server exited"])
                try:
                    reply = json.loads(line)
                except json.JSONDecodeError:
                    reply = None
                if (
                    not isinstance(reply, dict)
                    or any(k not in reply for k in keys)
                    or ("errors" in keys and not isinstance(reply.get("errors"), list))
                ):
                    self._restart()
                    return CompileResult(name, False, "server_error", [f"malformed server reply {line[:200]!r}"])
                errors = reply.get("errors") if "errors" in keys else (reply.get("output") or {}).get("errors", [])
                if any(e.get("type") == "ServerError" for e in errors):
                    # solc-js is left broken after an internal error: an 80 KB `1 + 1 + ...` expression overflows
                    # the stack, and every later compile in that process fails ("You shall not have another
                    # CompilerStack aside me"). A fresh process for the next file keeps one bad file from
                    # poisoning the rest of a scoring run.
                    self._restart()
            except ToolchainError as err:
                reason = "node_missing" if "node" in str(err).split(" ")[0] else "solc_missing"
                return CompileResult(name, False, reason, [str(err)])
            except (BrokenPipeError, OSError) as err:
                self._proc = None
                return CompileResult(name, False, "server_error", [f"solc-js compile server failed: {err}"])
        return reply

    def _restart(self) -> None:
        """Kills the compile server; the next [`compile`] starts a fresh one."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
            self._proc = None

    def __enter__(self) -> SolcServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()


def compile_once(source: str, name: str = "Contract.sol", codegen: bool = True) -> CompileResult:
    """Compiles one file with a fresh node process (the slow baseline of the benchmark)."""
    with SolcServer(codegen=codegen) as server:
        return server.compile(source, name)


# Slither's detector impacts that count as a security finding for the vulnerability rate.
SECURITY_IMPACTS = ("High", "Medium")


@dataclass
class AnalysisResult:
    """Slither's findings on one contract.

    Args:
        name (`str`): the file name.
        ok (`bool`): Slither ran to the end.
        reason (`str`, *optional*): why not (`"compile"`, `"analyser_crash"`, `"node_missing"`, ...).
        counts (`dict[str, int]`): findings per impact (`High`, `Medium`, `Low`, `Informational`, `Optimization`),
            like Slither's `--print human-summary`.
        findings (`list[dict]`): `{"check", "impact", "confidence", "description"}` per finding.
        error (`str`, *optional*): the error text when `ok` is false.
    """

    name: str
    ok: bool
    reason: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    findings: list[dict] = field(default_factory=list)
    error: str | None = None

    @property
    def vulnerable(self) -> bool:
        """At least one High or Medium impact finding (the vulnerability-rate definition used here)."""
        return any(self.counts.get(i, 0) > 0 for i in SECURITY_IMPACTS)

    @property
    def checks(self) -> set[str]:
        return {f["check"] for f in self.findings}


ANALYSIS_COMPILERS = ("server", "shim")
_PROCESS_SERVER: SolcServer | None = None
_SOLC_VERSION: str | None = None


def _process_server() -> SolcServer:
    """This process's compile server for Slither (one solc-js start-up per process, not one per file)."""
    global _PROCESS_SERVER
    if _PROCESS_SERVER is None:
        _PROCESS_SERVER = SolcServer()
    return _PROCESS_SERVER


def _solc_version() -> str:
    """The version crytic-compile reads from `solc --version` (its own parser on the shim's answer; asked once)."""
    global _SOLC_VERSION
    if _SOLC_VERSION is None:
        from crytic_compile.platform.solc import get_version

        _SOLC_VERSION = get_version(str(SHIM), None)
    return _SOLC_VERSION


def _server_platform(path: Path, server: SolcServer):
    """crytic-compile's standard-JSON platform for `path`, compiling through `server` instead of running the
    `solc` executable twice (`--version`, then `--standard-json`: two node + soljson start-ups per file).

    The input is the one crytic-compile builds (its default output selection, optimizer off), with the source given
    by content rather than by URL; the output goes through crytic-compile's own parser and error check, so Slither
    sees what the shim path gives it."""
    from crytic_compile.compilation_unit import CompilationUnit
    from crytic_compile.compiler.compiler import CompilerVersion
    from crytic_compile.platform.exceptions import InvalidCompilation
    from crytic_compile.platform.solc import is_optimized
    from crytic_compile.platform.solc_standard_json import (
        SolcStandardJson,
        add_optimization,
        parse_standard_json_output,
    )

    class ServerStandardJson(SolcStandardJson):
        def compile(self, crytic_compile, **kwargs) -> None:
            unit = CompilationUnit(crytic_compile, "standard_json")
            unit.compiler_version = CompilerVersion(
                compiler="solc", version=_solc_version(), optimized=is_optimized(kwargs.get("solc_args", ""))
            )
            add_optimization(self._json, unit.compiler_version.optimized, unit.compiler_version.optimize_runs)
            standard = dict(self._json)
            standard["sources"] = {
                key: {"content": Path(key).read_text(encoding="utf-8")} for key in self._json["sources"]
            }
            out = server.standard_json(standard, path.name)
            if isinstance(out, CompileResult):
                raise InvalidCompilation(f"solc-js compile server: {out.reason}: {' '.join(out.errors)[:500]}")
            # crytic-compile's rule (run_solc_standard_json): any diagnostic that is not a warning fails
            errors = out.get("errors", [])
            if any(e.get("severity") != "warning" for e in errors):
                raise InvalidCompilation(
                    "".join(
                        f"{e.get('type', 'UnknownExceptionType')}: {e.get('formattedMessage', 'N/A')}\n" for e in errors
                    )  # fmt: skip
                )
            parse_standard_json_output(out, unit, solc_working_dir=kwargs.get("solc_working_dir"))

    platform = ServerStandardJson()
    platform.add_source_file(str(path))
    return platform


def analyze(
    source: str, name: str = "Contract.sol", *, compiler: str = "server", server: SolcServer | None = None
) -> AnalysisResult:
    """Runs every Slither detector on one contract through crytic-compile and solc-js.

    Args:
        source (`str`): the Solidity source.
        name (`str`): its file name (kept in the findings).
        compiler (`str`, defaults to `"server"`): `"server"` compiles through a long-lived solc-js process
            (`server`, else one per Python process) and hands crytic-compile the standard-JSON output;
            `"shim"` lets crytic-compile run `tools/solc/solc` itself (a node start-up for `--version` and another
            for `--standard-json`, per file: the slow path, kept as the benchmark's baseline). Same verdicts.
        server ([`SolcServer`], *optional*): the compile server of the `"server"` path.

    Never raises for a bad contract: a compile failure or a crash inside Slither is returned with its reason.
    """
    if compiler not in ANALYSIS_COMPILERS:
        raise ValueError(f"compiler must be one of {ANALYSIS_COMPILERS}, got {compiler!r}")
    problem = toolchain_problem()
    if problem:
        return AnalysisResult(
            name, False, "node_missing" if problem.startswith("node") else "solc_missing", error=problem
        )
    try:
        from crytic_compile import CryticCompile
        from crytic_compile.platform.solc_standard_json import SolcStandardJson
        from slither import Slither
        from slither.detectors import all_detectors
        from slither.detectors.abstract_detector import AbstractDetector
    except ImportError as err:  # pragma: no cover - slither is a declared dependency
        return AnalysisResult(name, False, "analyser_missing", error=str(err))
    detectors = [
        d
        for d in vars(all_detectors).values()
        if isinstance(d, type) and issubclass(d, AbstractDetector) and d is not AbstractDetector
    ]
    with tempfile.TemporaryDirectory(prefix="codebc_slither_") as tmp:
        path = Path(tmp) / Path(name).name
        cwd = os.getcwd()
        try:
            # UTF-8 whatever the locale (an ASCII locale made a non-ASCII comment abort the whole scoring run)
            path.write_text(source, encoding="utf-8")
            os.chdir(tmp)  # crytic-compile resolves and reports paths relative to the working directory
            if compiler == "server":
                cc = CryticCompile(_server_platform(path, server or _process_server()))
            else:
                standard = SolcStandardJson()
                standard.add_source_file(str(path))
                cc = CryticCompile(standard, solc=str(SHIM))
            slither = Slither(cc)
            for d in detectors:
                slither.register_detector(d)
            results = [r for per_detector in slither.run_detectors() for r in per_detector]
        except Exception as err:  # noqa: BLE001 - any crash inside crytic-compile/Slither is a per-file result
            text = f"{type(err).__name__}: {err}".strip()
            reason = (
                "compile" if "InvalidCompilation" in type(err).__name__ or "ompil" in text[:200] else "analyser_crash"
            )
            return AnalysisResult(name, False, reason, error=text[:2000])
        finally:
            os.chdir(cwd)
    counts = {k: 0 for k in ("High", "Medium", "Low", "Informational", "Optimization")}
    findings = []
    for r in results:
        impact = r.get("impact", "Informational")
        counts[impact] = counts.get(impact, 0) + 1
        findings.append(
            {
                "check": r.get("check"),
                "impact": impact,
                "confidence": r.get("confidence"),
                "description": (r.get("description") or "").strip(),
            }
        )
    return AnalysisResult(name, True, None, counts, findings)


def default_workers() -> int:
    """Processes for [`analyze_many`]: the cores this process may use (`sched_getaffinity`), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_QUIET_LOGGERS = ("CryticCompile", "Slither")


def _worker_init(levels: dict[str, int]) -> None:
    """A spawned worker starts with default logging: give it the parent's levels for crytic-compile and Slither."""
    import logging

    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def _analyze_pair(item: tuple[str, str, str]) -> AnalysisResult:
    return analyze(item[0], item[1], compiler=item[2])


def analyze_many(
    sources: dict[str, str], workers: int | None = None, *, compiler: str = "server"
) -> dict[str, AnalysisResult]:
    """[`analyze`] on every `{name: source}`, over `workers` processes (default [`default_workers`]).

    Slither is pure Python and single-threaded, so a process pool scales it with the cores. Each worker is a
    fresh interpreter (`spawn`: forking a process that already runs torch's thread pool can deadlock) and each
    contract is analysed in its own temporary folder, so the results are those of the sequential loop, in input
    order. `workers=1` (or one source) runs in this process. `compiler` as in [`analyze`]: with `"server"` each
    worker keeps one solc-js process for all its files.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    items = list(sources.items())
    workers = default_workers() if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if compiler not in ANALYSIS_COMPILERS:
        raise ValueError(f"compiler must be one of {ANALYSIS_COMPILERS}, got {compiler!r}")
    if workers == 1 or len(items) <= 1:
        return {name: analyze(src, name, compiler=compiler) for name, src in items}
    import logging

    levels = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    with ProcessPoolExecutor(
        max_workers=min(workers, len(items)),
        mp_context=get_context("spawn"),
        initializer=_worker_init,
        initargs=(levels,),
    ) as pool:
        results = list(pool.map(_analyze_pair, [(src, name, compiler) for name, src in items]))
    return dict(zip((name for name, _ in items), results))
