"""Contracts compiled per second with solc-js: one persistent node process vs one node process per file.

Compiles the authors' 205 released CodeLlama outputs (90 compile, 115 fail; bytecode generation on) both ways and
prints files/s and the speed-up of the persistent `SolcServer` (`hf_ext.codebc.solidity`), which loads the 9 MB
`soljson.js` once instead of once per file. Both paths must agree on every verdict.

    python benchmarks/codebc_compile.py [--files 60]
"""

from __future__ import annotations

import argparse
import time

from hf_ext.codebc.data import released_outputs_dir
from hf_ext.codebc.solidity import SolcServer, compile_once, toolchain_problem


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=60, help="files for the one-process-per-file path (it is slow)")
    args = p.parse_args(argv)
    problem = toolchain_problem()
    if problem:
        raise SystemExit(problem)
    files = sorted(released_outputs_dir().glob("*.sol"))
    sources = [(f.name, f.read_text()) for f in files]

    t = time.perf_counter()
    with SolcServer() as server:
        server.compile("pragma solidity ^0.8.0; contract Warm {}")  # start-up counted separately
        warm = time.perf_counter()
        persistent = {n: server.compile(s, n).ok for n, s in sources}
    end = time.perf_counter()
    startup = warm - t
    per_file_persistent = (end - warm) / len(sources)

    subset = sources[: args.files]
    t = time.perf_counter()
    single = {n: compile_once(s, n).ok for n, s in subset}
    per_file_single = (time.perf_counter() - t) / len(subset)
    assert all(single[n] == persistent[n] for n in single), "the two paths disagree"

    res = {
        "files": len(sources),
        "compiled": sum(persistent.values()),
        "persistent_files_per_s": 1 / per_file_persistent,
        "persistent_startup_s": startup,
        "per_file_process_files_per_s": 1 / per_file_single,
        "speedup": per_file_single / per_file_persistent,
    }
    print(
        f"persistent node process: {res['persistent_files_per_s']:.1f} files/s over {len(sources)} files "
        f"({res['compiled']} compile; start-up {startup:.2f} s, once)"
    )
    print(f"one node process per file: {res['per_file_process_files_per_s']:.2f} files/s over {len(subset)} files")
    print(f"speed-up: {res['speedup']:.1f}x")
    return res


if __name__ == "__main__":
    main()
