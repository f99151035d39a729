"""ORCA: multi-task CTR + dwell-time prediction with causal decoupling
([ORCA, CIKM'25](https://arxiv.org/abs/2508.16573)).

Self-contained on purpose: this file and `configuration_orca.py` are copied next to the weights on save, so a Hub
user loads the model with `trust_remote_code=True` without hf_ext installed. Only relative imports, torch and
transformers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from .configuration_orca import OrcaConfig

IGNORE_INDEX = -100


@dataclass
class OrcaOutput(ModelOutput):
    """Output of [`OrcaModel`].

    Args:
        loss (`torch.FloatTensor`, *optional*): `ctr_loss_weight·L1 + α·L2 + β·L3` when labels are given.
        click_probs (`torch.FloatTensor` of shape `(batch,)`): predicted click probability.
        dt_logits (`torch.FloatTensor` of shape `(batch, num_bins)`): the dwell-time logits used for prediction:
            debiased `stopgrad(z_T) − z_NDE` with ORCA, the raw head's logits without it.
        dt_logits_raw (`torch.FloatTensor` of shape `(batch, num_bins)`): the raw DT head `z_T` (total effect).
        nde_logits (`torch.FloatTensor` of shape `(batch, num_bins)`, *optional*): the NDE head `z_NDE` (ORCA only).
        dt_bins (`torch.LongTensor` of shape `(batch,)`): argmax bin of `dt_logits`.
        dt_seconds (`torch.FloatTensor` of shape `(batch,)`): the predicted bin mapped to its seconds.
        ctr_loss, dt_loss, nde_loss (`torch.FloatTensor`, *optional*): the loss terms L1 (BCE on all samples),
            L2 (CE of `z_T` on clicked samples) and L3 (instance-weighted CE of the debiased logits on clicked
            samples; it trains only the NDE branch because `z_T` is detached there).
    """

    loss: torch.FloatTensor | None = None
    click_probs: torch.FloatTensor | None = None
    dt_logits: torch.FloatTensor | None = None
    dt_logits_raw: torch.FloatTensor | None = None
    nde_logits: torch.FloatTensor | None = None
    dt_bins: torch.LongTensor | None = None
    dt_seconds: torch.FloatTensor | None = None
    ctr_loss: torch.FloatTensor | None = None
    dt_loss: torch.FloatTensor | None = None
    nde_loss: torch.FloatTensor | None = None


class OrcaMLP(nn.Sequential):
    """Linear → BatchNorm1d → ReLU → Dropout per layer, no output layer (the MTReclib/ORCA tower block)."""

    def __init__(self, in_dim: int, dims: list[int], dropout: float):
        layers = []
        for dim in dims:
            layers += [nn.Linear(in_dim, dim), nn.BatchNorm1d(dim), nn.ReLU(), nn.Dropout(dropout)]
            in_dim = dim
        super().__init__(*layers)


class OrcaFieldEmbedding(nn.Module):
    """Field embeddings plus the shallow terms `s = [lin(x), fm(e)]`.

    All fields share one table with per-field offsets; each field owns `vocab_size + 2` rows: its ids, the
    "blocked" id `vocab_size` that the counterfactual intervention puts in post-click fields, and the
    out-of-vocabulary bucket `vocab_size + 1` that every larger (unseen) id maps to. The OOV bucket's embedding and
    first-order weight are held at zero (no information): no training row is out of vocabulary, so a trainable row
    would stay at its random initialisation.
    """

    def __init__(self, config: OrcaConfig):
        super().__init__()
        sizes = [v + 2 for v in config.field_vocab_sizes]
        self.register_buffer("offsets", self.field_offsets(config), persistent=False)
        self.register_buffer("vocab", torch.tensor(config.field_vocab_sizes, dtype=torch.long), persistent=False)
        self.embedding = nn.Embedding(sum(sizes), config.embed_dim)
        self.linear = nn.Embedding(sum(sizes), 1)
        self.linear_bias = nn.Parameter(torch.zeros(1))

    @staticmethod
    def field_offsets(config: OrcaConfig) -> torch.Tensor:
        sizes = [v + 2 for v in config.field_vocab_sizes]
        return torch.tensor([0] + sizes[:-1]).cumsum(0)

    def forward(self, input_ids: torch.LongTensor) -> tuple[torch.Tensor, torch.Tensor]:
        oov = input_ids > self.vocab  # == vocab is the blocked id
        idx = torch.where(oov, self.vocab + 1, input_ids) + self.offsets
        keep = (~oov).unsqueeze(-1).to(self.embedding.weight.dtype)
        e = self.embedding(idx) * keep  # [B, F, D]
        lin = (self.linear(idx) * keep).sum(dim=(1, 2)) + self.linear_bias
        fm = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1)
        return e, torch.stack([lin, fm], dim=1)


class OrcaExpertLinear(nn.Module):
    """One linear layer of `num_experts` experts at once: weight `(experts, in, out)`, bias `(experts, out)`."""

    def __init__(self, num_experts: int, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(num_experts, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:  # one input shared by every expert
            return torch.einsum("bi,eio->beo", x, self.weight) + self.bias
        return torch.einsum("bei,eio->beo", x, self.weight) + self.bias


class OrcaExpertGroup(nn.Module):
    """`num_experts` expert MLPs (Linear → BatchNorm1d → ReLU → Dropout per layer) that share one input, run as
    batched matrix products instead of a Python loop over experts. Mathematically the same as separate MLPs; the
    per-expert BatchNorm is one BatchNorm1d over the `experts × width` channels."""

    def __init__(self, num_experts: int, in_dim: int, dims: list[int], dropout: float):
        super().__init__()
        self.linears = nn.ModuleList()
        self.norms = nn.ModuleList()
        for dim in dims:
            self.linears.append(OrcaExpertLinear(num_experts, in_dim, dim))
            self.norms.append(nn.BatchNorm1d(num_experts * dim))
            in_dim = dim
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`x` of shape `(batch, in_dim)` -> expert outputs of shape `(batch, num_experts, dims[-1])`."""
        h = x
        for linear, norm in zip(self.linears, self.norms):
            h = linear(h)
            batch, experts, width = h.shape
            h = self.dropout(F.relu(norm(h.reshape(batch, experts * width)))).view(batch, experts, width)
        return h


class OrcaMMoE(nn.Module):
    """MMoE: shared experts, one softmax gate per task computed on the flattened embedding."""

    def __init__(self, config: OrcaConfig, in_dim: int, num_tasks: int = 2):
        super().__init__()
        self.experts = OrcaExpertGroup(config.num_experts, in_dim, config.expert_dims, config.dropout)
        self.gates = nn.ModuleList(nn.Linear(in_dim, config.num_experts) for _ in range(num_tasks))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        experts = self.experts(x)  # [B, E, D]
        return [(gate(x).softmax(-1).unsqueeze(-1) * experts).sum(1) for gate in self.gates]


class OrcaCGCLevel(nn.Module):
    """One Customized Gate Control level of PLE: shared and task-specific experts, per-task gates over
    (own experts + shared experts), and a shared gate over all experts except at the last level."""

    def __init__(self, config: OrcaConfig, in_dim: int, dims: list[int], last: bool, num_tasks: int = 2):
        super().__init__()
        n_s, n_t = config.num_experts, config.num_task_experts
        self.shared = OrcaExpertGroup(n_s, in_dim, dims, config.dropout)
        self.task = nn.ModuleList(OrcaExpertGroup(n_t, in_dim, dims, config.dropout) for _ in range(num_tasks))
        self.task_gates = nn.ModuleList(nn.Linear(in_dim, n_s + n_t) for _ in range(num_tasks))
        self.shared_gate = None if last else nn.Linear(in_dim, n_s + num_tasks * n_t)

    def forward(self, task_inputs: list[torch.Tensor], shared_input: torch.Tensor) -> tuple[list, torch.Tensor]:
        shared = self.shared(shared_input)
        own = [experts(x) for experts, x in zip(self.task, task_inputs)]
        task_out = [
            (gate(x).softmax(-1).unsqueeze(-1) * torch.cat([mine, shared], dim=1)).sum(1)
            for gate, x, mine in zip(self.task_gates, task_inputs, own)
        ]
        if self.shared_gate is None:
            return task_out, shared_input
        stack = torch.cat(own + [shared], dim=1)
        return task_out, (self.shared_gate(shared_input).softmax(-1).unsqueeze(-1) * stack).sum(1)


class OrcaPLE(nn.Module):
    """PLE with `len(config.ple_level_dims)` CGC levels (two by default).

    The official PLE file was never released; when PLE also returns the shared branch, `task_fea[-1]` would be the
    shared feature. We return exactly the two task features, so the NDE branch sees h_T as with MMoE.
    """

    def __init__(self, config: OrcaConfig, in_dim: int, num_tasks: int = 2):
        super().__init__()
        levels, dim = [], in_dim
        for i, dims in enumerate(config.ple_level_dims):
            levels.append(OrcaCGCLevel(config, dim, dims, last=i == len(config.ple_level_dims) - 1))
            dim = dims[-1]
        self.levels = nn.ModuleList(levels)
        self.num_tasks = num_tasks

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        task_inputs, shared = [x] * self.num_tasks, x
        for level in self.levels:
            task_inputs, shared = level(task_inputs, shared)
        return task_inputs


class OrcaTaskInteraction(nn.Module):
    """One AutoInt self-attention layer over the two task "fields" `[h_C, h_T]` (inputs are detached by the
    caller), residual projection, ReLU, flatten and a projection back to the task feature size."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.proj_in = nn.Linear(dim, dim)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.residual = nn.Linear(dim, dim)
        self.proj_out = nn.Linear(2 * dim, dim)

    def forward(self, h_c: torch.Tensor, h_t: torch.Tensor) -> torch.Tensor:
        x = torch.stack([h_c, h_t], dim=1)
        q = self.proj_in(x)
        attended, _ = self.attention(q, q, q, need_weights=False)
        return self.proj_out(F.relu(attended + self.residual(x)).flatten(1))


class OrcaHead(nn.Module):
    """`L2(ReLU(L1([s, tower])))`: the CTR, DT and NDE heads share this shape."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc2 = nn.Linear(hidden, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


class OrcaPreTrainedModel(PreTrainedModel):
    config_class = OrcaConfig
    base_model_prefix = "orca"
    main_input_name = "input_ids"

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            init.xavier_uniform_(module.weight)
            if isinstance(module, nn.Linear) and module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm1d):
            init.ones_(module.weight)
            init.zeros_(module.bias)
            if getattr(module, "running_mean", None) is not None:
                init.zeros_(module.running_mean)
                init.ones_(module.running_var)
        elif isinstance(module, OrcaExpertLinear):
            # Xavier-uniform per expert (fan_in = in, fan_out = out). The parameters live directly on this module:
            # transformers skips _init_weights for custom-code modules without direct parameters.
            bound = (6.0 / (module.weight.shape[1] + module.weight.shape[2])) ** 0.5
            init.uniform_(module.weight, -bound, bound)
            init.zeros_(module.bias)
        elif isinstance(module, nn.MultiheadAttention):
            init.xavier_uniform_(module.in_proj_weight)
            init.zeros_(module.in_proj_bias)
        elif isinstance(module, OrcaFieldEmbedding):
            init.zeros_(module.linear_bias)
            # Non-persistent buffers are not in the checkpoint: from_pretrained rebuilds them here.
            init.copy_(module.offsets, OrcaFieldEmbedding.field_offsets(self.config))
            init.copy_(module.vocab, torch.tensor(self.config.field_vocab_sizes, dtype=torch.long))
        elif isinstance(module, OrcaModel):
            for name, value in module.derived_buffers(self.config).items():
                init.copy_(getattr(module, name), value)


class OrcaModel(OrcaPreTrainedModel):
    r"""ORCA on an MMoE or PLE backbone, or the plain multi-task baseline when `config.use_orca=False`.

    The dwell-time prediction is the difference of logits `stopgrad(z_T) − z_NDE`: the NDE branch models the
    negative CTR→DT transfer (the "clickbait" shortcut) and is subtracted from the raw head's total effect.

    Args:
        config ([`OrcaConfig`]): model configuration.

    Example:

    ```python
    >>> import hf_ext  # registers hf_ext_orca with the Auto classes
    >>> from transformers import AutoModel
    >>> model = AutoModel.from_pretrained("path/to/orca-mmoe")
    >>> out = model(input_ids=batch["input_ids"])  # [batch, num_fields] categorical ids
    >>> out.click_probs, out.dt_seconds
    ```
    """

    def __init__(self, config: OrcaConfig):
        super().__init__(config)
        in_dim = config.num_fields * config.embed_dim
        feat = config.task_feature_dim
        tower_out = config.tower_dims[-1]
        self.embeddings = OrcaFieldEmbedding(config)
        self.backbone = OrcaMMoE(config, in_dim) if config.backbone == "mmoe" else OrcaPLE(config, in_dim)
        self.ctr_tower = OrcaMLP(feat, config.tower_dims, config.dropout)
        self.dt_tower = OrcaMLP(feat, config.tower_dims, config.dropout)
        self.ctr_head = OrcaHead(2 + tower_out, 8, 1)
        self.dt_head = OrcaHead(2 + tower_out, config.num_bins, config.num_bins)
        if config.use_orca:
            # Built without advancing the global RNG, and registered after the shared modules, so that with one
            # seed an ORCA model and its baseline start from the same weights in every shared module (paired runs).
            with torch.random.fork_rng(devices=[]):
                self.interaction = OrcaTaskInteraction(feat, config.attention_heads) if config.use_inter else None
                nde_in = 2 * feat if config.use_inter else feat
                self.nde_tower = OrcaMLP(nde_in, config.tower_dims, config.dropout)
                self.nde_head = OrcaHead(2 + tower_out, config.num_bins, config.num_bins)
        for name, value in self.derived_buffers(config).items():
            self.register_buffer(name, value, persistent=False)
        self.post_init()

    @staticmethod
    def derived_buffers(config: OrcaConfig) -> dict[str, torch.Tensor]:
        """Lookup tensors derived from the config (kept out of the checkpoint)."""
        post_click = [config.field_names.index(f) for f in config.post_click_fields]
        return {
            "post_click_columns": torch.tensor(post_click, dtype=torch.long),
            "vocab_sizes": torch.tensor(config.field_vocab_sizes, dtype=torch.long),
            "bin_seconds": torch.tensor(config.bin_seconds, dtype=torch.float32),
        }

    def nde_modules(self) -> list[nn.Module]:
        """The NDE tower and head: what the counterfactual (masked) step updates."""
        return [self.nde_tower, self.nde_head] if self.config.use_orca else []

    def nde_parameters(self) -> list[nn.Parameter]:
        return [p for module in self.nde_modules() for p in module.parameters()]

    def mask_post_click(self, input_ids: torch.LongTensor) -> torch.LongTensor:
        """Replaces the post-click (content) fields with each field's "blocked" id."""
        masked = input_ids.clone()
        cols = self.post_click_columns
        if cols.numel():
            masked[:, cols] = self.vocab_sizes[cols].to(masked.dtype)
        return masked

    def _check_inputs(self, input_ids, click_labels, dwell_labels):
        """Clear `ValueError`s for bad batches (the contract of the model's entry points). Ids above a field's
        vocabulary are not an error: they go to its OOV bucket."""
        cfg = self.config
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"input_ids must be an integer tensor of field ids, got {getattr(input_ids, 'dtype', type(input_ids))}"
            )
        if input_ids.dim() != 2 or input_ids.shape[1] != cfg.num_fields:
            raise ValueError(
                f"input_ids must have shape (batch, {cfg.num_fields}) for fields {cfg.field_names}, "
                f"got {tuple(input_ids.shape)}"
            )
        if input_ids.shape[0] == 0:
            raise ValueError("input_ids: empty batch (0 rows); pass at least one row of field ids")
        if self.training and input_ids.shape[0] < 2:
            raise ValueError("input_ids: a training batch needs at least 2 rows (BatchNorm); got 1")
        low = input_ids.min(0).values
        if (low < 0).any():
            j = int((low < 0).nonzero()[0])
            raise ValueError(
                f"input_ids: field {cfg.field_names[j]!r} has negative id {int(low[j])}; ids must be >= 0 "
                f"(ids in [0, {cfg.field_vocab_sizes[j]}) are known, larger ones go to the OOV bucket)"
            )
        n = input_ids.shape[0]
        if click_labels is not None:
            if not isinstance(click_labels, torch.Tensor) or click_labels.shape != (n,):
                raise ValueError(
                    f"click_labels must be a tensor of shape ({n},), got {tuple(getattr(click_labels, 'shape', ()))}"
                )
            bad = ~((click_labels == 0) | (click_labels == 1))  # NaN fails both
            if bad.any():
                raise ValueError(f"click_labels must hold only 0 and 1, found {click_labels[bad][0].item()!r}")
        if dwell_labels is not None:
            if not isinstance(dwell_labels, torch.Tensor) or dwell_labels.shape != (n,):
                raise ValueError(
                    f"dwell_labels must be a tensor of shape ({n},), got {tuple(getattr(dwell_labels, 'shape', ()))}"
                )
            if dwell_labels.dtype.is_floating_point or dwell_labels.dtype == torch.bool:
                raise ValueError(
                    f"dwell_labels must be integer bins in [0, {cfg.num_bins}) or {IGNORE_INDEX}, "
                    f"got dtype {dwell_labels.dtype}"
                )
            valid = dwell_labels[dwell_labels != IGNORE_INDEX]
            if valid.numel() and (valid.min() < 0 or valid.max() >= cfg.num_bins):
                raise ValueError(
                    f"dwell_labels must be bins in [0, {cfg.num_bins}) or {IGNORE_INDEX}, "
                    f"got values in [{int(valid.min())}, {int(valid.max())}]"
                )

    def _shared_forward(self, input_ids: torch.LongTensor):
        """Embeddings, shallow terms, backbone, CTR logit and raw DT logits."""
        e, s = self.embeddings(input_ids)
        h_c, h_t = self.backbone(e.flatten(1))
        click_logit = self.ctr_head(torch.cat([s, self.ctr_tower(h_c)], dim=1)).squeeze(-1)
        z_t = self.dt_head(torch.cat([s, self.dt_tower(h_t)], dim=1))
        return s, h_c, h_t, click_logit, z_t

    def _nde_input(self, h_c: torch.Tensor, h_t: torch.Tensor) -> torch.Tensor:
        """`[a, h_T]` with `a` the task interaction over the detached task features (or `h_T` alone)."""
        h_t_nde = h_t.detach() if self.config.detach_nde_input else h_t
        if self.interaction is None:
            return h_t_nde
        return torch.cat([self.interaction(h_c.detach(), h_t.detach()), h_t_nde], dim=1)

    def _nde_logits(self, s: torch.Tensor, nde_input: torch.Tensor) -> torch.Tensor:
        return self.nde_head(torch.cat([s.detach(), self.nde_tower(nde_input)], dim=1))

    def counterfactual_nde_loss(
        self, input_ids: torch.LongTensor, click_labels: torch.Tensor, dwell_labels: torch.LongTensor
    ) -> torch.Tensor:
        """`β·L3` on a (masked) batch, with everything outside the NDE tower and head evaluated without autograd.

        Its gradient with respect to the NDE tower and head equals that of the full loss `L` (L1 and L2 do not
        depend on them), so the counterfactual step uses it and skips the rest of the backward graph.
        """
        if not self.config.use_orca:
            raise ValueError("counterfactual_nde_loss needs config.use_orca=True")
        self._check_inputs(input_ids, click_labels, dwell_labels)
        with torch.no_grad():
            s, h_c, h_t, click_logit, z_t = self._shared_forward(input_ids)
            nde_input = self._nde_input(h_c, h_t)
        z_nde = self._nde_logits(s, nde_input)
        clicked = (click_labels > 0.5) & (dwell_labels != IGNORE_INDEX)
        if not clicked.any():
            return z_nde.sum() * 0.0
        y = dwell_labels[clicked]
        ce_t = F.cross_entropy(z_t[clicked], y, reduction="none")
        nde_loss = self._nde_loss((z_t - z_nde)[clicked], y, torch.sigmoid(click_logit)[clicked], ce_t)
        return self.config.beta * nde_loss

    def _nde_loss(self, debiased: torch.Tensor, y: torch.Tensor, click_probs: torch.Tensor, ce_t: torch.Tensor):
        """L3 on clicked samples: the (instance-weighted) cross-entropy of the *debiased* logits
        `stopgrad(z_T) − z_NDE`, so that z_NDE learns the part of z_T to remove. This is what the released code
        trains (its loss reads the model's last output, the debiased one); the spec's summary "CE(z_NDE, y)" would
        make ORCA divide p_T by a second DT predictor."""
        ce = F.cross_entropy(debiased, y, reduction="none")
        if self.config.use_inst:
            ce = ce * self._instance_weights(click_probs, ce_t)
        return ce.mean()

    def forward(
        self,
        input_ids: torch.LongTensor,
        click_labels: torch.Tensor | None = None,
        dwell_labels: torch.LongTensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> OrcaOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, num_fields)`): categorical ids per field.
            click_labels (`torch.Tensor` of shape `(batch,)`, *optional*): 0/1 clicks.
            dwell_labels (`torch.LongTensor` of shape `(batch,)`, *optional*): dwell-time bin of clicked samples,
                `-100` for the others. The DT losses use clicked samples only.
        """
        self._check_inputs(input_ids, click_labels, dwell_labels)
        s, h_c, h_t, click_logit, z_t = self._shared_forward(input_ids)
        z_nde = None
        if self.config.use_orca:
            z_nde = self._nde_logits(s, self._nde_input(h_c, h_t))
            dt_logits = z_t.detach() - z_nde
        else:
            dt_logits = z_t
        click_probs = torch.sigmoid(click_logit)
        dt_bins = dt_logits.argmax(-1)
        out = OrcaOutput(
            click_probs=click_probs,
            dt_logits=dt_logits,
            dt_logits_raw=z_t,
            nde_logits=z_nde,
            dt_bins=dt_bins,
            dt_seconds=self.bin_seconds[dt_bins],
        )
        if click_labels is not None:
            self._add_loss(out, click_logit, click_labels, dwell_labels)
        return out

    def _add_loss(self, out: OrcaOutput, click_logit, click_labels, dwell_labels) -> None:
        cfg = self.config
        click_labels = click_labels.to(click_logit.dtype)
        ctr_loss = F.binary_cross_entropy_with_logits(click_logit, click_labels)
        if dwell_labels is None:
            out.loss, out.ctr_loss = cfg.ctr_loss_weight * ctr_loss, ctr_loss
            return
        clicked = (click_labels > 0.5) & (dwell_labels != IGNORE_INDEX)
        y = dwell_labels[clicked]
        has_nde = out.nde_logits is not None
        if y.numel() == 0:
            # No clicked sample in the batch: the DT terms are zero but stay in the graph (DDP needs every param).
            dt_loss = out.dt_logits_raw.sum() * 0.0
            nde_loss = out.nde_logits.sum() * 0.0 if has_nde else None
        else:
            ce_t = F.cross_entropy(out.dt_logits_raw[clicked], y, reduction="none")
            dt_loss = ce_t.mean()
            nde_loss = None
            if has_nde:
                nde_loss = self._nde_loss(out.dt_logits[clicked], y, out.click_probs[clicked], ce_t)
        loss = cfg.ctr_loss_weight * ctr_loss + cfg.alpha * dt_loss
        if nde_loss is not None:
            loss = loss + cfg.beta * nde_loss
        out.loss, out.ctr_loss, out.dt_loss, out.nde_loss = loss, ctr_loss, dt_loss, nde_loss

    @torch.no_grad()
    def _instance_weights(self, click_probs: torch.Tensor, ce_t: torch.Tensor) -> torch.Tensor:
        """Instance inverse-weighting `ω = ReLU(BCE(p,1)^ctr_weight · CE_T^dt_weight + offset)`, renormalised to
        sum to the number of clicked samples (or all ones when the weights vanish). Everything detached."""
        cfg = self.config
        bce = -torch.log(click_probs.clamp_min(1e-7))
        w1 = bce.clamp_min(1e-7).pow(cfg.ctr_weight)
        w2 = ce_t.clamp_min(1e-7).pow(cfg.dt_weight)
        omega = F.relu(w1 * w2 + cfg.inst_offset)
        total = omega.sum()
        if total > 0.01:
            return omega * omega.numel() / total
        return torch.ones_like(omega)


__all__ = ["OrcaModel", "OrcaPreTrainedModel", "OrcaOutput"]
