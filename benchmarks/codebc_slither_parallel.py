"""Slither analyses per second: one file at a time in this process vs a process pool over the available cores.

Analyses the first `--files` compiling outputs of the authors' released CodeLlama folder both ways
(`hf_ext.codebc.solidity.analyze` in a loop vs `analyze_many(..., workers)`), checks that every verdict (counts and
checks) agrees, and prints files/s and the speed-up. On a machine shared with other jobs the ratio is bounded by
the cores actually free, so say the load average beside the number.

    python benchmarks/codebc_slither_parallel.py [--files 12] [--workers N]
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from hf_ext.codebc.data import released_outputs_dir
from hf_ext.codebc.solidity import analyze, analyze_many, default_workers, toolchain_problem


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=12)
    p.add_argument("--workers", type=int, default=default_workers())
    args = p.parse_args(argv)
    problem = toolchain_problem()
    if problem:
        raise SystemExit(problem)
    logging.getLogger("CryticCompile").setLevel(logging.CRITICAL)
    folder = released_outputs_dir()
    ok = {q.name.removesuffix("_.txt") for q in (folder / "compilable").iterdir()}
    files = [f for f in sorted(folder.glob("*.sol")) if f.stem in ok][: args.files]
    sources = {f.name: f.read_text() for f in files}

    t = time.perf_counter()
    seq = {n: analyze(s, n) for n, s in sources.items()}
    t_seq = time.perf_counter() - t
    t = time.perf_counter()
    par = analyze_many(sources, args.workers)
    t_par = time.perf_counter() - t
    assert all((seq[n].counts, seq[n].checks) == (par[n].counts, par[n].checks) for n in sources), "verdicts differ"
    res = {
        "files": len(sources),
        "workers": args.workers,
        "sequential_files_per_s": len(sources) / t_seq,
        "pool_files_per_s": len(sources) / t_par,
        "speedup": t_seq / t_par,
        "load": os.getloadavg()[0],
    }
    print(
        f"sequential: {res['sequential_files_per_s']:.2f} files/s; pool of {args.workers}: "
        f"{res['pool_files_per_s']:.2f} files/s (worker start-up included); speed-up {res['speedup']:.2f}x "
        f"at load average {res['load']:.1f}"
    )
    return res


if __name__ == "__main__":
    main()
