"""Who the federation's clients are: their base decoders (built-in tiny ones, SmolLM2, or a user's HF model id /
local folder), their LoRA ranks, and their data (the synthetic tasks split with disjoint test inputs, or a user's
`datasets` data), resolved from the run config the same way on the server and on every client.

Run-config keys (comma-separated, one entry per client / partition; empty = the built-in client of that index):
`client-models` (HF model id, local folder, `smollm2` for `hf_ext.core.pretrained.load_smollm2`, or `smollm2-L<N>`
for a SmolLM2 with N of its 30 blocks, healed by distillation: `derive.py`), `client-ranks`,
`client-tasks` (`fill_in`, `choice`, `program`, `modulo`), `client-datasets` (a file / folder / Hub id of
`instruction` / `response` rows, [`~hf_ext.h2tune.federation.INSTRUCTION_SCHEMA`], split with the run's seed; or a
`save_to_disk` folder with `prompt` / `answer` columns and `train` / `test` splits,
[`~hf_ext.h2tune.data.load_pairs`]).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientSpec:
    """One heterogeneous client: decoder family, depth, width, LoRA rank and task; `model` names a real base (HF id,
    local folder or `smollm2`; empty: a tiny random-init decoder of this family/depth/width), `dataset` a user's data
    (empty: the synthetic `task`)."""

    name: str
    family: str
    layers: int
    hidden: int
    rank: int
    task: str
    model: str = ""
    dataset: str = ""

    @property
    def base_key(self) -> tuple:
        """Clients with the same key share one base decoder (same weights), as two users of one public model do."""
        return (self.model,) if self.model else (self.family, self.layers, self.hidden)


# Hybrid heterogeneity at toy scale: clients 0 and 1 share a Llama-style base with different ranks (the setting of
# the HetLoRA / FLoRA baselines), client 2 is a different, shallower and narrower GPT-2-style decoder (reachable only
# through H2Tune's width-free middle matrices). Each poses (a + b) mod 10 in its own format (`3+4=`, `3+4 mod 10=`,
# `print((3+4)%10)>`); multiple choice is not among them because these bases cannot learn it at all (data.TASKS).
CLIENTS = (
    ClientSpec("client-0", "llama", 4, 64, 4, "fill_in"),
    ClientSpec("client-1", "llama", 4, 64, 8, "modulo"),
    ClientSpec("client-2", "gpt2", 2, 32, 16, "program"),
)
SMOLLM2 = "smollm2"


def _split(value) -> list[str]:
    value = str(value or "").strip()
    return [v.strip() for v in value.split(",")] if value else []


def _model_shape(model: str) -> tuple[str, int, int]:
    """(family, layers, hidden) of a real base, from its config only (no weights loaded)."""
    from transformers import AutoConfig

    from .derive import is_derived, kept_layers

    if is_derived(model):  # smollm2-L<N>: SmolLM2's width, N blocks (derive.py); no weights needed to size it
        return "llama", len(kept_layers(model)), 576
    if model == SMOLLM2:
        from hf_ext.core.pretrained import smollm2_path

        model = str(smollm2_path())
    config = AutoConfig.from_pretrained(model)
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if not layers or not hidden:
        raise ValueError(f"client model {model!r}: its config has no num_hidden_layers/hidden_size (not a decoder?)")
    return config.model_type, int(layers), int(hidden)


def resolve_clients(models="", ranks="", tasks="", datasets="") -> tuple[ClientSpec, ...]:
    """The client list of a run (see the module docstring); the built-in [`CLIENTS`] when every key is empty."""
    from .data import TASKS

    lists = {
        "client-models": _split(models),
        "client-ranks": _split(ranks),
        "client-tasks": _split(tasks),
        "client-datasets": _split(datasets),
    }
    n = max([len(v) for v in lists.values()] + [0]) or len(CLIENTS)
    for key, values in lists.items():
        if values and len(values) != n:
            raise ValueError(
                f"run config {key!r} has {len(values)} entries, other client keys have {n}: give one "
                "entry per client (empty entries keep the built-in client's value)"
            )
    specs = []
    for i in range(n):
        spec = CLIENTS[i % len(CLIENTS)]
        spec = dataclasses.replace(spec, name=f"client-{i}")
        model = lists["client-models"][i] if lists["client-models"] else ""
        if model:
            family, layers, hidden = _model_shape(model)
            spec = dataclasses.replace(spec, model=model, family=family, layers=layers, hidden=hidden)
        if lists["client-ranks"] and lists["client-ranks"][i]:
            rank = lists["client-ranks"][i]
            if not rank.isdigit() or int(rank) < 1:
                raise ValueError(f"run config 'client-ranks' entry {i} must be an integer >= 1, got {rank!r}")
            spec = dataclasses.replace(spec, rank=int(rank))
        if lists["client-tasks"] and lists["client-tasks"][i]:
            if lists["client-tasks"][i] not in TASKS:
                raise ValueError(
                    f"run config 'client-tasks' entry {i} is {lists['client-tasks'][i]!r}; choose from {TASKS}"
                )
            spec = dataclasses.replace(spec, task=lists["client-tasks"][i])
        if lists["client-datasets"] and lists["client-datasets"][i]:
            spec = dataclasses.replace(spec, dataset=lists["client-datasets"][i], task="custom")
        specs.append(spec)
    return tuple(specs)


def base_seed(specs, index: int) -> int:
    """Init seed of client `index`'s tiny base: that of the first client with the same base, so clients that share a
    base share its weights (and its pretraining cache entry)."""
    first = next(i for i, s in enumerate(specs) if s.base_key == specs[index].base_key)
    return 1000 + first


def base_group(specs, index: int) -> str:
    """Client `index`'s base group for HetLoRA / FLoRA (`"base<i>"`, i the first client on the same base): the server
    computes it from its own run config and averages LoRA factors only within a group."""
    return f"base{base_seed(specs, index) - 1000}"


def client_pairs(specs, index: int, run) -> tuple[list, list]:
    """`(train, test)` of client `index`: a user's dataset, or the synthetic task with disjoint test inputs
    ([`~hf_ext.h2tune.data.client_split`])."""
    from .data import client_split, load_pairs
    from .federation import is_user_data, load_client_split

    spec = specs[index]
    if spec.dataset and is_user_data(spec.dataset):  # instruction / response rows, seeded test split
        return load_client_split(spec.dataset, seed=run.seed, num_train=run.num_train, num_test=run.num_test)
    if spec.dataset:
        return load_pairs(spec.dataset, "train")[: run.num_train], load_pairs(spec.dataset, "test")[: run.num_test]
    return client_split(spec.task, index, len(specs), run.num_train, run.num_test, seed=run.seed)


def pooled_pairs(specs, run, index: int | None = None) -> list:
    """The pooled-data ceiling's training set for client `index`: every client's operand pairs posed in client
    `index`'s own format ([`~hf_ext.h2tune.data.pooled_split`], as many examples as all clients hold together). A
    client with a user's dataset (or `index=None`) pools the clients' training pairs as they are."""
    from .data import pooled_split

    spec = specs[index] if index is not None else None
    if spec is not None and not spec.dataset and not any(s.dataset for s in specs):
        return pooled_split(spec.task, len(specs), run.num_train * len(specs), seed=run.seed)
    return [pair for i in range(len(specs)) for pair in client_pairs(specs, i, run)[0]]


__all__ = [
    "CLIENTS",
    "ClientSpec",
    "SMOLLM2",
    "base_group",
    "base_seed",
    "client_pairs",
    "pooled_pairs",
    "resolve_clients",
]
