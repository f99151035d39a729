"""`hf-ext train h2tune --federation FILE --output_dir DIR`: the user's federation (each client's base decoder and
instruction data, [`~hf_ext.h2tune.federation`]) trained in this process, every client saved, each scored on its
own test split, and the training record written.

The output folder:

```
DIR/                      the first client's (or `--client`'s) base + H2Tune adapter (what `hf-ext push` uploads
                          as the model: config.json + safetensors at the root, adapter/, tokenizer)
DIR/clients/<name>/       every other client's base + adapter + tokenizer
DIR/local-only/<name>/    with --with_local_only: each client's local-only LoRA (the baseline of hf-ext evaluate)
DIR/training_record.json  per-client base models, data (fingerprints), test-split metrics; which client is the root
```
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .task import RunConfig

LOCAL_ONLY = "local-only"


def _save_clients(result_clients, folders: list[Path]) -> None:
    """Saves each trained client (base + adapter + tokenizer) into its folder (the root one first: `save_release`
    replaces a folder as a whole)."""
    from .artifact import save_release

    for i in sorted(range(len(folders)), key=lambda i: len(folders[i].parts)):
        client = result_clients[i]
        save_release(client.model, folders[i], client_spec=client.spec.__dict__)
        tokenizer = getattr(client.codec, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.save_pretrained(folders[i])


def train_federation(ns, argv: list[str]) -> dict:
    """Runs `ns.variant` on the federation of `ns.federation` (see the module docstring)."""
    from hf_ext.core.records import save_training_record
    from hf_ext.core.user_data import dataset_entry, is_hub_id, load_user_data

    from .federation import (
        INSTRUCTION_SCHEMA,
        TEST_FRACTION,
        as_dict,
        check_federation,
        client_folders,
        load_client_model,
        metric_rows,
        read_federation,
        run_config_keys,
        score_client,
    )
    from .reproduce import run_variant

    clients = read_federation(ns.federation)
    check_federation(clients)  # every client's data, before any model is built
    if not (ns.output_dir or ns.artifact_dir):
        raise ValueError("--federation needs --output_dir (the folder of the trained federation)")
    if ns.engine != "inprocess":
        raise ValueError("--federation runs with --engine inprocess (the Flower engines take --client_models etc.)")
    if not 0 <= ns.client < len(clients):
        raise ValueError(f"--client {ns.client} is not one of the federation's {len(clients)} clients")
    out = Path(ns.output_dir or ns.artifact_dir)
    keys = {k.replace("_", "-"): v for k, v in run_config_keys(clients).items()}
    run = RunConfig.from_run_config({**ns.run_config(), **keys}).for_variant(ns.variant)
    names = [c.name for c in clients]
    t0 = time.perf_counter()
    res = run_variant(ns.variant, run)
    folders = client_folders(out, names, root=names[ns.client])
    _save_clients(res["clients"], [folders[n] for n in names])
    if ns.with_local_only:
        lo = run_variant(LOCAL_ONLY, run)
        lo_folders = client_folders(out / LOCAL_ONLY, names)
        _save_clients(lo["clients"], [lo_folders[n] for n in names])

    scores, datasets = {}, []
    for i, c in enumerate(clients):
        model, codec = load_client_model(folders[c.name])
        scores[c.name] = score_client(model, res["clients"][i].test_pairs, codec, run.max_len)
        entry = dataset_entry(c.data, load_user_data(c.data, schema=INSTRUCTION_SCHEMA), name=f"{c.name}: "
                              f"{Path(c.data).name if Path(c.data).exists() else c.data}")  # fmt: skip
        datasets.append(entry)
    metrics = metric_rows(scores, {c.name: d["name"] for c, d in zip(clients, datasets)})
    hub_bases = [c.base_model for c in clients if is_hub_id(c.base_model)]
    save_training_record(
        out,
        method="h2tune",
        command="hf-ext train h2tune " + " ".join(argv),
        base_model=hub_bases or None,
        datasets=datasets,
        metrics=metrics,
        config={
            "federation": as_dict(clients),
            "root_client": names[ns.client],
            "variant": ns.variant,
            "split": {
                "seed": run.seed,
                "test_fraction": TEST_FRACTION,
                "num_train": run.num_train,
                "num_test": run.num_test,
            },  # fmt: skip
            "local_only_baseline": bool(ns.with_local_only),
            "run": json.loads(json.dumps(run.to_run_config(), default=str)),
        },
        notes=f"{len(clients)} clients ({', '.join(names)}) after {run.rounds} rounds of {ns.variant}; the root "
        f"folder is {names[ns.client]}'s model, the others are in clients/",
    )
    summary = {
        "variant": ns.variant,
        "clients": names,
        "accuracy_per_round": res["accuracy"],
        "metrics": {m["name"]: m["value"] for m in metrics},
        "seconds": time.perf_counter() - t0,
        "output_dir": str(out),
    }
    for m in metrics:
        print(f"  {m['name']}: {m['value']:.4f} (test)")
    print(f"saved the federation's {len(clients)} clients to {out}")
    return summary


__all__ = ["LOCAL_ONLY", "train_federation"]
