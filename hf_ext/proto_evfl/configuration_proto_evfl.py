"""Proto-EVFL configurations: one per artifact kind (a party's encoder, the active party's top model).

This file is copied next to the weights when a Proto-EVFL model is saved (transformers' `register_for_auto_class`),
so it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.

Two configuration classes, not one with a `role` field: each party's encoder and the top model are separate Hub
artifacts held by different organisations, and `AutoModel` maps one model class per config class.
"""

from __future__ import annotations

import math

from transformers import PreTrainedConfig

AGGREGATIONS = ("gate", "concat")
CLASSIFIERS = ("prototype", "linear")


# Strict checks shared by both configs (kept in this file: it is shipped as remote code and imports nothing from
# hf_ext). A string, `None`, a bool or a non-integral float where an integer is needed is refused, naming the field;
# so is a non-finite or out-of-range number.
def _check_int(owner: str, field: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{owner}.{field} must be an integer >= {low}, got {value!r}")
    return value


def _check_float(owner: str, field: str, value, low: float, high: float = math.inf, *, open_low=False, open_high=False):
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if open_low else value >= low) and (value < high if open_high else value <= high)
    if not ok:
        bracket = ("(" if open_low else "[") + f"{low:g}, {high:g}" + (")" if open_high else "]")
        raise ValueError(f"{owner}.{field} must be a finite number in {bracket}, got {value!r}")
    return float(value)


def _check_widths(owner: str, field: str, values, *, allow_empty: bool) -> list[int]:
    if isinstance(values, str | bytes) or not hasattr(values, "__iter__"):
        raise ValueError(f"{owner}.{field} must be a list of integer widths >= 1, got {values!r}")
    values = list(values)
    if not values and not allow_empty:
        raise ValueError(f"{owner}.{field} must list at least one width, got []")
    for v in values:
        _check_int(owner, field, v, 1)
    return values


class ProtoEvflPartyConfig(PreTrainedConfig):
    r"""Configuration of one party's local model in Proto-EVFL
    ([Proto-EVFL, arXiv 2507.22488](https://arxiv.org/abs/2507.22488)): an encoder over the party's own feature
    block and its local class prototypes (one per class, unseen classes included).

    Args:
        input_dim (`int`, defaults to 32): width of the party's feature block.
        hidden_dims (`list[int]`, defaults to `[64]`): widths of the encoder's hidden layers (ReLU).
        embed_dim (`int`, defaults to 16): size `d` of the L2-normalised embedding `z^k` sent to the active party.
        num_classes (`int`, defaults to 10): number of classes `C`, including classes without labels.
        temperature (`float`, defaults to 0.1): `τ_p` of the prototype logits `cos(z, p_c) / τ_p`.
        party_index (`int`, defaults to 0): which party this is (0 is the active party's own feature block).
        initializer_range (`float`, defaults to 1.0): standard deviation of the initial prototypes (they are
            normalised before use, so only their directions matter).
    """

    model_type = "hf_ext_proto_evfl_party"

    input_dim: int = 32
    hidden_dims: list[int] | None = None
    embed_dim: int = 16
    num_classes: int = 10
    temperature: float = 0.1
    party_index: int = 0
    initializer_range: float = 1.0

    def __post_init__(self, **kwargs):
        if self.hidden_dims is None:
            self.hidden_dims = [64]
        # an empty list is allowed: the encoder is then one linear map to the embedding
        self.hidden_dims = _check_widths(type(self).__name__, "hidden_dims", self.hidden_dims, allow_empty=True)
        super().__post_init__(**kwargs)
        self.validate_party()

    def validate_party(self):
        """Checks every field's type and range (at construction and on load); a failure is a `ValueError` naming
        the field."""
        name = type(self).__name__
        for field in ("input_dim", "embed_dim"):
            _check_int(name, field, getattr(self, field), 1)
        self.hidden_dims = _check_widths(name, "hidden_dims", self.hidden_dims, allow_empty=True)
        _check_int(name, "num_classes", self.num_classes, 2)
        _check_float(name, "temperature", self.temperature, 0.0, open_low=True)
        _check_int(name, "party_index", self.party_index, 0)
        _check_float(name, "initializer_range", self.initializer_range, 0.0, open_low=True)


class ProtoEvflConfig(PreTrainedConfig):
    r"""Configuration of the active party's top model in Proto-EVFL
    ([Proto-EVFL, arXiv 2507.22488](https://arxiv.org/abs/2507.22488)): the adaptive gate over the parties'
    embeddings, one projection per party into the fused space, the global class prototypes and the classifier.

    Args:
        num_parties (`int`, defaults to 2): number of parties `K` (feature blocks), the active party's included.
        embed_dim (`int`, defaults to 16): size `d` of each party's embedding `z^k`.
        fused_dim (`int`, defaults to 16): size of the fused representation `h = Σ_k g_k W_k z^k`.
        num_classes (`int`, defaults to 10): number of classes `C`, including classes without labels.
        aggregation (`str`, defaults to `"gate"`): `"gate"` (per-sample softmax gate `g = softmax(W_g [z^1; …; z^K]
            + b_g)`) or `"concat"` (`g_k = 1`, i.e. a linear map of the concatenated embeddings; an ablation).
        classifier (`str`, defaults to `"prototype"`): `"prototype"` (`logits_c = cos(h, P_c) / τ_p` with global
            prototypes `P`) or `"linear"` (a softmax layer; the vanilla-VFL baseline).
        temperature (`float`, defaults to 0.1): `τ_p` of the prototype logits.
        prototype_momentum (`float`, defaults to 0.9): EMA momentum `m` of the global prototypes.
        local_loss_weight (`float`, defaults to 1.0): `μ` of `L_sup = CE(logits, y) + μ Σ_k CE(cos(z^k, p^k_y)/τ_p, y)`
            (the second term ties the parties' local prototypes to the labels).
        party_input_dims (`list[int]`, *optional*): the width of each party's feature block, as agreed by the
            federation; the active party checks what the parties report against it.
        initializer_range (`float`, defaults to 1.0): standard deviation of the initial global prototypes.
    """

    model_type = "hf_ext_proto_evfl"

    num_parties: int = 2
    embed_dim: int = 16
    fused_dim: int = 16
    num_classes: int = 10
    aggregation: str = "gate"
    classifier: str = "prototype"
    temperature: float = 0.1
    prototype_momentum: float = 0.9
    local_loss_weight: float = 1.0
    party_input_dims: list[int] | None = None
    initializer_range: float = 1.0

    def __post_init__(self, **kwargs):
        if self.party_input_dims is not None:
            name = type(self).__name__
            self.party_input_dims = _check_widths(name, "party_input_dims", self.party_input_dims, allow_empty=False)
        super().__post_init__(**kwargs)
        self.validate_top()

    def validate_top(self):
        """Checks every field's type and range (at construction and on load); a failure is a `ValueError` naming
        the field."""
        name = type(self).__name__
        for field in ("num_parties", "embed_dim", "fused_dim"):
            _check_int(name, field, getattr(self, field), 1)
        _check_int(name, "num_classes", self.num_classes, 2)
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"{name}.aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.classifier not in CLASSIFIERS:
            raise ValueError(f"{name}.classifier must be one of {CLASSIFIERS}, got {self.classifier!r}")
        _check_float(name, "temperature", self.temperature, 0.0, open_low=True)
        _check_float(name, "prototype_momentum", self.prototype_momentum, 0.0, 1.0, open_high=True)
        _check_float(name, "local_loss_weight", self.local_loss_weight, 0.0)
        _check_float(name, "initializer_range", self.initializer_range, 0.0, open_low=True)
        if self.party_input_dims is not None:
            self.party_input_dims = _check_widths(name, "party_input_dims", self.party_input_dims, allow_empty=False)
            if len(self.party_input_dims) != self.num_parties:
                raise ValueError(
                    f"{name}.party_input_dims has {len(self.party_input_dims)} widths for {self.num_parties} parties"
                )


__all__ = ["ProtoEvflConfig", "ProtoEvflPartyConfig", "AGGREGATIONS", "CLASSIFIERS"]
