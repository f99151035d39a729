"""`hf-ext reproduce mymethod`: the method against a baseline on paired seeds, with the verdict rule printed first."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from hf_ext.core import reporting


@dataclass
class ReproduceArguments:
    full: bool = field(default=False, metadata={"help": "the paper-scale run (more seeds and rows)"})
    output_dir: str = field(default="runs/mymethod", metadata={"help": "where results.json goes"})


RULE = reporting.VerdictRule(
    claim="MyMethod beats the mean predictor",
    metric="test MSE",
    margin=0.0,
    higher_is_better=False,
    premise="the training loss falls",
)


def build_parser() -> HfArgumentParser:
    return HfArgumentParser(ReproduceArguments, description="MyMethod: the paper's title — reproduction")


def _one_seed(seed: int, rows: int) -> tuple[float, float, float, float]:
    import numpy as np
    import torch

    from .configuration_mymethod import MyMethodConfig
    from .data import collate, synthetic_regression
    from .modeling_mymethod import MyMethodModel

    torch.manual_seed(seed)
    split = synthetic_regression(rows, 8, seed).train_test_split(test_size=0.25, seed=seed)
    train, test = collate(list(split["train"])), collate(list(split["test"]))
    model = MyMethodModel(MyMethodConfig(num_features=8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = last = None
    for _ in range(100):
        loss = model(**train).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = float(loss.detach()) if first is None else first
        last = float(loss.detach())
    with torch.no_grad():
        mse = float(model(**test).loss)
    baseline = float(np.mean((test["labels"].numpy() - train["labels"].numpy().mean()) ** 2))
    return mse, baseline, first, last


def main(argv: list[str] | None = None) -> dict:
    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    seeds, rows = (range(5), 2000) if args.full else (range(3), 400)
    reporting.print_rules([RULE])
    runs = [_one_seed(s, rows) for s in seeds]
    method, baseline = [r[0] for r in runs], [r[1] for r in runs]
    premise = reporting.Premise(RULE.premise, all(r[3] < r[2] for r in runs), "training loss first vs last step")
    diff = reporting.paired_difference(method, baseline)
    verdict = RULE.decide(diff, premise)
    ours, mean = reporting.summarize(method), reporting.summarize(baseline)
    print(f"MyMethod test MSE {ours.cell()} | mean predictor {mean.cell()}")
    print(f"paired difference {diff.cell()}")
    print(verdict.line())
    results = reporting.Results(method="mymethod", scale="full" if args.full else "quick", rules=[RULE])
    results.verdicts.append(verdict)
    results.tables["test_mse"] = {"mymethod": ours, "mean": mean}
    reporting.write_results(Path(args.output_dir) / "results.json", results)
    return results.to_dict()
