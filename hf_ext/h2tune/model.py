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

import re
from collections.abc import Iterator

import torch
from transformers import Trainer, TrainerCallback

from .layer import H2TuneLinear, load_middle, sync_layer

# Canonical module slots m of the global tensor G (L_max × M × R × R). GPT-2's fused c_attn shares the q slot.
MODULE_SLOTS = ("q", "k", "v", "o", "gate", "up", "down")
_SLOT_OF = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up",
    "down_proj": "down", "attn.c_attn": "q", "attn.c_proj": "o", "mlp.c_fc": "up", "mlp.c_proj": "down",
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

    Also clears the gradients of `extra_params` (P_c) at the start of training and after every step: they live
    outside the model, and `Trainer` only zeroes the model's own gradients, so they would otherwise accumulate
    across steps and rounds.
    """

    def __init__(self, adapter: str = "default", extra_params=()):
        self.adapter, self.extra_params = adapter, list(extra_params)

    def _clear_extra_grads(self):
        for p in self.extra_params:
            p.grad = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._clear_extra_grads()

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is not None:
            sync_middle(model, self.adapter)

    def on_step_end(self, args, state, control, **kwargs):
        self._clear_extra_grads()


class H2TuneTrainer(Trainer):
    """A `Trainer` for round-0 ("joint") H2Tune training: L = CE_LM + λ·mean_k ‖θ_k‖₂ over T, S (and P_c, passed
    as `extra_shared`), with [`H2TuneCallback`] added. The loss changes, hence the subclass.

    Args:
        norm_weight (`float`, defaults to 1.0): λ. The paper's code uses 1.
        extra_shared (`list[torch.nn.Parameter]`, *optional*): more shared tensors to regularise (P_c).
    """

    def __init__(self, *args, norm_weight: float = 1.0, extra_shared=None, adapter: str = "default", **kwargs):
        super().__init__(*args, **kwargs)
        self.norm_weight, self.extra_shared, self.adapter = norm_weight, list(extra_shared or []), adapter
        self.add_callback(H2TuneCallback(adapter, extra_params=self.extra_shared))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        shared = [p for p in shared_parameters(model, self.adapter) + self.extra_shared if p.requires_grad]
        if shared and self.norm_weight:
            loss = loss + self.norm_weight * norm_penalty(shared)
        return (loss, outputs) if return_outputs else loss
