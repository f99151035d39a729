"""Model-level H2Tune helpers on a `PeftModel`: find the H2Tune layers, keep T and the shared matrix in sync, read and
write the client's middle matrices, and the Trainer pieces (callback and loss).

Use it like any PEFT adapter:

```python
from peft import get_peft_model, PeftModel
from hf_ext.h2tune import H2TuneConfig

model = get_peft_model(base, H2TuneConfig(r=4, global_rank=16))
...  # train with H2TuneTrainer (or any Trainer plus H2TuneCallback)
model.save_pretrained("adapter")
again = PeftModel.from_pretrained(base2, "adapter")  # an H2Tune adapter, not plain LoRA
```
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import torch
from transformers import Trainer, TrainerCallback

from .alignment import mix_layers
from .layer import H2TuneLinear, load_middle, sync_layer

# Canonical module slots m of the global tensor G (L_max × M × R × R). GPT-2's fused c_attn shares the q slot.
MODULE_SLOTS = ("q", "k", "v", "o", "gate", "up", "down")
_SLOT_OF = {
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "o_proj": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
    "attn.c_attn": "q",
    "attn.c_proj": "o",
    "mlp.c_fc": "up",
    "mlp.c_proj": "down",
}
_LAYER_RE = re.compile(r"\.(?:layers|h|blocks)\.(\d+)\.")


def module_slot(name: str) -> tuple[int, int]:
    """`(layer index, module slot)` of a target module name such as `...layers.3.self_attn.q_proj`."""
    match = _LAYER_RE.search(name)
    if match is None:
        raise ValueError(f"cannot find the decoder-layer index in module name {name!r}")
    for suffix, slot in _SLOT_OF.items():
        if name.endswith(suffix):
            return int(match.group(1)), MODULE_SLOTS.index(slot)
    raise ValueError(f"module {name!r} has no H2Tune slot; known: {sorted(_SLOT_OF)}")


def h2tune_modules(model, adapter: str = "default") -> Iterator[tuple[str, H2TuneLinear]]:
    """`(name, layer)` for every layer carrying the H2Tune variant of `adapter`."""
    for name, module in model.named_modules():
        if isinstance(module, H2TuneLinear) and adapter in getattr(module, "lora_T", {}):
            yield name, module


def _sparsify(model, adapter: str) -> bool:
    return getattr(model.peft_config[adapter], "sparsify", True)


def sync_middle(model, adapter: str = "default") -> None:
    """After an optimiser step: write T back into the shared matrix M̃ and re-select T with the updated S."""
    sparsify = _sparsify(model, adapter)
    for _, module in h2tune_modules(model, adapter):
        sync_layer(module, adapter, sparsify)


def num_layers(model, adapter: str = "default") -> int:
    return 1 + max(module_slot(name)[0] for name, _ in h2tune_modules(model, adapter))


@torch.no_grad()
def get_middle(model, adapter: str = "default") -> torch.Tensor:
    """The client's middle matrices as one tensor M̃_c of shape (L_c, M, R, R) (zeros for absent slots), after
    writing the current T back."""
    sync_middle(model, adapter)
    mods = list(h2tune_modules(model, adapter))
    big_r = mods[0][1].lora_lT[adapter].shape[0]
    out = torch.zeros(num_layers(model, adapter), len(MODULE_SLOTS), big_r, big_r)
    for name, module in mods:
        layer, slot = module_slot(name)
        out[layer, slot] += module.lora_lT[adapter].float().cpu()
    return out


@torch.no_grad()
def set_middle(model, middle: torch.Tensor, adapter: str = "default") -> None:
    """Loads M̃_c (L_c, M, R, R) into the layers' shared matrices and reloads T from it."""
    for name, module in h2tune_modules(model, adapter):
        layer, slot = module_slot(name)
        ref = module.lora_lT[adapter]
        load_middle(module, adapter, middle[layer, slot].to(ref.device, ref.dtype))


@contextlib.contextmanager
def relation_path(model, relation: torch.Tensor | None, global_tensor: torch.Tensor | None, adapter: str = "default"):
    """Makes the forward passes inside the block differentiable in the relation matrix P_c.

    The client's middle matrices are M̃_c = P_cᵀ·G + D_c: the mixture of this round's downloaded global tensor G plus
    the local change D_c that training writes through T. Since T holds the entries `idx` of M̃, ∂L/∂P_c[j, l] =
    Σ_m ⟨G[j, m][idx], ∂L/∂T_{l,m}⟩. Each layer gets a zero-valued offset `o − o.detach()` with
    o = Σ_j P_c[j, l]·G[j, m][idx], added to T in the forward: values are unchanged, and autograd sends exactly that
    gradient to P_c. [`H2TuneCallback`] then moves M̃ by ΔP_cᵀ·G after each optimiser step, so M̃ stays
    P_cᵀ·G + D_c. No-op when `relation` is `None` or frozen (the index-aligned ablation, the task-specific pass).
    """
    mods = list(h2tune_modules(model, adapter)) if relation is not None and relation.requires_grad else []
    try:
        for name, module in mods:
            layer, slot = module_slot(name)
            t = module.lora_T[adapter]
            r, big_r = t.shape[0], module.lora_lT[adapter].shape[0]
            g = global_tensor[:, slot].reshape(global_tensor.shape[0], big_r * big_r).to(t.device, t.dtype)
            mixed = (relation[:, layer].to(t.dtype) @ g[:, module.lora_idx[adapter]]).reshape(r, r)
            if not hasattr(module, "h2tune_t_offset"):
                module.h2tune_t_offset = {}
            module.h2tune_t_offset[adapter] = mixed - mixed.detach()
        yield
    finally:
        for _, module in mods:
            module.h2tune_t_offset.pop(adapter, None)


@torch.no_grad()
def shift_middle(model, shift: torch.Tensor, adapter: str = "default") -> None:
    """Adds `shift` (L_c, M, R, R) to the layers' shared matrices M̃ and reloads T from them."""
    for name, module in h2tune_modules(model, adapter):
        layer, slot = module_slot(name)
        ref = module.lora_lT[adapter]
        load_middle(module, adapter, ref + shift[layer, slot].to(ref.device, ref.dtype))


def shared_parameters(model, adapter: str = "default") -> list[torch.nn.Parameter]:
    """T and S of every layer (the shared part, with P_c when an alignment is attached)."""
    params = []
    for _, module in h2tune_modules(model, adapter):
        params += [module.lora_T[adapter], module.lora_S[adapter]]
    return params


def local_parameters(model, adapter: str = "default") -> list[torch.nn.Parameter]:
    """A and B of every layer (the task-specific part, never sent)."""
    params = []
    for _, module in h2tune_modules(model, adapter):
        params += [module.lora_A[adapter].weight, module.lora_B[adapter].weight]
    return params


def norm_penalty(params: list[torch.Tensor]) -> torch.Tensor:
    """mean_k ‖θ_k‖₂ over the given tensors (the paper's regulariser on T, S and P_c)."""
    return torch.stack([p.norm() for p in params]).mean()


class H2TuneCallback(TrainerCallback):
    """Scatters every T back into the shared matrix and re-selects it after each optimiser step.

    With a `relation` (P_c) and this round's `global_tensor` G, it also moves M̃ by ΔP_cᵀ·G after each step, so
    that M̃ = P_cᵀ·G + D_c holds while P_c trains (see [`relation_path`]).

    Also clears the gradients of `extra_params` (P_c) at the start of training and after every step: they live
    outside the model, and `Trainer` only zeroes the model's own gradients, so they would otherwise accumulate
    across steps and rounds.
    """

    def __init__(self, adapter: str = "default", extra_params=(), relation=None, global_tensor=None):
        self.adapter, self.extra_params = adapter, list(extra_params)
        self.relation, self.global_tensor = relation, global_tensor
        self._relation_before = None

    def _clear_extra_grads(self):
        for p in self.extra_params:
            p.grad = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._clear_extra_grads()
        if self.relation is not None and self.global_tensor is not None:
            self._relation_before = self.relation.detach().clone()

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is None:
            return
        sync_middle(model, self.adapter)
        if self._relation_before is not None:
            delta = self.relation.detach() - self._relation_before
            if torch.any(delta != 0):
                shift_middle(model, mix_layers(delta, self.global_tensor), self.adapter)
            self._relation_before = self.relation.detach().clone()

    def on_step_end(self, args, state, control, **kwargs):
        self._clear_extra_grads()


class H2TuneTrainer(Trainer):
    """A `Trainer` for round-0 ("joint") H2Tune training: L = CE_LM + λ·mean_k ‖θ_k‖₂ over T, S (and P_c, passed
    as `extra_shared`), with [`H2TuneCallback`] added. The loss changes, hence the subclass.

    Args:
        norm_weight (`float`, defaults to 1.0): λ. The paper's code uses 1.
        extra_shared (`list[torch.nn.Parameter]`, *optional*): more shared tensors to regularise (P_c).
        relation (`torch.nn.Parameter`, *optional*): P_c (L_max × L_c); with `global_tensor` the task loss trains
            it through M̃ = P_cᵀ·G + D_c ([`relation_path`]). It must also be in `extra_shared` and the optimiser.
        global_tensor (`torch.Tensor`, *optional*): G downloaded this round (L_max × M × R × R).
    """

    def __init__(
        self,
        *args,
        norm_weight: float = 1.0,
        extra_shared=None,
        adapter: str = "default",
        relation=None,
        global_tensor=None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.norm_weight, self.extra_shared, self.adapter = norm_weight, list(extra_shared or []), adapter
        self.relation, self.global_tensor = (relation, global_tensor) if global_tensor is not None else (None, None)
        self.add_callback(
            H2TuneCallback(
                adapter, extra_params=self.extra_shared, relation=self.relation, global_tensor=self.global_tensor
            )
        )

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        with relation_path(model, self.relation, self.global_tensor, self.adapter):
            loss, outputs = super().compute_loss(
                model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
            )
        shared = [p for p in shared_parameters(model, self.adapter) + self.extra_shared if p.requires_grad]
        if shared and self.norm_weight:
            loss = loss + self.norm_weight * norm_penalty(shared)
        return (loss, outputs) if return_outputs else loss
