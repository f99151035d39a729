"""What both sides of the Proto-EVFL protocol share: the run settings parsed once from Flower's run config
([`ProtoEvflRunConfig`]) and the helpers that put arrays and optimiser state into Flower records.

The protocol itself lives in `party.py` (a party's side, behind `client_app.py`) and `active_party.py` (the active
party's side, behind `server_app.py`); see `active_party.py` for why Flower's Message API fits and which records
cross the wire.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, RecordDict

from hf_ext.core.federated import arrays_to_state_dict
from hf_ext.core.federated.run_config import FlowerRunConfig, convert_value, dump_run_config, parse_run_config

from .configuration_proto_evfl import ProtoEvflConfig, ProtoEvflPartyConfig
from .data import NUM_CLASSES, VerticalDataConfig, feature_widths
from .modeling_proto_evfl import ProtoEvflForClassification, ProtoEvflPartyModel
from .training import ProtoEvflTrainingArguments


@dataclass(frozen=True)
class ProtoEvflRunConfig(FlowerRunConfig):
    """Everything a run needs, parsed once from Flower's run config ([`from_run_config`]).

    Args:
        data ([`VerticalDataConfig`]): the simulated federation's data.
        training ([`ProtoEvflTrainingArguments`]): training knobs.
        hidden_dim (`int`, defaults to 64), embed_dim (`int`, defaults to 16): party encoder sizes.
        fused_dim (`int`, defaults to 16), aggregation (`str`), classifier (`str`), local_loss_weight (`float`),
            global_prototype_momentum (`float`): the top model (see [`ProtoEvflConfig`]).
        temperature (`float`, defaults to 0.1): `τ_p`, shared by all prototype logits.
        message_timeout (`float`, defaults to 120): seconds to wait for the parties' replies.
        labels_path (`str`, defaults to `""`): the active party's saved label dataset (`party_data.py`); empty:
            the simulated split's labels.
        party_data_dir (`str`, defaults to `""`): a folder with `party-<k>/` datasets, for simulations; in a
            deployment each SuperNode's `data-path` node config points at its own (and wins).
        feature_widths (`str`, defaults to `""`): the agreed width of each party's block, comma-separated
            (`"392,392"`), for parties' own data; empty: from `data.dataset`.
        num_labels (`int`, defaults to 0): number of classes for parties' own data; 0: from `data.dataset`.
    """

    data: VerticalDataConfig = field(
        default_factory=VerticalDataConfig, metadata={"run_config_keys": {"seed": "data-seed"}}
    )
    training: ProtoEvflTrainingArguments = field(default_factory=ProtoEvflTrainingArguments)
    hidden_dim: int = 64
    embed_dim: int = 16
    fused_dim: int = 16
    temperature: float = 0.1
    aggregation: str = "gate"
    classifier: str = "prototype"
    local_loss_weight: float = 1.0
    global_prototype_momentum: float = 0.9
    message_timeout: float = 120.0
    labels_path: str = ""
    party_data_dir: str = ""
    feature_widths: str = ""
    num_labels: int = 0

    def __post_init__(self):
        if self.num_labels < 0 or self.num_labels == 1:
            raise ValueError(f"num_labels must be 0 (from the dataset) or >= 2, got {self.num_labels}")
        if self.feature_widths:
            widths = self.party_widths()
            if len(widths) != self.data.num_parties or min(widths) < 1:
                raise ValueError(f"feature_widths must list {self.data.num_parties} positive widths, got "
                                 f"{self.feature_widths!r}")  # fmt: skip

    @property
    def num_classes(self) -> int:
        return self.num_labels or NUM_CLASSES[self.data.dataset]

    def party_widths(self) -> list[int]:
        if self.feature_widths:
            try:
                return [int(v) for v in self.feature_widths.split(",")]
            except ValueError:
                raise ValueError(f"feature_widths must be comma-separated integers, got {self.feature_widths!r}")
        return feature_widths(self.data.dataset, self.data.num_parties)

    def party_config(self, k: int) -> ProtoEvflPartyConfig:
        return ProtoEvflPartyConfig(
            input_dim=self.party_widths()[k], hidden_dims=[self.hidden_dim], embed_dim=self.embed_dim,
            num_classes=self.num_classes, temperature=self.temperature, party_index=k,
        )  # fmt: skip

    def top_config(self) -> ProtoEvflConfig:
        return ProtoEvflConfig(
            num_parties=self.data.num_parties, embed_dim=self.embed_dim, fused_dim=self.fused_dim,
            num_classes=self.num_classes, aggregation=self.aggregation, classifier=self.classifier,
            temperature=self.temperature, prototype_momentum=self.global_prototype_momentum,
            local_loss_weight=self.local_loss_weight, party_input_dims=self.party_widths(),
        )  # fmt: skip

    # Flower run configs are flat `str -> bool | int | float | str`: one kebab-case key per field, parsed by the
    # core's one parser (unknown keys refused by name, strict types); `data.seed` is `data-seed`, and
    # `unseen-class` -1 means no unseen class (`None`).
    @classmethod
    def _parse_run_config(cls, run_config) -> ProtoEvflRunConfig:
        values = dict(run_config) if isinstance(run_config, Mapping) else run_config
        unseen = values.pop(UNSEEN_KEY, None) if isinstance(values, dict) else None
        config = parse_run_config(cls, values)
        if unseen is not None:
            k = convert_value(UNSEEN_KEY, unseen, int)
            config = replace(config, data=replace(config.data, unseen_class=None if k < 0 else k))
        return config

    def to_run_config(self) -> dict:
        out = dump_run_config(self)
        if out.get(UNSEEN_KEY) is None:
            out[UNSEEN_KEY] = -1
        return out


UNSEEN_KEY = "unseen-class"


@contextlib.contextmanager
def single_thread():
    """Runs the block with one torch thread (restored after): the models are tiny, and on a shared CPU a second
    intra-op thread makes every small matmul several times slower instead of faster."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def seeded(seed: int, build):
    """`build()` with the CPU generator seeded, leaving it as it was. Not `torch.random.fork_rng` or
    `torch.manual_seed`: both also touch the (lazy) accelerator generators, which record a stack trace per call and
    dominated the per-message cost of the in-process runs."""
    state = torch.get_rng_state()
    torch.default_generator.manual_seed(seed)
    try:
        return build()
    finally:
        torch.set_rng_state(state)


def array_record(**named) -> ArrayRecord:
    return ArrayRecord({k.replace("_", "-"): Array(np.ascontiguousarray(v)) for k, v in named.items()})


def read_array(content: RecordDict, record: str, key: str, shape: tuple, sender: str) -> np.ndarray:
    """An array from a received message, checked: present, of the expected shape (`-1`: any), finite."""
    if record not in content:
        raise ValueError(f"{sender}: message has no {record!r} record (it has {sorted(content.keys())})")
    if not isinstance(content[record], ArrayRecord):
        raise ValueError(f"{sender}: record {record!r} is a {type(content[record]).__name__}, not an ArrayRecord")
    if key not in content[record]:
        raise ValueError(f"{sender}: record {record!r} has no {key!r} (it has {sorted(content[record].keys())})")
    try:
        value = content[record][key].numpy()
    except Exception as err:  # corrupt bytes, an unknown dtype: Flower raises various types
        raise ValueError(f"{sender}: {record}/{key} cannot be decoded ({type(err).__name__}: {err})") from None
    if value.ndim != len(shape) or any(s not in (-1, v) for s, v in zip(shape, value.shape)):
        raise ValueError(f"{sender}: {record}/{key} has shape {value.shape}, expected {shape}")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise ValueError(f"{sender}: {record}/{key} contains NaN or inf")
    return value


def optimizer_to_arrays(optimizer: torch.optim.Optimizer) -> ArrayRecord:
    """The optimiser's per-parameter state, packed as one flat array per state name (a node state is decoded and
    encoded on every message, and each Flower `Array` costs a header parse: 3 arrays instead of 3 per parameter).

    Scalar states (Adam's `step`) become a vector with one entry per parameter, under `scalar-<name>`.
    """
    state = optimizer.state_dict()["state"]
    if not state:
        return ArrayRecord()
    indices = sorted(state)
    packed = {}
    for name in state[indices[0]]:
        tensors = [state[i][name] for i in indices]
        key = f"scalar-{name}" if all(t.dim() == 0 for t in tensors) else name
        packed[key] = torch.cat([t.reshape(-1) for t in tensors]).numpy()
    packed["indices"] = np.asarray(indices)
    return ArrayRecord({k: Array(v) for k, v in packed.items()})


def load_optimizer_arrays(optimizer: torch.optim.Optimizer, record: ArrayRecord) -> None:
    """Inverse of [`optimizer_to_arrays`]."""
    saved = optimizer.state_dict()
    if "indices" not in record:
        return
    params = [p for group in optimizer.param_groups for p in group["params"]]
    indices = record["indices"].numpy().tolist()
    state: dict[int, dict] = {i: {} for i in indices}
    for key in record.keys():
        if key == "indices":
            continue
        flat = torch.from_numpy(record[key].numpy().copy())
        name, scalar = (key[len("scalar-") :], True) if key.startswith("scalar-") else (key, False)
        sizes = [1 if scalar else params[i].numel() for i in indices]
        if flat.numel() != sum(sizes):
            raise ValueError(f"optimizer state {key!r} has {flat.numel()} values, expected {sum(sizes)}")
        for i, chunk in zip(indices, flat.split(sizes)):
            state[i][name] = chunk.reshape(()) if scalar else chunk.reshape(params[i].shape)
    saved["state"] = state
    optimizer.load_state_dict(saved)


def party_model_from_state(settings: ProtoEvflRunConfig, k: int, state: RecordDict) -> ProtoEvflPartyModel:
    """A party's trained model, from its node state (the in-process harness reads it after a run)."""
    model = ProtoEvflPartyModel(settings.party_config(k))
    model.load_state_dict(arrays_to_state_dict(state["party-model"], reference=model.state_dict()))
    return model.eval()


def top_model_from_result(settings: ProtoEvflRunConfig, result) -> ProtoEvflForClassification:
    model = ProtoEvflForClassification(settings.top_config())
    model.load_state_dict(arrays_to_state_dict(result["top-model"], reference=model.state_dict()))
    return model.eval()


__all__ = [
    "ProtoEvflRunConfig",
    "array_record",
    "load_optimizer_arrays",
    "optimizer_to_arrays",
    "party_model_from_state",
    "read_array",
    "seeded",
    "single_thread",
    "top_model_from_result",
]
