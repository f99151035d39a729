"""ORCA model configuration.

This file is copied next to the weights when an ORCA model is saved (transformers' `register_for_auto_class`), so
it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.
"""

from __future__ import annotations

from transformers import PreTrainedConfig

# Dwell-time bins of the official code (seconds, read time clipped to [1, 400]): bin 0 is "opened and closed at
# once", the other edges are roughly equal in log time. K = 8 bins.
ORCA_BIN_EDGES: tuple[float, ...] = (0.1, 1.9, 26.1, 44.1, 72.1, 118.1, 216.1, 314.0, 486.0)
# Bin -> seconds (midpoints, as in the official code).
ORCA_BIN_SECONDS: tuple[float, ...] = (1.0, 14.0, 35.1, 58.1, 95.1, 167.1, 265.05, 400.0)

BACKBONES = ("mmoe", "ple")


def _str_list(name: str, values) -> list[str]:
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"OrcaConfig.{name} must be a list of non-empty strings, got {values!r}")
    return list(values)


def _int_list(name: str, values) -> list[int]:
    # JSON has no integer type of its own in some writers: 16.0 is accepted as 16; 3.7, "3" and True are not.
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"OrcaConfig.{name} must be a list of integers, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            raise ValueError(f"OrcaConfig.{name} must hold integers, got {v!r} in {values!r}")
        out.append(int(v))
    return out


def _float_list(name: str, values) -> list[float]:
    import math

    if not isinstance(values, (list, tuple)):
        raise ValueError(f"OrcaConfig.{name} must be a list of numbers, got {values!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"OrcaConfig.{name} must hold finite numbers, got {v!r} in {values!r}")
    return [float(v) for v in values]


class OrcaConfig(PreTrainedConfig):
    r"""Configuration of an ORCA multi-task CTR + dwell-time model
    ([ORCA, CIKM'25](https://arxiv.org/abs/2508.16573)).

    Inputs are rows of categorical field ids; each field has its own vocabulary. One extra id per field, equal to
    its vocabulary size, is the "blocked" id used by the counterfactual intervention for post-click fields.

    Args:
        field_names (`list[str]`): names of the categorical input fields, in column order.
        field_vocab_sizes (`list[int]`): vocabulary size of each field (ids `0 .. size-1`).
        post_click_fields (`list[str]`): fields seen only after the click (content); masked by the intervention.
        embed_dim (`int`, defaults to 16): per-field embedding size.
        backbone (`str`, defaults to `"mmoe"`): `"mmoe"` (8 experts, per-task softmax gates) or `"ple"` (two CGC
            levels with shared and task-specific experts).
        num_experts (`int`, defaults to 8): MMoE experts, or PLE shared experts per level.
        num_task_experts (`int`, defaults to 8): PLE task-specific experts per task and level.
        expert_dims (`list[int]`, defaults to `[128, 64, 32]`): MMoE expert MLP widths (last = task feature size).
        ple_level_dims (`list[list[int]]`, defaults to `[[128, 64], [32]]`): PLE expert widths per CGC level.
        tower_dims (`list[int]`, defaults to `[16]`): widths of the C, T and T' towers.
        dropout (`float`, defaults to 0.2): tower dropout.
        bin_edges (`list[float]`): dwell-time bin edges in seconds, strictly increasing; K = len - 1 bins.
        bin_seconds (`list[float]`): seconds reported for each predicted bin.
        use_orca (`bool`, defaults to `True`): `False` gives the plain multi-task baseline on the same backbone.
        use_inter (`bool`, defaults to `True`): task-interaction attention feeding the NDE tower.
        use_inst (`bool`, defaults to `True`): instance inverse-weighting of the NDE loss.
        detach_nde_input (`bool`, defaults to `True`): stop-gradient on h_T into the NDE tower, as drawn in the
            paper's Fig. 2. The released code does not detach it; `False` reproduces the code.
        attention_heads (`int`, defaults to 2): heads of the task-interaction attention.
        alpha (`float`), beta (`float`): weights of the DT loss and the NDE loss (`L = L1 + α L2 + β L3`).
        ctr_weight (`float`, defaults to -0.1), dt_weight (`float`, defaults to 0.8), inst_offset (`float`,
            defaults to -0.2): the instance weight `ω = ReLU(BCE(p,1)^ctr_weight · CE_T^dt_weight + offset)`.
        ctr_loss_weight (`float`, defaults to 1.0): weight of the CTR loss L1. `0.0` with `use_orca=False` gives the
            single-task dwell-time reference (same architecture, trained on the DT loss only).
        field_values (`dict[str, list[str]]`, *optional*): for a model trained on a user's click log
            (`hf-ext train orca --data`), each field's values as strings: id `i` of field `f` is `field_values[f][i]`
            (see [`~hf_ext.orca.data.encode_click_log`]); the list's length is the field's vocabulary size.

    Ids: each field has its ids `0 .. size-1`, then the "blocked" id `size` (post-click masking) and an
    out-of-vocabulary bucket `size + 1`; the model maps every id above `size` to that bucket (negative ids are an
    error). The OOV rows start at zero (no information) and are trained only if training data holds unseen ids.
    """

    model_type = "hf_ext_orca"

    field_names: list[str] | None = None
    field_vocab_sizes: list[int] | None = None
    post_click_fields: list[str] | None = None
    embed_dim: int = 16
    backbone: str = "mmoe"
    num_experts: int = 8
    num_task_experts: int = 8
    expert_dims: list[int] | None = None
    ple_level_dims: list[list[int]] | None = None
    tower_dims: list[int] | None = None
    dropout: float = 0.2
    bin_edges: list[float] | None = None
    bin_seconds: list[float] | None = None
    use_orca: bool = True
    use_inter: bool = True
    use_inst: bool = True
    detach_nde_input: bool = True
    attention_heads: int = 2
    alpha: float = 1.0
    beta: float = 1.0
    ctr_weight: float = -0.1
    dt_weight: float = 0.8
    inst_offset: float = -0.2
    ctr_loss_weight: float = 1.0
    initializer_range: float = 0.02
    field_values: dict[str, list[str]] | None = None

    def __post_init__(self, **kwargs):
        if self.field_names is None:
            self.field_names = ["user_id", "item_id"]
        if self.field_vocab_sizes is None:
            self.field_vocab_sizes = [100] * len(self.field_names)
        if self.post_click_fields is None:
            self.post_click_fields = []
        if self.expert_dims is None:
            self.expert_dims = [128, 64, 32]
        if self.ple_level_dims is None:
            self.ple_level_dims = [[128, 64], [32]]
        if self.tower_dims is None:
            self.tower_dims = [16]
        if self.bin_edges is None:
            self.bin_edges = list(ORCA_BIN_EDGES)
        if self.bin_seconds is None:
            self.bin_seconds = list(ORCA_BIN_SECONDS)
        # Types are checked before anything is converted: `int("3")` or `int(3.7)` would hide a bad value
        # (a string or float where a size belongs), at construction and on load (`from_pretrained` builds the config
        # through the same `__post_init__`).
        self.field_names = _str_list("field_names", self.field_names)
        self.field_vocab_sizes = _int_list("field_vocab_sizes", self.field_vocab_sizes)
        self.post_click_fields = _str_list("post_click_fields", self.post_click_fields)
        self.expert_dims = _int_list("expert_dims", self.expert_dims)
        if not isinstance(self.ple_level_dims, (list, tuple)):
            raise ValueError(
                f"OrcaConfig.ple_level_dims must be a list of lists of integers, got {self.ple_level_dims!r}"
            )
        self.ple_level_dims = [_int_list("ple_level_dims", level) for level in self.ple_level_dims]
        self.tower_dims = _int_list("tower_dims", self.tower_dims)
        self.bin_edges = _float_list("bin_edges", self.bin_edges)
        self.bin_seconds = _float_list("bin_seconds", self.bin_seconds)
        super().__post_init__(**kwargs)
        self.validate_orca()

    def validate_orca(self):
        """Checks the ORCA fields; every failure is a `ValueError` that names the field and the allowed range."""
        import math

        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        if len(self.field_names) == 0:
            raise ValueError("OrcaConfig.field_names: at least one input field is required")
        if len(set(self.field_names)) != len(self.field_names):
            raise ValueError(f"OrcaConfig.field_names: duplicate names in {self.field_names}")
        if len(self.field_vocab_sizes) != len(self.field_names):
            raise ValueError(
                f"OrcaConfig.field_vocab_sizes: {len(self.field_vocab_sizes)} sizes for "
                f"{len(self.field_names)} fields {self.field_names}"
            )
        for name, size in zip(self.field_names, self.field_vocab_sizes):
            if size < 1:
                raise ValueError(f"OrcaConfig.field_vocab_sizes: field {name!r} has vocabulary size {size} < 1")
        unknown = [f for f in self.post_click_fields if f not in self.field_names]
        if unknown:
            raise ValueError(f"OrcaConfig.post_click_fields: {unknown} are not among field_names {self.field_names}")
        for name in ("use_orca", "use_inter", "use_inst", "detach_nde_input"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"OrcaConfig.{name} must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.backbone, str) or self.backbone not in BACKBONES:
            raise ValueError(f"OrcaConfig.backbone must be one of {BACKBONES}, got {self.backbone!r}")
        for name in ("embed_dim", "num_experts", "num_task_experts", "attention_heads"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"OrcaConfig.{name} must be an integer >= 1, got {value!r}")
        for name in (
            "alpha",
            "beta",
            "ctr_weight",
            "dt_weight",
            "inst_offset",
            "ctr_loss_weight",
            "dropout",
            "initializer_range",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"OrcaConfig.{name} must be a finite number, got {value!r}")
        if self.initializer_range <= 0:
            raise ValueError(f"OrcaConfig.initializer_range must be > 0, got {self.initializer_range!r}")
        if any(v <= 0 for v in self.bin_seconds):
            raise ValueError(f"OrcaConfig.bin_seconds must be positive seconds, got {self.bin_seconds}")
        for name in ("alpha", "beta", "ctr_loss_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"OrcaConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        edges = self.bin_edges
        if len(edges) < 3:
            raise ValueError(f"OrcaConfig.bin_edges: need at least 3 edges (2 bins), got {edges}")
        if any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(f"OrcaConfig.bin_edges must be strictly increasing, got {edges}")
        if len(self.bin_seconds) != len(edges) - 1:
            raise ValueError(f"OrcaConfig.bin_seconds: {len(self.bin_seconds)} values for {len(edges) - 1} bins")
        if not self.expert_dims or not self.tower_dims or not self.ple_level_dims or not all(self.ple_level_dims):
            raise ValueError("OrcaConfig.expert_dims, ple_level_dims and tower_dims must be non-empty")
        for name, dims in (
            ("expert_dims", self.expert_dims),
            ("tower_dims", self.tower_dims),
            ("ple_level_dims", [d for level in self.ple_level_dims for d in level]),
        ):
            if any(d < 1 for d in dims):
                raise ValueError(f"OrcaConfig.{name}: every width must be >= 1, got {dims}")
        if self.expert_dims[-1] % self.attention_heads or self.ple_level_dims[-1][-1] % self.attention_heads:
            raise ValueError(f"OrcaConfig.attention_heads={self.attention_heads} must divide the task feature size")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"OrcaConfig.dropout must be in [0, 1), got {self.dropout}")
        if self.field_values is not None:
            if not isinstance(self.field_values, dict):
                raise ValueError(
                    f"OrcaConfig.field_values must map field names to value lists, got {self.field_values!r}"
                )
            sizes = dict(zip(self.field_names, self.field_vocab_sizes))
            for name, values in self.field_values.items():
                if name not in sizes:
                    raise ValueError(f"OrcaConfig.field_values: {name!r} is not among field_names {self.field_names}")
                if not isinstance(values, (list, tuple)) or len(values) != sizes[name]:
                    raise ValueError(
                        f"OrcaConfig.field_values: field {name!r} needs {sizes[name]} values (its vocabulary size), "
                        f"got {len(values) if isinstance(values, (list, tuple)) else values!r}"
                    )

    @property
    def num_bins(self) -> int:
        return len(self.bin_edges) - 1

    @property
    def num_fields(self) -> int:
        return len(self.field_names)

    @property
    def task_feature_dim(self) -> int:
        return self.expert_dims[-1] if self.backbone == "mmoe" else self.ple_level_dims[-1][-1]


__all__ = ["OrcaConfig", "ORCA_BIN_EDGES", "ORCA_BIN_SECONDS"]
