"""`hf-ext train h2tune`: one federated run of one variant on your clients, saving one client's adapted model.

Every Flower run-config key is a flag here (`--num-server-rounds`, `--local-steps`, `--variant`, `--client-models`,
`--client-datasets`, ...; the same parser reads both, `RunConfig.from_run_config`), so a run here and
`flwr run examples/h2tune_app --run-config "..."` compute the same thing. `--engine inprocess` (default) runs the
client and server code in this process; `--engine simulation` runs the Flower apps on Flower's simulation engine.

```bash
hf-ext train h2tune --variant h2tune --num-server-rounds 3 --artifact_dir runs/h2tune_train/artifact
# your own clients: HF model ids / local folders (or `smollm2`) and `datasets` folders with prompt/answer columns
hf-ext train h2tune --client-models "smollm2,,"  --client-ranks "8,4,16" --max-len 48 --local-steps 2
```
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .task import VARIANTS, RunConfig


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hf-ext train h2tune", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = RunConfig().to_run_config()
    for key, value in defaults.items():
        if key == "variant":
            p.add_argument("--variant", default=value, choices=list(VARIANTS), help="the compared method")
            continue
        kind = type(value) if not isinstance(value, bool) else str
        p.add_argument(f"--{key}", type=kind, default=value, help=f"run-config key {key!r} (default {value!r})")
    p.add_argument(
        "--engine",
        choices=("inprocess", "simulation"),
        default="inprocess",
        help="inprocess: client and server code in this process; simulation: Flower's simulation engine",
    )
    p.add_argument("--client", type=int, default=0, help="which client's adapted model --artifact_dir gets")
    p.add_argument("--artifact_dir", help="save that client's base + H2Tune adapter here (pushable by hf-ext push)")
    from hf_ext.core.devices import add_device_argument

    add_device_argument(p)
    return p


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    from hf_ext.core.devices import set_device

    set_device(ns.device)
    config = {key: getattr(ns, key.replace("-", "_")) for key in RunConfig().to_run_config()}
    run = RunConfig.from_run_config(config).for_variant(ns.variant)
    if not 0 <= ns.client < len(run.clients):
        raise SystemExit(f"hf-ext train h2tune: --client {ns.client} is not one of the {len(run.clients)} clients")
    from .reproduce import run_variant, run_variant_flower

    t0 = time.perf_counter()
    if ns.engine == "simulation":
        import dataclasses
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
