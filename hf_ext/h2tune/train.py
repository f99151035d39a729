"""`hf-ext train h2tune`: one federated run of one variant on your clients, saving one client's adapted model.

The arguments are [`H2TuneTrainArguments`], parsed by `transformers.HfArgumentParser`. Every Flower run-config key
is a field (`num_server_rounds`, `local_steps`, `variant`, `client_models`, `client_datasets`, ...; the run-config key
is the field name with dashes, and `RunConfig.from_run_config` parses both), so a run here and
`flwr run examples/h2tune_app --run-config "..."` compute the same thing. Flags take the underscore spelling
(`--local_steps`); the dashed one (`--local-steps`, the run-config key) is accepted too. `--engine inprocess`
(default) runs the client and server code in this process; `--engine simulation` runs the Flower apps on Flower's
simulation engine.

```bash
hf-ext train h2tune --variant h2tune --num_server_rounds 3 --artifact_dir runs/h2tune_train/artifact
# your own clients: HF model ids / local folders (or `smollm2`) and `datasets` folders with prompt/answer columns
hf-ext train h2tune --client_models "smollm2,,"  --client_ranks "8,4,16" --max_len 48 --local_steps 2
# your own federation file (each client's base model and instruction data; see hf_ext/h2tune/federation.py)
hf-ext train h2tune --federation fed.yaml --output_dir runs/h2tune_own --with_local_only
```
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from hf_ext.core.devices import DEVICE_ENV, DEVICES

from .task import VARIANTS, RunConfig

_DEFAULT = RunConfig()


def _run_field(name: str, help: str, **kwargs):
    """A field whose default is `RunConfig`'s own (so the two never drift apart)."""
    attr = {"num_server_rounds": "rounds", "lr": "learning_rate"}.get(name, name)
    return field(default=getattr(_DEFAULT, attr), metadata={"help": help, **kwargs})


@dataclass
class H2TuneTrainArguments:
    """Arguments of `hf-ext train h2tune`: the run config of one federation (a field per Flower run-config key,
    the key being the field name with dashes) plus the engine, the client whose model is saved, the output folder and
    the device."""

    variant: str = field(default="h2tune", metadata={"help": "the compared method", "choices": tuple(VARIANTS)})
    num_server_rounds: int = _run_field("num_server_rounds", "federated rounds")
    local_steps: int = _run_field("local_steps", "optimiser steps per client per round")
    batch_size: int = _run_field("batch_size", "training batch size per client")
    lr: float = _run_field("lr", "learning rate of every client")
    num_train: int = _run_field("num_train", "training examples per client")
    num_test: int = _run_field("num_test", "test examples per client")
    seed: int = _run_field("seed", "seed of the run (bases, adapters, data split, G⁰)")
    pretrain_steps: int = _run_field("pretrain_steps", ">0: briefly pretrain each tiny base on the shared corpus")
    cache_dir: str = _run_field("cache_dir", "where pretrained bases are cached")
    save_dir: str = _run_field("save_dir", "Flower runs: where the ClientApps save their models after the last round")
    client_models: str = _run_field(
        "client_models", "comma-separated, one per client: HF id, local folder, smollm2 or empty (tiny decoder)"
    )
    client_ranks: str = _run_field("client_ranks", "comma-separated LoRA ranks r_c (empty: the built-in ones)")
    client_tasks: str = _run_field("client_tasks", "comma-separated synthetic tasks (empty: the built-in ones)")
    client_datasets: str = _run_field(
        "client_datasets", "comma-separated `datasets` folders with prompt/answer columns (empty: synthetic)"
    )
    max_len: int = _run_field("max_len", "tokens per training sequence (prompt + answer + EOS)")
    heal_steps: int = _run_field("heal_steps", "distillation steps that heal a derived smollm2-L<N> base")
    min_nodes: int = _run_field("min_nodes", "Flower runs: nodes the server waits for (0: every client)")
    min_rounds: int = _run_field("min_rounds", "Flower runs: fewest aggregated rounds for a successful run (0: all)")
    timeout: float = _run_field("timeout", "Flower runs: seconds the server waits for a round's replies")
    engine: str = field(
        default="inprocess",
        metadata={
            "help": "inprocess: client and server code in this process; simulation: Flower's simulation engine",
            "choices": ("inprocess", "simulation"),
        },
    )
    client: int = field(default=0, metadata={"help": "which client's adapted model --artifact_dir gets"})
    artifact_dir: str | None = field(
        default=None, metadata={"help": "save that client's base + H2Tune adapter here (pushable by hf-ext push)"}
    )
    federation: str = field(
        default="",
        metadata={
            "help": "your federation: a JSON / YAML file naming each client's base_model (Hub id or folder), data "
            "(instruction / response rows) and optional rank; trains them all and saves every client to --output_dir"
        },
    )
    output_dir: str = field(default="", metadata={"help": "with --federation: the folder of the trained federation"})
    with_local_only: bool = field(
        default=False,
        metadata={
            "help": "with --federation: also train local-only LoRA adapters (the baseline) into OUTPUT/local-only"
        },
    )
    device: str = field(
        default_factory=lambda: os.environ.get(DEVICE_ENV, "auto"),
        metadata={"help": "training device: auto (CUDA when present), cpu or cuda", "choices": DEVICES},
    )

    def run_config(self) -> dict:
        """The Flower run config these arguments describe (the keys `RunConfig.to_run_config` writes)."""
        keys = RunConfig().to_run_config()
        return {key: getattr(self, key.replace("-", "_")) for key in keys if hasattr(self, key.replace("-", "_"))}


def build_parser() -> HfArgumentParser:
    """The `HfArgumentParser` of [`H2TuneTrainArguments`] (the CLI's `hf-ext train h2tune --help`)."""
    return HfArgumentParser(
        H2TuneTrainArguments,
        prog="hf-ext train h2tune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def parse_args(argv: list[str] | None = None) -> H2TuneTrainArguments:
    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    return args


def main(argv: list[str] | None = None) -> dict:
    ns = parse_args(argv)
    from hf_ext.core.devices import set_device

    set_device(ns.device)
    if ns.federation:
        from .train_federation import train_federation

        return train_federation(ns, list(argv or []))
    run = RunConfig.from_run_config(ns.run_config()).for_variant(ns.variant)
    if not 0 <= ns.client < len(run.clients):
        raise SystemExit(f"hf-ext train h2tune: --client {ns.client} is not one of the {len(run.clients)} clients")
    from .reproduce import run_variant, run_variant_flower

    t0 = time.perf_counter()
    if ns.engine == "simulation":
        import tempfile

        save = tempfile.mkdtemp(prefix="h2tune_train_") if ns.artifact_dir else ""
        res = run_variant_flower(ns.variant, dataclasses.replace(run, save_dir=save), engine="simulation")
    else:
        res = run_variant(ns.variant, run)
    summary = {
        "variant": ns.variant,
        "accuracy_per_round": res["accuracy"],
        "bytes_sent_per_round": res["bytes_sent_per_round"],
        "seconds": time.perf_counter() - t0,
        "clients": [c.__dict__ for c in run.clients],
    }
    for name, acc in res["accuracy"].items():
        print(f"{name}: exact match per round {[round(a, 3) for a in acc]}")
    if ns.artifact_dir:
        summary["artifact_dir"] = str(_save(ns, run, res, save if ns.engine == "simulation" else None))
        print(f"saved {run.clients[ns.client].name}'s model to {summary['artifact_dir']}")
    return summary


def _save(ns, run: RunConfig, res: dict, flower_dir: str | None) -> Path:
    """The chosen client's release folder (base + adapter) with its training record."""
    from hf_ext.core.records import metric, save_training_record

    from .artifact import release_from_client, save_release

    spec = run.clients[ns.client]
    if flower_dir is not None:
        out = release_from_client(Path(flower_dir) / "clients" / spec.name, ns.artifact_dir)
    else:
        out = save_release(res["clients"][ns.client].model, ns.artifact_dir, client_spec=spec.__dict__)
    data = spec.dataset or f"synthetic-{spec.task.replace('_', '-')}"
    save_training_record(
        out,
        method="h2tune",
        command="hf-ext train h2tune",
        skip_nonfinite=True,
        base_model=spec.model if spec.model and "/" in spec.model and not Path(spec.model).exists() else None,
        datasets=[{"name": data, "hub_id": None}],
        metrics=[
            metric("exact match", "exact_match", res["accuracy"][spec.name][-1], dataset=data, higher_is_better=True)
        ],
        config={"client": spec.__dict__, "run": json.loads(json.dumps(run.to_run_config(), default=str))},
        notes=f"{spec.name} after {run.rounds} rounds of variant {ns.variant}",
    )
    return out


if __name__ == "__main__":
    main()
