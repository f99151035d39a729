"""Counts how the bad-input fuzz suites fail: cases / clear / deep / silent / hang per method.

Imports every `tests/fuzz/test_<method>.py`, takes its module-level `CASES` (a list of
[`~hf_ext.core.testing.BadInput`]) and classifies each case with [`~hf_ext.core.testing.classify_bad_input`]:
**clear** (the expected error type, with a message naming the problem), **deep** (any other exception, e.g. a crash
from inside torch), **silent** (nothing raised) or **hang** (past `--timeout`).

```
python scripts/fuzz_report.py                      # every suite, a Markdown table
python scripts/fuzz_report.py tinyalign codebc -v  # some methods, listing every case that is not clear
python scripts/fuzz_report.py --strict             # exit 1 unless every case is clear (for CI)
```
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = ("clear", "deep", "silent", "hang")


def load_cases(path: Path) -> list:
    """The `CASES` list of one suite file, imported by path (the tests folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"hf_ext_fuzz_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = getattr(module, "CASES", None)
    if not isinstance(cases, list):
        raise SystemExit(f"{path} has no module-level CASES list")
    return cases


def run(methods: list[str] | None, timeout_s: float, verbose: bool) -> dict[str, dict[str, int]]:
    from hf_ext.core.testing import classify_bad_input

    files = sorted((ROOT / "tests" / "fuzz").glob("test_*.py"))
    if methods:
        wanted = {f"test_{m}.py" for m in methods}
        missing = wanted - {f.name for f in files}
        if missing:
            raise SystemExit(f"no fuzz suite for {sorted(m[5:-3] for m in missing)} in tests/fuzz/")
        files = [f for f in files if f.name in wanted]
    table: dict[str, dict[str, int]] = {}
    for path in files:
        method = path.stem.removeprefix("test_")
        counts = dict.fromkeys(VERDICTS, 0)
        start = time.perf_counter()
        for case in load_cases(path):
            verdict, message = classify_bad_input(case, timeout_s)
            counts[verdict] += 1
            if verbose and verdict != "clear":
                print(f"  {method}: {verdict:<6} {case.name}: {message[:200] or 'no error raised'}", file=sys.stderr)
        counts["cases"] = sum(counts[v] for v in VERDICTS)
        counts["seconds"] = round(time.perf_counter() - start, 1)
        table[method] = counts
    return table


def format_table(table: dict[str, dict[str, int]]) -> str:
    lines = ["| method | cases | clear | deep | silent | hang |", "|---|---|---|---|---|---|"]
    for method, c in table.items():
        lines.append(f"| {method} | {c['cases']} | {c['clear']} | {c['deep']} | {c['silent']} | {c['hang']} |")
    total = {k: sum(c[k] for c in table.values()) for k in ("cases", *VERDICTS)}
    lines.append(
        f"| **total** | {total['cases']} | {total['clear']} | {total['deep']} | {total['silent']} | {total['hang']} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("methods", nargs="*", help="methods to run (default: every tests/fuzz/test_*.py)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as a hang")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every case that is not clear")
    parser.add_argument("--strict", action="store_true", help="exit 1 unless every case is clear")
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        parser.error(f"--timeout must be > 0, got {args.timeout}")
    sys.path.insert(0, str(ROOT))  # the checkout's hf_ext, not another installed copy
    table = run(args.methods or None, args.timeout, args.verbose)
    print(format_table(table))
    bad = sum(c["deep"] + c["silent"] + c["hang"] for c in table.values())
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
