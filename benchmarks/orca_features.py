"""Speed of ORCA's feature conversion (`to_model_features`) at the generator's default size (200,000 rows), as a
ratio to a plain NumPy column stack of the same data (the floor: what any conversion must at least do).

This replaces two wall-time assertions that were in `tests/orca/test_data.py` (feature conversion < 3 s, generator
< 2 s at 200,000 rows): tests no longer time anything. The former budgets are printed beside the measurements.

    python benchmarks/orca_features.py [--repeats 3]
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import best_of

from hf_ext.orca.causal_generator import FIELD_NAMES, SyntheticOrcaConfig, field_vocab_sizes, generate_synthetic
from hf_ext.orca.data import to_model_features


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    config = SyntheticOrcaConfig(shortcut_strength=1.0, seed=4)
    ds = generate_synthetic(config)
    sizes = field_vocab_sizes(config)
    columns = dict(ds.with_format("numpy")[:])

    def floor():
        np.stack([np.asarray(columns[name], dtype=np.int64) for name in FIELD_NAMES], axis=1)

    generate = best_of(lambda: generate_synthetic(SyntheticOrcaConfig(shortcut_strength=2.0, seed=5)), args.repeats)
    convert = best_of(lambda: to_model_features(ds, FIELD_NAMES, sizes), args.repeats)
    base = best_of(floor, args.repeats)
    result = {
        "rows": len(ds),
        "generate_synthetic_s": round(generate, 3),
        "to_model_features_s": round(convert, 3),
        "numpy_stack_s": round(base, 4),
        "ratio": round(convert / base, 1),
        "rows_per_s": round(len(ds) / convert),
    }
    print(
        f"to_model_features on {len(ds):,} rows: {convert:.3f} s (best of {args.repeats}; former test budget 3 s), "
        f"{result['rows_per_s']:,} rows/s; NumPy column stack {base * 1000:.1f} ms; ratio {result['ratio']}×"
    )
    print(f"generate_synthetic, {len(ds):,} rows: {generate:.3f} s (former test budget 2 s)")
    return result


if __name__ == "__main__":
    main()
