"""Speed of reading a model-features dataset into tensors (`TensorRows`, the reproduction's `predict`): whole
columns through `hf_ext.orca.data.numpy_columns`, as a ratio to `np.asarray(dataset.with_format("numpy")[column])`,
the row-by-row read they replaced (datasets >= 4 returns a lazy `Column` there, formatted one row at a time). A quick
`hf-ext reproduce orca` read 114,000 rows per training this way (training, validation and both test sets).

    python benchmarks/orca_columns.py [--rows 6000] [--repeats 3]
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import best_of

from hf_ext.orca.data import numpy_columns, to_model_features
from hf_ext.orca.spurious_generator import (
    SPURIOUS_FIELD_NAMES,
    SpuriousOrcaConfig,
    generate_spurious,
    spurious_vocab_sizes,
)
from hf_ext.orca.trainer import EVAL_COLUMNS


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=6_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    config = SpuriousOrcaConfig(num_impressions=args.rows, shortcut_strength=3.0, seed=0)
    features = to_model_features(generate_spurious(config), SPURIOUS_FIELD_NAMES, spurious_vocab_sizes(config))
    table = features.with_format("numpy")

    def rowwise():
        return {c: np.asarray(table[c]) for c in EVAL_COLUMNS}

    old, new = rowwise(), numpy_columns(features, EVAL_COLUMNS)
    assert all(old[c].dtype == new[c].dtype and np.array_equal(old[c], new[c]) for c in EVAL_COLUMNS)
    slow = best_of(rowwise, args.repeats)
    fast = best_of(lambda: numpy_columns(features, EVAL_COLUMNS), args.repeats)
    result = {"rows": len(features), "rowwise_s": round(slow, 3), "numpy_columns_s": round(fast, 4)}
    result["ratio"] = round(slow / fast, 1)
    print(
        f"{len(EVAL_COLUMNS)} columns of {len(features):,} rows: row by row {slow:.3f} s, numpy_columns "
        f"{fast * 1000:.1f} ms (best of {args.repeats}); ratio {result['ratio']}×, same arrays and dtypes"
    )
    return result


if __name__ == "__main__":
    main()
