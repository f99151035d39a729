"""`hf-ext train amplitudes`: the user's kinematics into an amplitude table. Amplitudes is a numerics library, not a
trained model: "training" here is computing the table of the user's kinematic points (a Hub-dataset folder:
Parquet + `save_to_disk` copy + checksums, as `hf-ext amplitudes table` writes for random points), with a
`training_record.json` saying which data, α′ values and theories it holds and how well it agrees with a second,
independent evaluator. `hf-ext evaluate amplitudes` re-checks it; `hf-ext push amplitudes --from OUTPUT_DIR`
publishes it.

The kinematics schema is `data.KINEMATICS_SCHEMA` (planar variables, Mandelstams or momenta per row).

Example: `hf-ext train amplitudes --data kinematics.csv --alpha 0.5 1 --output_dir table`.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from .config import METHODS
from .user_table import USER_THEORIES


@dataclass
class AmplitudesTrainArguments:
    """The arguments of `hf-ext train amplitudes`."""

    data: str = field(metadata={"help": "the kinematics: a CSV / JSON / Parquet file, a folder or a Hub dataset id"})
    output_dir: str = field(metadata={"help": "the table folder to write (replaced only if it is a table already)"})
    theories: list[str] = field(
        default_factory=lambda: ["tr_phi3", "field_theory"],
        metadata={"choices": USER_THEORIES, "help": "theories to tabulate (bosonic / superstring: even n only)"},
    )
    alpha: list[float] = field(
        default_factory=lambda: [1.0], metadata={"help": "α′ values (each row at each; an alpha_prime column wins)"}
    )
    method: str = field(default="auto", metadata={"choices": METHODS, "help": "evaluator of the stringy integrals"})


def build_parser() -> HfArgumentParser:
    """The `hf-ext train amplitudes` parser (`transformers.HfArgumentParser` over [`AmplitudesTrainArguments`])."""
    return HfArgumentParser(AmplitudesTrainArguments, prog="hf-ext train amplitudes", description=__doc__)


def main(argv: list[str] | None = None) -> dict:
    """Reads the kinematics, computes the table, checks it against a second evaluator, saves folder and record."""
    import sys

    import datasets

    from hf_ext.core.records import save_training_record
    from hf_ext.core.user_data import UserDataError, dataset_entry

    from .config import AmplitudeTableConfig
    from .data import read_kinematics
    from .tables import FEATURES, AmplitudeTable
    from .user_table import check_metrics, check_table, compute_rows

    argv = list(argv) if argv is not None else sys.argv[1:]
    datasets.disable_progress_bars()  # a bad file's error is then the only line on stderr
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    kin, data = read_kinematics(args.data)
    rows = compute_rows(kin, args.alpha, args.theories, args.method)
    if not rows:
        raise UserDataError("no table rows: bosonic / superstring need even n, and every row has odd n")
    dataset = datasets.Dataset.from_list(rows, features=FEATURES)
    alphas = sorted({r["alpha_prime"] for r in rows})
    try:
        points = tuple(sorted({int(n) for n in kin.n}))
        config = AmplitudeTableConfig(theories=tuple(args.theories), points=points, gluons=(3,), alphas=tuple(alphas),
                                      samples=len(kin), method=args.method)  # fmt: skip
    except ValueError as err:
        raise UserDataError(str(err).replace("AmplitudeTableConfig.alphas", "α′ (--alpha / alpha_prime)")) from None
    source = f"the user's kinematics ({args.data}: {len(kin)} rows)"
    table = AmplitudeTable(config, dataset, kinematics=source)
    out = table.save_pretrained(args.output_dir)
    checks = check_table(dataset, kin, args.alpha, args.theories)
    entry = dataset_entry(args.data, data, description="kinematic points (n and planar variables, Mandelstams or "
                          "momenta per row)")  # fmt: skip
    forms = {f: kin.form.count(f) for f in sorted(set(kin.form))}
    save_training_record(
        out,
        method="amplitudes",
        command="hf-ext train amplitudes " + shlex.join(map(str, argv)),
        datasets=[entry],
        metrics=check_metrics(checks, entry["name"]),
        config={
            **asdict(args),
            "rows": len(rows),
            "kinematics_forms": forms,
            "checked_rows": checks["checked"],
            "unchecked_rows": checks["unchecked"],
        },  # fmt: skip
        notes=f"amplitude table of the user's kinematics ({len(rows)} rows, {checks['checked']} checked against a "
        "second evaluator; field-theory rows have none)",
    )
    print(f"{len(rows)} rows -> {out}; max relative residual vs a second evaluator "
          f"{checks['max_relative_residual']:.3g} ({checks['checked']} rows checked)")  # fmt: skip
    return {"output_dir": str(Path(out)), "rows": len(rows), **checks}


__all__ = ["AmplitudesTrainArguments", "build_parser", "main"]


if __name__ == "__main__":
    main()
