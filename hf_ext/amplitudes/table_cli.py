"""`hf-ext amplitudes table`: compute an amplitude table and write it as a Hub dataset folder.

    hf-ext amplitudes table --theories tr_phi3 field_theory --n 4 5 --alpha 0.5 1 2 --samples 8 --output DIR

The folder holds `data/train-00000-of-00001.parquet` (what `datasets.load_dataset(DIR)` and the Hub read), the
dataset card `README.md`, `config.json` (generation config and file hashes) and a `save_to_disk` copy; upload it
with `huggingface_hub.HfApi().upload_folder(..., repo_type="dataset")` or `AmplitudeTable.push_to_hub`.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser

from .config import GLUON_THEORIES, METHODS, SCALAR_THEORIES, THEORIES, AmplitudeTableConfig


def make_parser() -> argparse.ArgumentParser:
    """Arguments of `hf-ext amplitudes table`."""
    p = ArgumentParser(prog="hf-ext amplitudes table", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--theories",
        nargs="+",
        default=["tr_phi3", "field_theory"],
        choices=THEORIES,
        metavar="THEORY",
        help=f"theories to tabulate, any of {', '.join(THEORIES)} (default: tr_phi3 field_theory)",
    )
    p.add_argument(
        "--n",
        nargs="+",
        type=int,
        required=True,
        metavar="N",
        help="sizes: N points (4-6) for the scalar theories, n gluons (3-5) for the gluon theories",
    )
    p.add_argument(
        "--alpha",
        nargs="+",
        type=float,
        required=True,
        metavar="ALPHA",
        help="α′ values (at most 64, each in [1e-3, 100])",
    )
    p.add_argument("--samples", type=int, default=4, help="random kinematic points per (theory, size, α′)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kinematic sampling")
    p.add_argument("--method", default="auto", choices=METHODS, help="evaluator of the stringy integrals")
    p.add_argument("--x-low", type=float, default=0.2, help="lower end of the sampled planar variables (> 0)")
    p.add_argument("--x-high", type=float, default=3.0, help="upper end")
    p.add_argument("--output", required=True, help="the dataset folder to write (atomically replaced)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing table at --output")
    return p


def config_from_args(args: argparse.Namespace) -> AmplitudeTableConfig:
    """The table config of parsed arguments (ValueError with the field name on bad values)."""
    scalar = any(t in SCALAR_THEORIES for t in args.theories)
    gluon = any(t in GLUON_THEORIES for t in args.theories)
    sizes = tuple(args.n)
    return AmplitudeTableConfig(
        theories=tuple(dict.fromkeys(args.theories)),
        points=sizes if scalar else (4,),
        gluons=sizes if gluon else (3,),
        alphas=tuple(args.alpha),
        samples=args.samples,
        x_low=args.x_low,
        x_high=args.x_high,
        method=args.method,
        seed=args.seed,
    )


def main(argv: list[str] | None = None) -> Path:
    """Builds the table and writes the folder; returns its path.

    Raises:
        SystemExit: (code 2, with a one-line message) on invalid arguments or an --output that exists without
            --overwrite.
    """
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as err:
        parser.error(
            str(err)
            .replace("AmplitudeTableConfig.points", "--n")
            .replace("AmplitudeTableConfig.gluons", "--n")
            .replace("AmplitudeTableConfig.alphas", "--alpha")
            .replace("AmplitudeTableConfig.", "--")
        )
    out = Path(args.output)
    if out.exists() and not args.overwrite:
        parser.error(f"--output {out} exists; pass --overwrite to replace it")
    import datasets

    from .tables import AmplitudeTable

    datasets.disable_progress_bars()
    start = time.perf_counter()
    table = AmplitudeTable(config)
    try:
        folder = table.save_pretrained(out)
    except ValueError as err:
        parser.error(str(err))
    print(
        f"{len(table.dataset)} rows ({', '.join(config.theories)}; α′ = {', '.join(f'{a:g}' for a in config.alphas)})"
        f" in {time.perf_counter() - start:.1f} s -> {folder}"
    )
    print(f"load with datasets.load_dataset({str(folder)!r}, split='train')")
    return folder


if __name__ == "__main__":
    main()
