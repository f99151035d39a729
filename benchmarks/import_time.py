"""Start-up cost of hf_ext: `import hf_ext` against `import transformers`, and `hf-ext list` against a bare
`python -c pass`, each a fresh interpreter, median of `--repeats` runs, measured in one run of this script.

Targets (issue 16): `import hf_ext` ≤ 1.3× `import transformers`, `hf-ext list` ≤ 3× `python -c pass`.
`import hf_ext` registers every method without importing torch or any method's own dependencies; the Auto classes
are registered when transformers (or the modeling module) is imported.

Usage: `python benchmarks/import_time.py [--repeats 7]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _wall(argv: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    py = sys.executable
    cli = str(Path(py).with_name("hf-ext"))
    _wall([py, "-c", "import hf_ext, transformers"], 1)  # warm the file cache
    rows = {
        "python -c pass": _wall([py, "-c", "pass"], args.repeats),
        "import transformers": _wall([py, "-c", "import transformers"], args.repeats),
        "import hf_ext": _wall([py, "-c", "import hf_ext"], args.repeats),
        "import hf_ext + transformers.AutoModel": _wall(
            [py, "-c", "import hf_ext; from transformers import AutoModel"], args.repeats
        ),
        "hf-ext list": _wall([cli, "list"], args.repeats),
    }
    ratios = {
        "import hf_ext / import transformers": rows["import hf_ext"] / rows["import transformers"],
        "hf-ext list / python -c pass": rows["hf-ext list"] / rows["python -c pass"],
    }
    for name, seconds in rows.items():
        print(f"{name:<42} {seconds * 1000:8.0f} ms")
    for name, ratio in ratios.items():
        print(f"{name:<42} {ratio:8.2f}x")
    result = {"seconds": rows, "ratios": ratios, "repeats": args.repeats}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
