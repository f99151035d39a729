"""The H2Tune LoRA layer: a PEFT [`~peft.tuners.lora.layer.LoraVariant`] for ΔW = (α/r)·B(T+I)A.

Per adapter and target module the layer holds
- `lora_A` (r×d_in) and `lora_B` (d_out×r): PEFT's usual LoRA factors, local to the client;
- `lora_T` (r×r, trainable): the block of the shared middle matrix the client trains this round;
- `lora_S` (R×R, trainable): the score matrix; T = reshape(vec(M̃)[top-k(vec S)], r, r) with k = r²; the kept
  scores get the straight-through gradient ∂L/∂T ⊙ T (movement-pruning style), the rest only the norm penalty;
- `lora_lT` (R×R buffer): M̃, the client's full copy of the shared middle matrix;
- `lora_idx` (r² buffer): the flat positions of M̃ that T currently holds.

T is a trainable *view* of the selected entries: after every optimiser step [`sync_middle`] scatters T back into
M̃ and re-selects with the updated S. (Deliberate deviation from the released code, which scattered before
`optimizer.step()` and re-read T from M̃ on the next forward, so the T updates were lost.)
"""

from __future__ import annotations

import math

import torch
from peft.tuners._buffer_dict import BufferDict
from peft.tuners.lora.layer import Linear as LoraLinear
from peft.tuners.lora.layer import LoraVariant
from peft.utils.other import transpose
from torch import nn

H2TUNE_PARAMS = ("lora_T", "lora_S")
H2TUNE_BUFFERS = ("lora_lT", "lora_idx")


def select_indices(scores: torch.Tensor, rank: int, sparsify: bool = True) -> torch.Tensor:
    """Flat positions in the R×R shared matrix that T holds.

    With `sparsify=True`: the `rank²` largest entries of `scores`, in ascending order (so T keeps M̃'s row-major
    layout; ties break deterministically). With `sparsify=False` (the "no sparsification" ablation): no learned
    selection, T is the fixed leading `rank×rank` block of M̃ — all R² entries (k = R², the spec's case) when
    `rank == R`, the natural extension for smaller ranks."""
    side = scores.shape[-1]
    if not sparsify:
        rows = torch.arange(rank, device=scores.device)
        return (rows[:, None] * side + rows[None, :]).reshape(-1)
    flat = scores.detach().reshape(-1)
    return torch.topk(flat, rank * rank, sorted=False).indices.sort().values


class H2TuneVariant(LoraVariant):
    """The H2Tune triple-matrix variant of a PEFT LoRA `Linear` (see the module docstring)."""

    def supports_lora_conversion(self) -> bool:
        return False

    @staticmethod
    def init(module: LoraLinear, adapter_name: str, config=None, **kwargs) -> None:
        if not hasattr(module, "lora_T"):
            # children of a tuner layer (except base_layer) are saved in the adapter state dict automatically;
            # adapter_layer_names decides what is trainable
            module.lora_T = nn.ParameterDict({})
            module.lora_S = nn.ParameterDict({})
            module.lora_lT = BufferDict({}, persistent=True)
            module.lora_idx = BufferDict({}, persistent=True)
            module.adapter_layer_names = tuple(module.adapter_layer_names) + H2TUNE_PARAMS
            module.other_param_names = tuple(module.other_param_names) + H2TUNE_BUFFERS
        r = module.r[adapter_name]
        big_r = getattr(config, "global_rank", r)
        if r > big_r:
            raise ValueError(f"LoRA rank {r} exceeds global_rank {big_r}")
        weight = module.lora_A[adapter_name].weight
        factory = {"device": weight.device, "dtype": weight.dtype}
        middle = torch.empty(big_r, big_r, **factory)
        scores = torch.empty(big_r, big_r, **factory)
        nn.init.kaiming_uniform_(middle, a=math.sqrt(5))  # the paper's kaiming init of the shared matrix
        nn.init.kaiming_uniform_(scores, a=math.sqrt(5))
        sparsify = getattr(config, "sparsify", True)
        idx = select_indices(scores, r, sparsify)
        if not hasattr(module, "h2tune_learned_selection"):
            module.h2tune_learned_selection = {}
        module.h2tune_learned_selection[adapter_name] = sparsify
        module.lora_lT[adapter_name] = middle
        module.lora_S[adapter_name] = nn.Parameter(scores)
        module.lora_idx[adapter_name] = idx
        module.lora_T[adapter_name] = nn.Parameter(middle.reshape(-1)[idx].reshape(r, r).clone())

    @staticmethod
    def delta_weight(module: LoraLinear, adapter: str) -> torch.Tensor:
        """(α/r)·B(T+I)A in the base layer's weight layout (transposed for GPT-2's `Conv1D`)."""
        a, b, t = module.lora_A[adapter].weight, module.lora_B[adapter].weight, module.lora_T[adapter]
        eye = torch.eye(t.shape[0], device=t.device, dtype=t.dtype)
        delta = (b @ (t + eye) @ a) * module.scaling[adapter]
        return transpose(delta, module.fan_in_fan_out)

    @staticmethod
    def merge_safe(module, active_adapter, orig_weight):
        return orig_weight + H2TuneVariant.delta_weight(module, active_adapter).to(orig_weight.dtype)

    @staticmethod
    def merge_unsafe(module, active_adapter, orig_weight):
        orig_weight.data += H2TuneVariant.delta_weight(module, active_adapter).to(orig_weight.dtype)

    @staticmethod
    def unmerge(module, active_adapter, orig_weight):
        return orig_weight - H2TuneVariant.delta_weight(module, active_adapter).to(orig_weight.dtype)

    @staticmethod
    def forward(module, active_adapter, x, result, **kwargs):
        # B·(T·A·drop(x) + A·drop(x)): the identity residual keeps the adapter well defined when T is sparse or 0
        if x.is_floating_point() and not math.isfinite(float(x.detach().sum())) and not bool(torch.isfinite(x).all()):
            # NaN/Inf hidden states (e.g. `inputs_embeds` holding NaN) would otherwise flow through every layer to
            # NaN logits without a word; refused at the first H2Tune layer that sees them. A NaN or Inf makes the sum
            # non-finite, so the finite sum (one reduction, several times cheaper) clears almost every input; only a
            # non-finite sum (or one that overflowed) is checked element by element
            raise ValueError(
                f"H2Tune layer input holds {int((~torch.isfinite(x)).sum())} NaN/Inf value(s) (adapter "
                f"{active_adapter!r}): check `inputs_embeds` / the base model's hidden states"
            )
        h = module.lora_A[active_adapter](module.lora_dropout[active_adapter](x))
        t = module.lora_T[active_adapter]
        scores = module.lora_S[active_adapter]
        if scores.requires_grad and torch.is_grad_enabled() and module.h2tune_learned_selection.get(active_adapter):
            # straight-through score gradient for the kept entries (as in movement pruning): a zero-valued term whose
            # gradient is ∂L/∂S_idx = ∂L/∂T ⊙ T, so the task loss raises the scores of useful entries and lowers
            # harmful ones until they leave the top-k (the released code took top-k on `.data`: S learned nothing)
            kept = scores.reshape(-1)[module.lora_idx[active_adapter]].reshape(t.shape)
            t = t + t.detach() * (kept - kept.detach())
        offset = getattr(module, "h2tune_t_offset", {}).get(active_adapter)
        if offset is not None:  # zero-valued; carries the gradient of T to the relation matrix (model.relation_path)
            t = t + offset
        h = h + h @ t.T
        return result + module.lora_B[active_adapter](h) * module.scaling[active_adapter]


class H2TuneLinear(LoraLinear):
    """A PEFT LoRA `Linear` that also wraps GPT-2's `Conv1D` and knows the H2Tune variant."""

    def __init__(self, base_layer, adapter_name, config=None, **kwargs):
        from transformers.pytorch_utils import Conv1D

        base = base_layer.get_base_layer() if hasattr(base_layer, "get_base_layer") else base_layer
        is_conv1d = isinstance(base, Conv1D)
        kwargs.pop("fan_in_fan_out", None)
        kwargs["is_target_conv_1d_layer"] = is_conv1d
        super().__init__(base_layer, adapter_name, config=config, **kwargs)
        # PEFT's Linear reads fan_in_fan_out from the config; per layer it depends on the base layer type (GPT-2's
        # Conv1D stores its weight transposed), as in PEFT's default dispatch
        self.fan_in_fan_out = is_conv1d

    @property
    def lora_variants(self):
        return {**super().lora_variants, ("use_h2tune",): H2TuneVariant}


@torch.no_grad()
def sync_layer(module: LoraLinear, adapter: str, sparsify: bool = True) -> None:
    """Scatters T back into M̃ (vec(M̃)[idx] ← vec(T)), re-selects idx with the current S, and reloads T in place
    (so the optimiser keeps the same parameter object)."""
    t, middle = module.lora_T[adapter], module.lora_lT[adapter]
    r = t.shape[0]
    flat = middle.reshape(-1)
    flat[module.lora_idx[adapter]] = t.detach().reshape(-1).to(flat.dtype)
    idx = select_indices(module.lora_S[adapter], r, sparsify)
    module.lora_idx[adapter] = idx
    t.data.copy_(flat[idx].reshape(r, r))


@torch.no_grad()
def load_middle(module: LoraLinear, adapter: str, middle: torch.Tensor) -> None:
    """Replaces M̃ (e.g. with the client's mixture of the downloaded global tensor) and reloads T from it."""
    ref = module.lora_lT[adapter]
    if tuple(middle.shape) != tuple(ref.shape):
        raise ValueError(f"middle matrix must be {tuple(ref.shape)} (R×R), got {tuple(middle.shape)}")
    if not bool(torch.isfinite(middle).all()):
        raise ValueError("middle matrix holds NaN/Inf values: refusing to load it into the H2Tune layer")
    module.lora_lT[adapter].copy_(middle)
    r = module.lora_T[adapter].shape[0]
    module.lora_T[adapter].data.copy_(module.lora_lT[adapter].reshape(-1)[module.lora_idx[adapter]].reshape(r, r))
