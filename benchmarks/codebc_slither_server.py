"""Full scoring of the authors' released CodeLlama outputs (205 files: compile, BLEU, CodeBLEU, Slither), with Slither
compiling through the shim (a node + soljson start-up for `solc --version` and another for `--standard-json`, per
file: the old path) vs through one long-lived solc-js server per worker process (the new default), in one run.

Checks that every per-file verdict (compiled, Slither ok / reason / counts / checks) is the same both ways and that
the vulnerability figure is the released one (6 of 90 compiled files with a High/Medium finding), then prints the
seconds of each and the ratio old/new, with the load average (the machine may be shared: say so beside the number).

    python benchmarks/codebc_slither_server.py [--workers N] [--files N]
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from unittest import mock

from hf_ext.codebc import solidity
from hf_ext.codebc.data import released_outputs_dir
from hf_ext.codebc.scoring import score_folder


def _verdicts(summary: dict) -> dict:
    return {
        n: (f["compiled"], f.get("analysis", {}).get("ok"), f.get("analysis", {}).get("reason"),
            f.get("analysis", {}).get("counts"), tuple(f.get("analysis", {}).get("checks", ())))
        for n, f in summary["files"].items()
    }  # fmt: skip


def _score(folder, workers: int, compiler: str) -> tuple[dict, float]:
    def many(sources, w=None, **kw):
        return solidity.analyze_many(sources, w, compiler=compiler)

    def one(source, name="Contract.sol", **kw):
        return solidity.analyze(source, name, compiler=compiler)

    t = time.perf_counter()
    with mock.patch("hf_ext.codebc.scoring.analyze_many", many), mock.patch("hf_ext.codebc.scoring.analyze", one):
        summary = score_folder(folder, workers=workers)
    return summary, time.perf_counter() - t


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=solidity.default_workers())
    p.add_argument("--files", type=int, default=0, help="score only the first N files (0: all 205)")
    args = p.parse_args(argv)
    problem = solidity.toolchain_problem()
    if problem:
        raise SystemExit(problem)
    for name in ("CryticCompile", "Slither"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    folder = released_outputs_dir()
    if args.files:
        import tempfile
        from pathlib import Path

        tmp = Path(tempfile.mkdtemp(prefix="codebc_bench_"))
        for f in sorted(folder.glob("*.sol"))[: args.files]:
            (tmp / f.name).write_text(f.read_text())
        folder = tmp
    load0 = os.getloadavg()
    old, t_old = _score(folder, args.workers, "shim")
    new, t_new = _score(folder, args.workers, "server")
    same = _verdicts(old) == _verdicts(new)
    res = {
        "files": new["total"],
        "compiled": new["compiled"],
        "analysed": new["analysed"],
        "vulnerable": new["vulnerable"],
        "workers": args.workers,
        "old_s": t_old,
        "new_s": t_new,
        "ratio": t_old / t_new,
        "verdicts_identical": same,
        "load_before": load0,
        "load_after": os.getloadavg(),
    }
    print(
        f"{res['files']} files ({res['compiled']} compiled, {res['vulnerable']}/{res['analysed']} vulnerable), "
        f"{args.workers} workers: Slither via the shim {t_old:.1f} s, via the compile server {t_new:.1f} s, "
        f"ratio old/new {res['ratio']:.2f}x; verdicts identical: {same}; load average before "
        f"{load0[0]:.2f}, after {res['load_after'][0]:.2f}"
    )
    if not same:
        diff = [n for n in _verdicts(old) if _verdicts(old)[n] != _verdicts(new)[n]]
        raise SystemExit(f"verdicts differ on {len(diff)} files: {diff[:5]}")
    return res


if __name__ == "__main__":
    main()
