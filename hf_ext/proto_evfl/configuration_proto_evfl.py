"""Proto-EVFL configurations: one per artifact kind (a party's encoder, the active party's top model).

This file is copied next to the weights when a Proto-EVFL model is saved (transformers' `register_for_auto_class`),
so it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.

Two configuration classes, not one with a `role` field: each party's encoder and the top model are separate Hub
artifacts held by different organisations, and `AutoModel` maps one model class per config class.
"""

from __future__ import annotations

from transformers import PreTrainedConfig

AGGREGATIONS = ("gate", "concat")
CLASSIFIERS = ("prototype", "linear")


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
        self.hidden_dims = [int(v) for v in self.hidden_dims]
        super().__post_init__(**kwargs)
        self.validate_party()

    def validate_party(self):
        """Checks the fields; every failure is a `ValueError` that names the field."""
        name = type(self).__name__
        for field in ("input_dim", "embed_dim"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"{name}.{field} must be >= 1, got {getattr(self, field)}")
        if any(v < 1 for v in self.hidden_dims):
            raise ValueError(f"{name}.hidden_dims must be positive widths, got {self.hidden_dims}")
        if self.num_classes < 2:
            raise ValueError(f"{name}.num_classes must be >= 2, got {self.num_classes}")
        if not self.temperature > 0:
            raise ValueError(f"{name}.temperature must be > 0, got {self.temperature}")
        if self.party_index < 0:
            raise ValueError(f"{name}.party_index must be >= 0, got {self.party_index}")


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
            self.party_input_dims = [int(v) for v in self.party_input_dims]
        super().__post_init__(**kwargs)
        self.validate_top()

    def validate_top(self):
        """Checks the fields; every failure is a `ValueError` that names the field."""
        name = type(self).__name__
        for field in ("num_parties", "embed_dim", "fused_dim"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"{name}.{field} must be >= 1, got {getattr(self, field)}")
        if self.num_classes < 2:
            raise ValueError(f"{name}.num_classes must be >= 2, got {self.num_classes}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"{name}.aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.classifier not in CLASSIFIERS:
            raise ValueError(f"{name}.classifier must be one of {CLASSIFIERS}, got {self.classifier!r}")
        if not self.temperature > 0:
            raise ValueError(f"{name}.temperature must be > 0, got {self.temperature}")
        if not 0.0 <= self.prototype_momentum < 1.0:
            raise ValueError(f"{name}.prototype_momentum must be in [0, 1), got {self.prototype_momentum}")
        if self.local_loss_weight < 0:
            raise ValueError(f"{name}.local_loss_weight must be >= 0, got {self.local_loss_weight}")
        if self.party_input_dims is not None:
            if len(self.party_input_dims) != self.num_parties:
                raise ValueError(
                    f"{name}.party_input_dims has {len(self.party_input_dims)} widths for {self.num_parties} parties"
                )
            if any(v < 1 for v in self.party_input_dims):
                raise ValueError(f"{name}.party_input_dims must be positive widths, got {self.party_input_dims}")


__all__ = ["ProtoEvflConfig", "ProtoEvflPartyConfig", "AGGREGATIONS", "CLASSIFIERS"]
