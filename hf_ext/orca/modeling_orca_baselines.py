"""Baselines of the ORCA comparison (issue 39), each a `PreTrainedModel` on the same [`OrcaConfig`] and the same
outputs as [`OrcaModel`], so that one trainer, one learning-rate grid and one scorer serve every arm:

- [`OrcaFMModel`]: a **single-task factorization machine** (Rendle, ICDM'10) over the same categorical fields,
  predicting the dwell-time bin alone (one FM per bin: bias, first-order weights and pairwise factors).
- [`OrcaESMMModel`]: an **ESMM-style** model (Ma et al., SIGIR'18) adapted to dwell-time bins. The click tower gives
  `p(click)`, the dwell tower gives `p(bin | click)`, and the model is trained over the *entire impression space* on
  the observed quantities only: the click (BCE on `p(click)`) and, for every bin `k`, the event "clicked and read in
  bin `k`" (BCE on the entire-space product `p(click) · p(bin = k | click)`, ESMM's pCTCVR = pCTR × pCVR with each
  bin as a conversion). `p(bin | click)` is never fitted on the clicked rows alone: unclicked impressions push the
  product down, which is ESMM's remedy for the sample-selection bias of a clicked-only DT model. (The (K+1)-way
  cross-entropy over {no click, click ∧ bin k} would factor into the click BCE plus a clicked-only CE, i.e. the plain
  multi-task loss; the per-bin BCE is the adaptation that keeps ESMM's entire-space gradient.)

PLE needs no class of its own: it is [`OrcaModel`] with `backbone="ple"` and `use_orca=False` (the `ple` arm of
`hf-ext reproduce orca`), whose CGC gates mix each task's own experts with the shared ones
([`~hf_ext.orca.modeling_orca.OrcaCGCLevel`]).

Self-contained like `modeling_orca.py` (relative imports, torch and transformers only).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .configuration_orca import OrcaConfig
from .modeling_orca import (
    IGNORE_INDEX,
    OrcaFieldEmbedding,
    OrcaHead,
    OrcaMLP,
    OrcaModel,
    OrcaOutput,
    OrcaPreTrainedModel,
)


class _BaselineMixin:
    """What [`~hf_ext.orca.trainer.OrcaTrainer`] and the scorer read from every model: the derived lookup buffers,
    the input checks, and no NDE branch."""

    def _register_buffers(self, config: OrcaConfig) -> None:
        for name, value in OrcaModel.derived_buffers(config).items():
            self.register_buffer(name, value, persistent=False)

    def nde_modules(self) -> list[nn.Module]:
        return []

    def nde_parameters(self) -> list[nn.Parameter]:
        return []

    def _check_inputs(self, input_ids, click_labels, dwell_labels):
        OrcaModel._check_inputs(self, input_ids, click_labels, dwell_labels)

    def _output(self, click_probs: torch.Tensor, dt_logits: torch.Tensor) -> OrcaOutput:
        bins = dt_logits.argmax(-1)
        return OrcaOutput(
            click_probs=click_probs,
            dt_logits=dt_logits,
            dt_logits_raw=dt_logits,
            dt_bins=bins,
            dt_seconds=self.bin_seconds[bins],
        )


class OrcaFMLayer(nn.Module):
    """A factorization machine with one output per class: `y_k = b_k + Σ_i w_{x_i,k} + Σ_{i<j} <v^k_{x_i}, v^k_{x_j}>`,
    the pairwise sum computed in O(F·D) as `½ Σ_d [(Σ_i v_id)² − Σ_i v_id²]`. Ids are mapped as in
    [`OrcaFieldEmbedding`] (one table with per-field offsets; out-of-vocabulary ids contribute nothing)."""

    def __init__(self, config: OrcaConfig, num_outputs: int):
        super().__init__()
        sizes = [v + 2 for v in config.field_vocab_sizes]
        self.num_outputs, self.dim = num_outputs, config.embed_dim
        self.register_buffer("offsets", OrcaFieldEmbedding.field_offsets(config), persistent=False)
        self.register_buffer("vocab", torch.tensor(config.field_vocab_sizes, dtype=torch.long), persistent=False)
        self.factors = nn.Embedding(sum(sizes), num_outputs * config.embed_dim)
        self.linear = nn.Embedding(sum(sizes), num_outputs)
        self.bias = nn.Parameter(torch.zeros(num_outputs))

    def lookup(self, input_ids: torch.LongTensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Factors `(batch, fields, outputs, dim)` and first-order weights `(batch, fields, outputs)`."""
        oov = input_ids > self.vocab
        idx = torch.where(oov, self.vocab + 1, input_ids) + self.offsets
        keep = (~oov).unsqueeze(-1).to(self.factors.weight.dtype)
        v = (self.factors(idx) * keep).view(*input_ids.shape, self.num_outputs, self.dim)
        return v, self.linear(idx) * keep

    def forward(self, input_ids: torch.LongTensor) -> torch.Tensor:
        v, w = self.lookup(input_ids)
        pairwise = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(-1)  # [B, K]
        return self.bias + w.sum(1) + pairwise


class OrcaFMModel(_BaselineMixin, OrcaPreTrainedModel):
    r"""Single-task factorization machine for the dwell-time bin (no click head; `click_probs` is a constant 0.5).
    The loss is the cross-entropy of the bin on the clicked rows (unclicked rows carry no DT label).

    Args:
        config ([`OrcaConfig`]): fields, vocabularies, `embed_dim` (the factor size) and the bins.
    """

    def __init__(self, config: OrcaConfig):
        super().__init__(config)
        self.fm = OrcaFMLayer(config, config.num_bins)
        self._register_buffers(config)
        self.post_init()

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, OrcaFMLayer):
            # Small factors (the pairwise term starts near 0, as libFM initialises them), zero first-order terms.
            init.normal_(module.factors.weight, 0.0, 0.01)
            init.zeros_(module.linear.weight)
            init.zeros_(module.bias)
            init.copy_(module.offsets, OrcaFieldEmbedding.field_offsets(self.config))
            init.copy_(module.vocab, torch.tensor(self.config.field_vocab_sizes, dtype=torch.long))
        elif isinstance(module, OrcaFMModel):
            for name, value in OrcaModel.derived_buffers(self.config).items():
                init.copy_(getattr(module, name), value)

    def forward(self, input_ids, click_labels=None, dwell_labels=None, return_dict=None, **kwargs) -> OrcaOutput:
        self._check_inputs(input_ids, click_labels, dwell_labels)
        logits = self.fm(input_ids)
        out = self._output(torch.full_like(logits[:, 0], 0.5), logits)
        if dwell_labels is not None:
            clicked = dwell_labels != IGNORE_INDEX
            if click_labels is not None:
                clicked = clicked & (click_labels > 0.5)
            out.dt_loss = (
                F.cross_entropy(logits[clicked], dwell_labels[clicked]) if clicked.any() else logits.sum() * 0.0
            )
            out.loss = self.config.alpha * out.dt_loss
        return out


class OrcaESMMModel(_BaselineMixin, OrcaPreTrainedModel):
    r"""ESMM-style CTR + dwell-time model: a shared field embedding, a click tower and a dwell tower (each
    `OrcaMLP(expert_dims)` plus the shallow terms and a head, as in [`OrcaModel`]), the dwell prediction
    `p(bin | click)` and the entire-space product `p(click, bin) = p(click) · p(bin | click)`.

    Loss (all impressions): `ctr_loss_weight · BCE(p(click), click) + α · Σ_k BCE(p(click) · p(k | click),
    1[click ∧ bin = k])`, each term averaged over the impressions.

    Args:
        config ([`OrcaConfig`]): the same configuration as [`OrcaModel`] (`use_orca` is ignored).
    """

    def __init__(self, config: OrcaConfig):
        super().__init__(config)
        in_dim = config.num_fields * config.embed_dim
        hidden = config.expert_dims[-1]
        self.embeddings = OrcaFieldEmbedding(config)
        self.ctr_tower = OrcaMLP(in_dim, config.expert_dims, config.dropout)
        self.dt_tower = OrcaMLP(in_dim, config.expert_dims, config.dropout)
        self.ctr_head = OrcaHead(2 + hidden, 8, 1)
        self.dt_head = OrcaHead(2 + hidden, config.num_bins, config.num_bins)
        self._register_buffers(config)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, OrcaESMMModel):
            for name, value in OrcaModel.derived_buffers(self.config).items():
                init.copy_(getattr(module, name), value)
        else:
            super()._init_weights(module)

    def logits(self, input_ids: torch.LongTensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The click logit `(batch,)` and the conditional dwell logits `(batch, num_bins)`."""
        e, s = self.embeddings(input_ids)
        x = e.flatten(1)
        click_logit = self.ctr_head(torch.cat([s, self.ctr_tower(x)], dim=1)).squeeze(-1)
        dt_logits = self.dt_head(torch.cat([s, self.dt_tower(x)], dim=1))
        return click_logit, dt_logits

    @staticmethod
    def entire_space_log_probs(click_logit: torch.Tensor, dt_logits: torch.Tensor) -> torch.Tensor:
        """`log p(click, bin = k) = log p(click) + log p(k | click)`, shape `(batch, num_bins)`."""
        return F.logsigmoid(click_logit).unsqueeze(-1) + dt_logits.log_softmax(-1)

    def forward(self, input_ids, click_labels=None, dwell_labels=None, return_dict=None, **kwargs) -> OrcaOutput:
        self._check_inputs(input_ids, click_labels, dwell_labels)
        click_logit, dt_logits = self.logits(input_ids)
        out = self._output(torch.sigmoid(click_logit), dt_logits)
        if click_labels is None:
            return out
        cfg = self.config
        y_click = click_labels.to(click_logit.dtype)
        out.ctr_loss = F.binary_cross_entropy_with_logits(click_logit, y_click)
        out.loss = cfg.ctr_loss_weight * out.ctr_loss
        if dwell_labels is not None:
            joint = self.entire_space_log_probs(click_logit, dt_logits)  # log p(click, k), every impression
            clicked = (y_click > 0.5) & (dwell_labels != IGNORE_INDEX)
            target = torch.zeros_like(joint)
            target[clicked, dwell_labels[clicked]] = 1.0
            # BCE(p, t) with p = exp(joint): −t·log p − (1 − t)·log(1 − p), log(1 − p) = log(−expm1(log p)).
            log_not = torch.log(-torch.expm1(joint.clamp(max=-1e-7)))
            out.dt_loss = -(target * joint + (1 - target) * log_not).sum(-1).mean()
            out.loss = out.loss + cfg.alpha * out.dt_loss
        return out


__all__ = ["OrcaESMMModel", "OrcaFMLayer", "OrcaFMModel"]
