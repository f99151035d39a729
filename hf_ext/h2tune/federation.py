"""The user's federation for `hf-ext train h2tune --federation FILE`: a JSON or YAML file naming each client's base
decoder (a Hub id or a local folder; different architectures, depths and widths are the point of H2Tune), its
instruction data and optionally its LoRA rank; the per-client data schema; the seeded split; and the per-client test
metrics that train records and `hf-ext evaluate h2tune` reports.

```yaml
clients:
  - name: clinic            # free-form; default client-<i>
    base_model: HuggingFaceTB/SmolLM2-135M-Instruct   # or a local folder (config + weights + tokenizer)
    data: clinic.jsonl      # a CSV / JSON / JSONL / Parquet file, a folder with train/test files, or a Hub id
    rank: 8                 # optional (default: the built-in client's rank of that index)
  - name: lab
    base_model: ./my-gpt2
    data: lab.csv
```
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from hf_ext.core.user_data import Column, DataSchema, UserDataError

INSTRUCTION_SCHEMA = DataSchema(
    (
        Column(
            "instruction",
            "str",
            "the prompt the client's model is given (one user turn of its tokenizer's chat template, if it has one)",
        ),
        Column(
            "response",
            "any",
            "the answer it should give (text; a number is read as its text): the only trained tokens, scored by "
            "exact match",
        ),
    ),
    description="one row per (instruction, response) example of one client",
)
"""Each client's data (H2Tune's per-client instruction-tuning sets)."""

TEST_FRACTION = 0.1  # a client's seeded test share when its data has no test split of its own


@dataclass(frozen=True)
class FederationClient:
    """One client of the federation file (`base_model` and `data` resolved against the file's folder)."""

    name: str
    base_model: str
    data: str
    rank: int | None = None


def _resolve(value: str, folder: Path) -> str:
    """A relative local path is relative to the federation file; anything else (a Hub id) is kept as written."""
    path = Path(value).expanduser()
    if not path.is_absolute() and (folder / path).exists():
        return str((folder / path).resolve())
    return str(path.resolve()) if path.exists() else value


def read_federation(source: str | os.PathLike) -> list[FederationClient]:
    """The clients of a federation file (`.json`, `.yaml` / `.yml`): a list of clients, or `{"clients": [...]}`.

    Raises:
        [`~hf_ext.core.user_data.UserDataError`]: the file is missing or malformed, a client lacks `base_model` or
            `data`, has an unknown key, a rank that is not an integer >= 1, or a name used twice.
    """
    path = Path(source)
    if not path.is_file():
        raise UserDataError(f"federation file {source!r} not found")
    text = path.read_text()
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            spec = yaml.safe_load(text)
        else:
            spec = json.loads(text)
    except Exception as err:  # noqa: BLE001 (json / yaml parse errors)
        raise UserDataError(f"federation file {source}: cannot parse it ({type(err).__name__}: {err})") from None
    clients = spec.get("clients") if isinstance(spec, dict) else spec
    if not isinstance(clients, list) or not clients:
        raise UserDataError(f"federation file {source}: needs a non-empty list 'clients' of {{base_model, data}}")
    out, allowed = [], {"name", "base_model", "data", "rank"}
    for i, c in enumerate(clients):
        if not isinstance(c, dict):
            raise UserDataError(f"federation file {source}: client {i} is not a mapping")
        unknown = sorted(set(c) - allowed)
        missing = [k for k in ("base_model", "data") if not c.get(k)]
        if unknown or missing:
            raise UserDataError(
                f"federation file {source}: client {i}"
                + (f" lacks {missing}" if missing else "")
                + (f" has unknown key(s) {unknown} (allowed: {sorted(allowed)})" if unknown else "")
            )
        rank = c.get("rank")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            raise UserDataError(f"federation file {source}: client {i} 'rank' must be an integer >= 1, got {rank!r}")
        for key in ("base_model", "data"):
            if "," in str(c[key]):
                raise UserDataError(f"federation file {source}: client {i} {key!r} may not contain a comma")
        name = str(c.get("name") or f"client-{i}")
        base, data = _resolve(str(c["base_model"]), path.parent), _resolve(str(c["data"]), path.parent)
        out.append(FederationClient(name, base, data, rank))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise UserDataError(f"federation file {source}: client names must be distinct, got {names}")
    return out


def load_client_split(source: str, *, seed: int, num_train: int, num_test: int):
    """`(train, test)` `(instruction, response)` pairs of one client: its data read with [`INSTRUCTION_SCHEMA`]
    (`prompt` / `answer` columns, the names `client_datasets` took before, are read as instruction / response), the
    user's own `test` split or a seeded [`TEST_FRACTION`], at most `num_train` / `num_test` rows."""
    from hf_ext.core.user_data import load_user_data, split_data

    data = load_user_data(source)
    columns = set(next(iter(data.values())).column_names)
    if {"prompt", "answer"} <= columns and not columns & {"instruction", "response"}:  # the older column names
        data = data.rename_columns({"prompt": "instruction", "answer": "response"})
    INSTRUCTION_SCHEMA.check(data, source=str(source))
    data = split_data(data, validation=0.0, test=TEST_FRACTION, seed=seed)
    out = []
    for split, cap in (("train", num_train), ("test", num_test)):
        table = data[split]
        pairs = [(str(q), str(a)) for q, a in zip(table["instruction"], table["response"])][:cap]
        for i, (q, a) in enumerate(pairs):
            if not q.strip() or not a.strip():
                raise UserDataError(f"{source}: split {split!r} row {i} has an empty instruction or response")
        out.append(pairs)
    return out[0], out[1]


def is_user_data(source: str) -> bool:
    """Whether a client's `dataset` goes through [`INSTRUCTION_SCHEMA`] (everything but a `save_to_disk` folder,
    which keeps the older `prompt` / `answer` reader, [`~hf_ext.h2tune.data.load_pairs`])."""
    path = Path(source)
    return not ((path / "dataset_dict.json").is_file() or (path / "dataset_info.json").is_file())


def check_federation(clients: list[FederationClient]) -> None:
    """Reads every client's data (naming the client and the column on failure) before any model is built."""
    for c in clients:
        try:
            load_client_split(c.data, seed=0, num_train=1, num_test=1)
        except UserDataError as err:
            raise UserDataError(f"client {c.name!r}: {err}") from None


def run_config_keys(clients: list[FederationClient]) -> dict[str, str]:
    """The run-config keys (`client-models`, `client-ranks`, `client-datasets`) that describe `clients`."""
    return {
        "client_models": ",".join(c.base_model for c in clients),
        "client_ranks": ",".join("" if c.rank is None else str(c.rank) for c in clients),
        "client_datasets": ",".join(c.data for c in clients),
    }


@dataclass
class ClientScores:
    """Per test item of one client: exact match (0/1, greedy answer == response) and the response's mean token
    cross-entropy under teacher forcing (nats)."""

    exact_match: list[float]
    answer_loss: list[float]


def score_client(model, pairs, codec, max_len: int) -> ClientScores:
    """[`ClientScores`] of `model` on `pairs` (its codec poses the instruction as the training did)."""
    import torch

    from .data import greedy, to_features

    em, losses = [], []
    model.eval()
    for prompt, answer in pairs:
        em.append(float(greedy(model, prompt, codec.new_tokens(answer), codec) == answer))
        feats = to_features([(prompt, answer)], max_len=max_len, codec=codec)
        ids = torch.tensor(feats["input_ids"], device=model.device)
        labels = torch.tensor(feats["labels"], device=model.device)
        with torch.no_grad():
            logits = model(
                input_ids=ids, attention_mask=torch.tensor(feats["attention_mask"], device=ids.device)
            ).logits
        shift = torch.nn.functional.cross_entropy(
            logits[0, :-1].float(), labels[0, 1:], ignore_index=-100, reduction="mean"
        )
        losses.append(float(shift))
    return ClientScores(em, losses)


def load_client_model(folder: str | os.PathLike):
    """A saved client (base at the root, adapter in `adapter/`, its tokenizer at the root) and its codec."""
    from transformers import AutoTokenizer

    from .artifact import load_release
    from .data import TokenizerCodec

    return load_release(folder), TokenizerCodec(AutoTokenizer.from_pretrained(folder))


def client_folders(artifact: str | os.PathLike, names, root: str | None = None) -> dict[str, Path]:
    """Client name → its folder in a trained federation: `root` (default: the training record's `root_client`, if
    any) at the top, each other client in `clients/<name>/`; without a root (a local-only baseline folder), each
    client in `<name>/`."""
    from hf_ext.core.records import load_training_record

    artifact = Path(artifact)
    if root is None and (artifact / "training_record.json").is_file():
        root = (load_training_record(artifact) or {}).get("config", {}).get("root_client")
    if root is None:
        return {n: artifact / n for n in names}
    return {n: artifact if n == root else artifact / "clients" / n for n in names}


def metric_rows(scores: dict[str, ClientScores], dataset_names: dict[str, str]) -> list[dict]:
    """The record's / the evaluation's metrics: per client exact match and answer loss on its test split, and the
    exact match over every client's test items."""
    import numpy as np

    from hf_ext.core.records import metric

    rows = []
    for name, s in scores.items():
        ds = dataset_names.get(name)
        rows.append(metric(f"{name} exact match", "exact_match", np.mean(s.exact_match), dataset=ds,
                           higher_is_better=True))  # fmt: skip
        rows.append(metric(f"{name} answer loss", "loss", np.mean(s.answer_loss), dataset=ds, higher_is_better=False))
    pooled = [v for s in scores.values() for v in s.exact_match]
    rows.append(metric("exact match (all clients)", "exact_match", np.mean(pooled), higher_is_better=True))
    return rows


def as_dict(clients: list[FederationClient]) -> list[dict]:
    return [asdict(c) for c in clients]


def write_example_federation(folder: str | os.PathLike, *, rows: int = 40) -> Path:
    """A small federation for the docs example and the tests, written under `folder`: two clients on different
    tiny random-init decoders built in code (a 2-layer Llama-style and a 1-layer GPT-2-style one, each with a
    character tokenizer: [`~hf_ext.h2tune.presets.write_tiny_decoder`]), each with `rows` arithmetic instructions in
    its own phrasing (`clinic.jsonl`, `lab.csv`), and `federation.yaml` naming them. Returns the federation file."""
    import csv
    import random

    from .presets import write_tiny_decoder

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_tiny_decoder(folder / "llama-tiny", "llama", layers=2, hidden=32)
    write_tiny_decoder(folder / "gpt2-tiny", "gpt2", layers=1, hidden=16)
    rng = random.Random(0)
    pairs = [(rng.randrange(10), rng.randrange(10)) for _ in range(2 * rows)]
    with open(folder / "clinic.jsonl", "w") as f:
        for a, b in pairs[:rows]:
            f.write(json.dumps({"instruction": f"What is {a} plus {b}, mod 10?", "response": str((a + b) % 10)}) + "\n")
    with open(folder / "lab.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["instruction", "response"])
        writer.writerows([(f"({a}+{b})%10 =", str((a + b) % 10)) for a, b in pairs[rows:]])
    (folder / "federation.yaml").write_text(
        "clients:\n"
        "  - {name: clinic, base_model: llama-tiny, data: clinic.jsonl, rank: 4}\n"
        "  - {name: lab, base_model: gpt2-tiny, data: lab.csv, rank: 8}\n"
    )
    return folder / "federation.yaml"


__all__ = [
    "INSTRUCTION_SCHEMA",
    "TEST_FRACTION",
    "ClientScores",
    "FederationClient",
    "as_dict",
    "check_federation",
    "client_folders",
    "is_user_data",
    "load_client_model",
    "load_client_split",
    "metric_rows",
    "read_federation",
    "run_config_keys",
    "score_client",
    "write_example_federation",
]
