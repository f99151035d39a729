"""Proto-EVFL: vertical federated learning with dual prototypes on extremely unaligned, imbalanced data
([Proto-EVFL, arXiv 2507.22488](https://arxiv.org/abs/2507.22488)).

Two artifacts, held by different parties:

* [`ProtoEvflPartyModel`]: one party's encoder `f_k` over its own feature block and its local class prototypes
  `{p^k_c}` (unseen classes included). It never leaves the party; only its embeddings `z^k` and prototype logits do.
* [`ProtoEvflForClassification`]: the active party's top model: the adaptive gate, one projection `W_k` per party,
  the global prototypes `{P_c}` (EMA of the fused representation per labelled class, projected local prototypes for
  classes without labels) and the classifier `logits_c = cos(h, P_c) / τ_p`.

Self-contained on purpose: this file and `configuration_proto_evfl.py` are copied next to the weights on save, so a
Hub user loads either artifact with `trust_remote_code=True` without hf_ext installed. Only relative imports, torch
and transformers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from .configuration_proto_evfl import ProtoEvflConfig, ProtoEvflPartyConfig


def prototype_logits(z: torch.Tensor, prototypes: torch.Tensor, temperature: float) -> torch.Tensor:
    """`cos(z_i, p_c) / τ` for every row of `z` (`(..., d)`) and prototype (`(C, d)`): shape `(..., C)`."""
    return F.normalize(z, dim=-1) @ F.normalize(prototypes, dim=-1).transpose(0, 1) / temperature


def _check_features(x, width: int, what: str) -> None:
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        raise ValueError(f"{what} must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.dim() != 2 or x.shape[1] != width:
        got = f"{x.shape[1]} columns" if x.dim() == 2 else f"shape {tuple(x.shape)}"
        raise ValueError(f"{what} has {got}; the encoder expects (batch, {width})")
    if not torch.isfinite(x).all():
        raise ValueError(f"{what} contains NaN or inf")


def _check_labels(labels, batch: int, num_classes: int) -> None:
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels must be an integer tensor of shape ({batch},), got {type(labels).__name__}")
    if labels.shape != (batch,) or labels.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"labels must be an integer tensor of shape ({batch},), got {labels.dtype} {labels.shape}")
    if batch == 0:  # a mean over no samples: the loss would be NaN without a word
        raise ValueError("labels: the batch is empty (0 samples); a loss needs at least one labelled sample")
    if labels.numel() and (labels.min() < 0 or labels.max() >= num_classes):
        low, high = int(labels.min()), int(labels.max())
        raise ValueError(f"labels must be classes in [0, {num_classes}), got values in [{low}, {high}]")


@dataclass
class ProtoEvflPartyOutput(ModelOutput):
    """Output of [`ProtoEvflPartyModel`].

    Args:
        loss (`torch.FloatTensor`, *optional*): `CE(cos(z, p_y) / τ_p, y)` when labels are given.
        embeddings (`torch.FloatTensor` of shape `(batch, embed_dim)`): the L2-normalised embeddings `z^k`.
        prototype_logits (`torch.FloatTensor` of shape `(batch, num_classes)`): `cos(z^k, p^k_c) / τ_p`.
    """

    loss: torch.FloatTensor | None = None
    embeddings: torch.FloatTensor | None = None
    prototype_logits: torch.FloatTensor | None = None


@dataclass
class ProtoEvflOutput(ModelOutput):
    """Output of [`ProtoEvflForClassification`].

    Args:
        loss (`torch.FloatTensor`, *optional*): `L_sup = CE(logits, y) + μ Σ_k CE(party_logits_k, y)`.
        logits (`torch.FloatTensor` of shape `(batch, num_classes)`): class scores.
        fused (`torch.FloatTensor` of shape `(batch, fused_dim)`): `h = Σ_k g_k W_k z^k`.
        gate (`torch.FloatTensor` of shape `(batch, num_parties)`): the per-sample gate `g` (all ones for concat).
        classification_loss (`torch.FloatTensor`, *optional*): `CE(logits, y)`.
        local_prototype_loss (`torch.FloatTensor`, *optional*): `Σ_k CE(party_logits_k, y)` (unweighted).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    fused: torch.FloatTensor | None = None
    gate: torch.FloatTensor | None = None
    classification_loss: torch.FloatTensor | None = None
    local_prototype_loss: torch.FloatTensor | None = None


class ProtoEvflAggregation(nn.Module):
    """Adaptive gated feature aggregation `h = Σ_k g_k W_k z^k`, `g = softmax(W_g [z^1; …; z^K] + b_g)`.

    The projections live directly on this module (one `(d, d_h)` matrix per party) because transformers only runs
    `_init_weights` on custom modules that own parameters. `gate_mean` is the running mean gate `ḡ`, used to map the
    parties' local prototypes of unseen classes into the fused space.
    """

    def __init__(self, config: ProtoEvflConfig):
        super().__init__()
        k, d = config.num_parties, config.embed_dim
        self.gate = nn.Linear(k * d, k) if config.aggregation == "gate" else None
        self.projection = nn.Parameter(torch.empty(k, d, config.fused_dim))
        self.register_buffer("gate_mean", torch.empty(k))

    def initial_gate_mean(self) -> torch.Tensor:
        k = self.projection.shape[0]
        return torch.full((k,), 1.0 / k) if self.gate is not None else torch.ones(k)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.gate is not None:
            g = self.gate(z.flatten(1)).softmax(-1)
        else:  # concatenation: W [z^1; …; z^K] = Σ_k W_k z^k
            g = z.new_ones(z.shape[:2])
        return torch.einsum("bkd,kdh,bk->bh", z, self.projection, g), g

    def project_per_party(self, vectors: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """`Σ_k w_kn W_k v^k_n` for `vectors` of shape `(K, n, d)`: shape `(n, d_h)`. `weights` (`(K, n)`) default
        to the running mean gate `ḡ_k` for every `n`."""
        if weights is None:
            weights = self.gate_mean[:, None].expand(vectors.shape[:2])
        return torch.einsum("knd,kdh,kn->nh", vectors, self.projection, weights.to(vectors))


class ProtoEvflPrototypeHead(nn.Module):
    """The global prototypes `P` (persistent buffers, updated by EMA, not by gradient) and the number of labelled
    samples seen per class; a class with count 0 is *unseen* and takes its prototype from the parties."""

    def __init__(self, config: ProtoEvflConfig):
        super().__init__()
        self.register_buffer("prototypes", torch.empty(config.num_classes, config.fused_dim))
        self.register_buffer("class_counts", torch.zeros(config.num_classes, dtype=torch.long))


class ProtoEvflPreTrainedModel(PreTrainedModel):
    base_model_prefix = "proto_evfl"
    _no_split_modules = []

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, ProtoEvflPartyModel):
            init.normal_(module.prototypes, std=self.config.initializer_range)
        elif isinstance(module, ProtoEvflAggregation):
            # Xavier-uniform per party (fan_in = d, fan_out = d_h).
            bound = (6.0 / (module.projection.shape[1] + module.projection.shape[2])) ** 0.5
            init.uniform_(module.projection, -bound, bound)
            init.copy_(module.gate_mean, module.initial_gate_mean())
        elif isinstance(module, ProtoEvflPrototypeHead):
            init.normal_(module.prototypes, std=self.config.initializer_range)
            init.zeros_(module.class_counts)


class ProtoEvflPartyModel(ProtoEvflPreTrainedModel):
    r"""One party's local model: an MLP encoder over the party's feature block with L2-normalised output `z^k`, and
    its local class prototypes `p^k` (a parameter, trained by the label-tying term of the upper level and the
    prototype-contrastive loss of the lower level, and moved by EMA towards the OT-selected samples).

    Args:
        config ([`ProtoEvflPartyConfig`]): model configuration.

    Example:

    ```python
    >>> import hf_ext  # registers hf_ext_proto_evfl_party with AutoModel
    >>> from transformers import AutoModel
    >>> party = AutoModel.from_pretrained("path/to/party-1")
    >>> out = party(features=x)  # (batch, input_dim) float features of this party only
    >>> out.embeddings, out.prototype_logits
    ```
    """

    config_class = ProtoEvflPartyConfig
    main_input_name = "features"

    def __init__(self, config: ProtoEvflPartyConfig):
        super().__init__(config)
        layers, width = [], config.input_dim
        for hidden in config.hidden_dims:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, config.embed_dim))
        self.encoder = nn.Sequential(*layers)
        self.prototypes = nn.Parameter(torch.empty(config.num_classes, config.embed_dim))
        self.post_init()

    def embed(self, features: torch.Tensor) -> torch.Tensor:
        """The L2-normalised embeddings `z^k = f_k(x^k) / ‖f_k(x^k)‖`."""
        _check_features(features, self.config.input_dim, f"party {self.config.party_index}: feature block")
        return F.normalize(self.encoder(features), dim=-1)

    def prototype_logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        return prototype_logits(embeddings, self.prototypes, self.config.temperature)

    def normalized_prototypes(self) -> torch.Tensor:
        return F.normalize(self.prototypes, dim=-1)

    def forward(
        self, features: torch.Tensor, labels: torch.LongTensor | None = None, return_dict: bool | None = None
    ) -> ProtoEvflPartyOutput:
        r"""
        Args:
            features (`torch.FloatTensor` of shape `(batch, input_dim)`): this party's feature block.
            labels (`torch.LongTensor` of shape `(batch,)`, *optional*): classes, for the prototype loss.
        """
        z = self.embed(features)
        logits = self.prototype_logits(z)
        loss = None
        if labels is not None:
            _check_labels(labels, z.shape[0], self.config.num_classes)
            loss = F.cross_entropy(logits, labels)
        return ProtoEvflPartyOutput(loss=loss, embeddings=z, prototype_logits=logits)


class ProtoEvflForClassification(ProtoEvflPreTrainedModel):
    r"""The active party's top model: gated aggregation of the parties' embeddings and a classifier over global
    prototypes (or a linear softmax layer for the vanilla-VFL baseline).

    In training mode with labels, each forward pass moves the global prototype of every labelled class in the
    batch towards the batch mean of `h` (EMA, momentum `config.prototype_momentum`) and updates the running gate
    mean; classes never labelled get their prototype from [`set_unseen_prototypes`].

    Args:
        config ([`ProtoEvflConfig`]): model configuration.

    Example:

    ```python
    >>> import hf_ext  # registers hf_ext_proto_evfl with AutoModel
    >>> from transformers import AutoModel
    >>> top = AutoModel.from_pretrained("path/to/top-model")
    >>> out = top(party_embeddings=z)  # (batch, num_parties, embed_dim), received from the parties
    >>> out.logits.argmax(-1)
    ```
    """

    config_class = ProtoEvflConfig
    main_input_name = "party_embeddings"
    accepts_loss_kwargs = False  # the loss is a per-batch mean

    def __init__(self, config: ProtoEvflConfig):
        super().__init__(config)
        self.aggregation = ProtoEvflAggregation(config)
        self.head = ProtoEvflPrototypeHead(config)
        self.classifier = nn.Linear(config.fused_dim, config.num_classes) if config.classifier == "linear" else None
        self.post_init()

    @property
    def unseen_classes(self) -> torch.Tensor:
        """Indices of the classes without any labelled sample so far."""
        return (self.head.class_counts == 0).nonzero().flatten()

    def _check_inputs(self, z, labels, party_logits) -> None:
        cfg = self.config
        if not isinstance(z, torch.Tensor) or not z.dtype.is_floating_point:
            raise ValueError(f"party_embeddings must be a floating-point tensor, got {getattr(z, 'dtype', type(z))}")
        if z.dim() != 3 or z.shape[1:] != (cfg.num_parties, cfg.embed_dim):
            raise ValueError(
                f"party_embeddings must have shape (batch, {cfg.num_parties}, {cfg.embed_dim}), got {tuple(z.shape)}"
            )
        if not torch.isfinite(z).all():
            raise ValueError("party_embeddings contains NaN or inf")
        if labels is not None:
            _check_labels(labels, z.shape[0], cfg.num_classes)
        if party_logits is not None:
            if not isinstance(party_logits, torch.Tensor) or not party_logits.dtype.is_floating_point:
                got = getattr(party_logits, "dtype", type(party_logits).__name__)
                raise ValueError(f"party_logits must be a floating-point tensor, got {got}")
            if party_logits.shape != (z.shape[0], cfg.num_parties, cfg.num_classes):
                raise ValueError(
                    f"party_logits must have shape ({z.shape[0]}, {cfg.num_parties}, {cfg.num_classes}), "
                    f"got {tuple(party_logits.shape)}"
                )
            if not torch.isfinite(party_logits).all():  # would turn the label-tying loss into NaN silently
                raise ValueError("party_logits contains NaN or inf")

    def classify(self, fused: torch.Tensor) -> torch.Tensor:
        if self.classifier is not None:
            return self.classifier(fused)
        return prototype_logits(fused, self.head.prototypes, self.config.temperature)

    def forward(
        self,
        party_embeddings: torch.Tensor,
        labels: torch.LongTensor | None = None,
        party_logits: torch.Tensor | None = None,
        return_dict: bool | None = None,
    ) -> ProtoEvflOutput:
        r"""
        Args:
            party_embeddings (`torch.FloatTensor` of shape `(batch, num_parties, embed_dim)`): the parties'
                embeddings `z^k` of the same aligned samples, in party order.
            labels (`torch.LongTensor` of shape `(batch,)`, *optional*): the aligned samples' classes.
            party_logits (`torch.FloatTensor` of shape `(batch, num_parties, num_classes)`, *optional*): the parties'
                local prototype logits `cos(z^k, p^k_c) / τ_p`, for the label-tying term.
        """
        self._check_inputs(party_embeddings, labels, party_logits)
        fused, gate = self.aggregation(party_embeddings)
        logits = self.classify(fused)
        out = ProtoEvflOutput(logits=logits, fused=fused, gate=gate)
        if labels is not None:
            ce = F.cross_entropy(logits, labels)
            loss = ce
            if party_logits is not None and self.config.local_loss_weight > 0:
                local = sum(F.cross_entropy(party_logits[:, k], labels) for k in range(self.config.num_parties))
                loss = loss + self.config.local_loss_weight * local
                out.local_prototype_loss = local
            out.loss, out.classification_loss = loss, ce
            if self.training:
                self.update_prototypes(fused.detach(), labels, gate.detach())
        return out

    @torch.no_grad()
    def update_prototypes(self, fused: torch.Tensor, labels: torch.Tensor, gate: torch.Tensor) -> None:
        """EMA of `h` per labelled class (a class's first batch sets its prototype), and of the gate."""
        m, head = self.config.prototype_momentum, self.head
        for c in labels.unique().tolist():
            mean = F.normalize(fused[labels == c].mean(0), dim=-1)
            if head.class_counts[c] == 0:
                head.prototypes[c] = mean
            else:
                head.prototypes[c] = F.normalize(m * head.prototypes[c] + (1 - m) * mean, dim=-1)
        head.class_counts += torch.bincount(labels, minlength=self.config.num_classes)
        if self.aggregation.gate is not None:
            self.aggregation.gate_mean.mul_(m).add_((1 - m) * gate.mean(0))

    @torch.no_grad()
    def set_unseen_prototypes(
        self, local_prototypes: torch.Tensor, party_evidence: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Sets `P_u = normalize(Σ_k w_ku W_k p^k_u)` for every class `u` without labelled samples, with
        `w_ku = ḡ_k` (the spec's reading) or, given `party_evidence`, `w_ku ∝ ḡ_k e_ku`.

        Why the evidence weights: with inter-party imbalance an unseen class is frequent at one party and nearly
        absent at another, whose `p^k_u` is then a cluster of something else; weighting by how many of its samples
        each party puts in `u` (its local prior times its pool size) keeps that noise out of `P_u`.

        Args:
            local_prototypes (`torch.FloatTensor` of shape `(num_parties, num_classes, embed_dim)`): the parties'
                local prototypes (normalised), as they reported them this round.
            party_evidence (`torch.FloatTensor` of shape `(num_parties, num_classes)`, *optional*): non-negative
                evidence of each party for each class (e.g. `n_k π^k_c`).

        Returns:
            `torch.LongTensor`: the classes whose prototype was set.
        """
        cfg = self.config
        if local_prototypes.shape != (cfg.num_parties, cfg.num_classes, cfg.embed_dim):
            raise ValueError(
                f"local_prototypes must have shape ({cfg.num_parties}, {cfg.num_classes}, {cfg.embed_dim}), "
                f"got {tuple(local_prototypes.shape)}"
            )
        unseen = self.unseen_classes
        weights = None
        if party_evidence is not None:
            if party_evidence.shape != (cfg.num_parties, cfg.num_classes):
                raise ValueError(f"party_evidence must have shape ({cfg.num_parties}, {cfg.num_classes}), "
                                 f"got {tuple(party_evidence.shape)}")  # fmt: skip
            if not torch.isfinite(party_evidence).all() or (party_evidence < 0).any():
                raise ValueError("party_evidence must be finite and non-negative")
        if unseen.numel():
            vectors = local_prototypes[:, unseen].to(self.head.prototypes)
            seen = self.head.class_counts > 0
            if party_evidence is not None and seen.any():
                e = party_evidence[:, unseen].to(vectors)
                share = torch.where(e.sum(0, keepdim=True) > 0, e / e.sum(0, keepdim=True).clamp_min(1e-30),
                                    torch.ones_like(e))  # fmt: skip
                share = share / share.amax(0, keepdim=True)  # the party with the most evidence keeps its p^k_u
                mean = F.normalize(local_prototypes[:, seen].to(vectors).mean(1), dim=-1)  # (K, d)
                vectors = share[..., None] * vectors + (1 - share[..., None]) * mean[:, None]
            projected = self.aggregation.project_per_party(vectors, weights)
            self.head.prototypes[unseen] = F.normalize(projected, dim=-1)
        return unseen


__all__ = [
    "ProtoEvflForClassification",
    "ProtoEvflOutput",
    "ProtoEvflPartyModel",
    "ProtoEvflPartyOutput",
    "ProtoEvflPreTrainedModel",
    "prototype_logits",
]
