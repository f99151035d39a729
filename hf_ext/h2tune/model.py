"""Model-level H2Tune operations on a `PeftModel` (the tuner is PEFT's own `LoraModel`; H2Tune is a LoRA variant, see
`config.py` / `layer.py`): find the H2Tune layers, keep T and the shared matrix in sync, read and write the client's
middle matrices (M̃_c, one (L_c, M, R, R) tensor), make the forward differentiable in the relation matrix P_c, and split
the parameters into the shared part (T, S) and the task-specific part (A, B). The Trainer and its two-pass step are in
`trainer.py`.

Use it like any PEFT adapter:

```python
from peft import get_peft_model, PeftModel
from hf_ext.h2tune import H2TuneConfig

model = get_peft_model(base, H2TuneConfig(r=4, global_rank=16))
...  # train with H2TuneTrainer (or any Trainer plus H2TuneCallback)
model.save_pretrained("adapter")  # also writes hf_ext_checksums.json
again = PeftModel.from_pretrained(base2, "adapter")  # an H2Tune adapter, checksums verified
```
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import torch

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


def cached_modules(owner, model, adapter: str = "default") -> list[tuple[str, H2TuneLinear]]:
    """[`h2tune_modules`] of `model` as a list, kept on `owner` (a Trainer or callback) while `owner` sees the same
    model and adapter: a training loop looks the layers up at every step, and a walk over all the model's modules
    each time costs more than the adapter's own arithmetic on the tiny decoders. Only for a block in which the model's
    modules do not change (a `train()` call)."""
    cache = getattr(owner, "_h2tune_module_cache", None)
    if cache is None or cache[0] is not model or cache[1] != adapter:
        cache = (model, adapter, list(h2tune_modules(model, adapter)))
        owner._h2tune_module_cache = cache
    return cache[2]


def _sparsify(model, adapter: str) -> bool:
    return getattr(model.peft_config[adapter], "sparsify", True)


def sync_middle(model, adapter: str = "default", modules=None) -> None:
    """After an optimiser step: write T back into the shared matrix M̃ and re-select T with the updated S (`modules`:
    [`h2tune_modules`]'s list when the caller keeps one, see [`cached_modules`])."""
    sparsify = _sparsify(model, adapter)
    for _, module in h2tune_modules(model, adapter) if modules is None else modules:
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
    if not isinstance(middle, torch.Tensor) or middle.ndim != 4 or not middle.is_floating_point():
        raise ValueError(f"middle must be a float tensor (L_c, M, R, R), got {getattr(middle, 'shape', middle)!r}")
    depth = num_layers(model, adapter)
    if middle.shape[0] < depth or middle.shape[1] != len(MODULE_SLOTS):
        raise ValueError(f"middle must be (L_c={depth}, M={len(MODULE_SLOTS)}, R, R), got {tuple(middle.shape)}")
    for name, module in h2tune_modules(model, adapter):
        layer, slot = module_slot(name)
        ref = module.lora_lT[adapter]
        load_middle(module, adapter, middle[layer, slot].to(ref.device, ref.dtype))


@contextlib.contextmanager
def relation_path(
    model,
    relation: torch.Tensor | None,
    global_tensor: torch.Tensor | None,
    adapter: str = "default",
    modules=None,
):
    """Makes the forward passes inside the block differentiable in the relation matrix P_c.

    The client's middle matrices are M̃_c = P_cᵀ·G + D_c: the mixture of this round's downloaded global tensor G plus
    the local change D_c that training writes through T. Since T holds the entries `idx` of M̃, ∂L/∂P_c[j, l] =
    Σ_m ⟨G[j, m][idx], ∂L/∂T_{l,m}⟩. Each layer gets a zero-valued offset `o − o.detach()` with
    o = Σ_j P_c[j, l]·G[j, m][idx], added to T in the forward: values are unchanged, and autograd sends exactly that
    gradient to P_c. [`~hf_ext.h2tune.trainer.H2TuneCallback`] then moves M̃ by ΔP_cᵀ·G after each optimiser step,
    so M̃ stays P_cᵀ·G + D_c. No-op when `relation` is `None` or frozen (the index-aligned ablation, the
    task-specific pass). `modules`: [`h2tune_modules`]'s list when the caller keeps one.
    """
    active = relation is not None and relation.requires_grad
    mods = (list(h2tune_modules(model, adapter)) if modules is None else modules) if active else []
    try:
        for name, module in mods:
            layer, slot = module_slot(name)
            t = module.lora_T[adapter]
            r, big_r = t.shape[0], module.lora_lT[adapter].shape[0]
            g = global_tensor[:, slot].reshape(global_tensor.shape[0], big_r * big_r).to(t.device, t.dtype)
            # P_c lives outside the model (on the CPU when the model trains on a GPU); `.to` keeps its gradient
            mixed = (relation[:, layer].to(t.device, t.dtype) @ g[:, module.lora_idx[adapter]]).reshape(r, r)
            if not hasattr(module, "h2tune_t_offset"):
                module.h2tune_t_offset = {}
            module.h2tune_t_offset[adapter] = mixed - mixed.detach()
        yield
    finally:
        for _, module in mods:
            module.h2tune_t_offset.pop(adapter, None)


@torch.no_grad()
def shift_middle(model, shift: torch.Tensor, adapter: str = "default", modules=None) -> None:
    """Adds `shift` (L_c, M, R, R) to the layers' shared matrices M̃ and reloads T from them."""
    for name, module in h2tune_modules(model, adapter) if modules is None else modules:
        layer, slot = module_slot(name)
        ref = module.lora_lT[adapter]
        load_middle(module, adapter, ref + shift[layer, slot].to(ref.device, ref.dtype))


def shared_parameters(model, adapter: str = "default", modules=None) -> list[torch.nn.Parameter]:
    """T and S of every layer (the shared part, with P_c when an alignment is attached)."""
    params = []
    for _, module in h2tune_modules(model, adapter) if modules is None else modules:
        params += [module.lora_T[adapter], module.lora_S[adapter]]
    return params


def local_parameters(model, adapter: str = "default", modules=None) -> list[torch.nn.Parameter]:
    """A and B of every layer (the task-specific part, never sent)."""
    params = []
    for _, module in h2tune_modules(model, adapter) if modules is None else modules:
        params += [module.lora_A[adapter].weight, module.lora_B[adapter].weight]
    return params
