"""`hf-ext evaluate amplitudes`: checks a table written by `hf-ext train amplitudes` against the user's kinematics
(`--data`, read with the same schema: every row must tabulate exactly those points, α′ values and theories) and
re-evaluates every stringy row with a second, independent evaluator (`user_table.SECOND_EVALUATORS`), reporting the
max relative residual and the table's own max stated relative error. There is no baseline: a table has nothing to be
paired against.

Example: `hf-ext evaluate amplitudes --model table --data kinematics.csv --output checks.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import HfArgumentParser


@dataclass
class AmplitudesEvaluateArguments:
    """The arguments of `hf-ext evaluate amplitudes`."""

    model: str = field(metadata={"help": "the table folder hf-ext train amplitudes wrote"})
    data: str = field(metadata={"help": "the kinematics it was computed from"})
    output: str = field(default="", metadata={"help": "write the checks as JSON here"})


def build_parser() -> HfArgumentParser:
    return HfArgumentParser(AmplitudesEvaluateArguments, prog="hf-ext evaluate amplitudes", description=__doc__)


def main(argv: list[str] | None = None) -> dict:
    """Loads the table (checksums verified), re-reads the kinematics and reports the checks."""
    import datasets

    from hf_ext.core.records import load_training_record, report_evaluation
    from hf_ext.core.user_data import UserDataError, dataset_entry

    from .data import read_kinematics
    from .tables import AmplitudeTable
    from .user_table import check_metrics, check_table

    datasets.disable_progress_bars()
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    table = AmplitudeTable.from_pretrained(args.model)
    config = (load_training_record(args.model) or {}).get("config", {})
    if "theories" not in config:
        raise UserDataError(f"{args.model} has no record of `hf-ext train amplitudes` (which kinematics, α′, theories)")
    kin, data = read_kinematics(args.data)
    checks = check_table(table.dataset, kin, config["alpha"], config["theories"])
    name = dataset_entry(args.data, data)["name"]
    return report_evaluation(
        check_metrics(checks, name),
        output=args.output or None,
        header=f"amplitudes {args.model}: {len(table.dataset)} rows, {checks['checked']} re-evaluated by a second "
        f"evaluator, {checks['unchecked']} without one (field theory)",
    )


__all__ = ["AmplitudesEvaluateArguments", "build_parser", "main"]


if __name__ == "__main__":
    main()
