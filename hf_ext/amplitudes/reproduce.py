"""`hf-ext reproduce amplitudes`: every identity of the spec (§2.7) with its achieved error, tolerance and time,
plus a small amplitude table saved as a Hub-ready dataset folder.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676). The quick run takes a few
seconds; `--full` adds the slow mpmath evaluations (4-gluon tanh-sinh quadrature at 20 digits, the 5-point mpmath
curve integral), more random points and a larger table (about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.paths import work_dir
from hf_ext.core.reporting import RESULTS_SCHEMA_VERSION, environment
from hf_ext.core.results_render import table

from .config import AmplitudeTableConfig
from .identities import check_all

QUICK_TABLE = AmplitudeTableConfig(
    theories=("tr_phi3", "field_theory", "superstring", "gluon_super", "gluon_determinant", "gluon_continued"),
    points=(4, 5),
    gluons=(3, 4),
    alphas=(0.5, 1.0, 2.0),
    samples=4,
)
FULL_TABLE = AmplitudeTableConfig(
    theories=(
        "tr_phi3",
        "field_theory",
        "bosonic",
        "superstring",
        "gluon_super",
        "gluon_bosonic",
        "gluon_type_i",
        "gluon_determinant",
        "gluon_continued",
    ),
    points=(4, 5, 6),
    gluons=(3, 4),
    alphas=(0.25, 0.5, 1.0, 2.0),
    samples=16,
)


def make_parser() -> argparse.ArgumentParser:
    """Arguments of `hf-ext reproduce amplitudes`."""
    parser = ArgumentParser(prog="hf-ext reproduce amplitudes", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--full",
        action="store_true",
        help="also the slow mpmath checks (4-gluon quadrature at 20 "
        "digits, 5-point mpmath curve integral), more random points and a bigger table",
    )
    parser.add_argument(
        "--out",
        default=str(work_dir("amplitudes")),
        help="output folder for results.json and table/ (default: <work dir>/amplitudes)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random kinematic points")
    parser.add_argument("--no-table", action="store_true", help="skip building and saving the amplitude table")
    return parser


def format_table(rows: list[dict]) -> str:
    width = max(len(r["identity"]) for r in rows)
    lines = [f"{'identity':<{width}}  {'error':>9}  {'tol':>7}  {'time':>7}  ok"]
    for r in rows:
        lines.append(
            f"{r['identity']:<{width}}  {r['error']:9.2e}  {r['tolerance']:7.0e}  {r['time_s']:6.2f}s  "
            f"{'yes' if r['passed'] else 'NO'}"
        )
    return "\n".join(lines)


def report_fields(rows: list[dict]) -> dict:
    """What the docs renderer reads (`hf_ext.core.results_render`): no verdict rules (every identity is a check with a
    tolerance), a headline, and the identity table with its error-vs-tolerance figure."""
    passed = sum(r["passed"] for r in rows)
    ok = "each within its tolerance" if passed == len(rows) else f"within tolerance, {len(rows) - passed} FAILED"
    cells = [
        [
            r["identity"],
            f"{r['error']:.2e}",
            f"{r['tolerance']:.0e}",
            f"{r['time_s']:.2f}",
            "yes" if r["passed"] else "NO",
        ]
        for r in rows
    ]
    return {
        "rules": [],
        "verdicts": [],
        "headline": f"{passed}/{len(rows)} identities {ok}",
        "report": [
            table(
                "Identities: achieved error and tolerance",
                ["identity", "error", "tolerance", "time s", "ok"],
                cells,
                plot={"x": "identity", "y": ["error", "tolerance"], "kind": "bar", "log_y": True},
                note="A tolerance of 0 is an exact (integer or symbolic) identity; the plot leaves its zero bars out.",
            )
        ],
    }


def main(argv: list[str] | None = None) -> dict:
    """Runs the identities (quick by default), prints the table, writes `results.json` (and `table/`).

    Returns:
        The results dict (as written to `results.json`).

    Raises:
        SystemExit: (code 1) when an identity misses its tolerance, after writing the results.
    """
    args = make_parser().parse_args(argv)
    import datasets

    datasets.disable_progress_bars()  # keep the printed table readable
    start = time.perf_counter()
    rows = check_all(full=args.full, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "method": "amplitudes",
        "scale": "full" if args.full else "quick",
        "environment": environment(),
        "paper": "https://arxiv.org/abs/2504.21676",
        "mode": "full" if args.full else "quick",
        "seed": args.seed,
        "identities": rows,
        "all_passed": all(r["passed"] for r in rows),
    }
    if not args.no_table:
        from .tables import AmplitudeTable

        t0 = time.perf_counter()
        config = FULL_TABLE if args.full else QUICK_TABLE
        table = AmplitudeTable(config)
        folder = table.save_pretrained(out / "table")
        results["table"] = {
            "path": str(folder),
            "rows": len(table.dataset),
            "config": config.to_dict(),
            "time_s": round(time.perf_counter() - t0, 2),
            "max_relative_error_estimate": float(
                max(e / max(abs(a), 1e-300) for e, a in zip(table.dataset["error"], table.dataset["amplitude"]))
            ),
        }
    results["runtime_s"] = round(time.perf_counter() - start, 2)
    results.update(report_fields(rows))
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, out / "results.json")
    print(format_table(rows))
    if "table" in results:
        info = results["table"]
        print(f"\ntable: {info['rows']} rows in {info['time_s']} s -> {info['path']}")
    print(f"runtime {results['runtime_s']} s; wrote {out / 'results.json'}")
    if not results["all_passed"]:
        failed = [r["identity"] for r in rows if not r["passed"]]
        print("FAILED: " + "; ".join(failed))
        raise SystemExit(1)
    return results


if __name__ == "__main__":
    main()
