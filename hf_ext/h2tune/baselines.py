"""HetLoRA-style baseline aggregation for heterogeneous clients with plain LoRA.

HetLoRA zero-pads every client's LoRA factors to the largest rank, averages them and truncates back to each client's
rank. Our clients also differ in width, which HetLoRA does not handle; as a stated extension [INF] the factors are
zero-padded in the feature dimension too (A: r×d_in → R×d_max, B: d_out×r → d_max×R), averaged per (layer index,
module slot), and cut back to each client's shape. Its payload therefore grows with the hidden size, unlike H2Tune's.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from .model import module_slot


def lora_factors(model, adapter: str = "default") -> dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]]:
    """(layer, slot) → (A, B) of a plain-LoRA PEFT model."""
    out = {}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and adapter in getattr(module, "lora_A", {}):
            out[module_slot(name)] = (module.lora_A[adapter].weight, module.lora_B[adapter].weight)
    return out


@torch.no_grad()
def hetlora_round(models, adapter: str = "default") -> int:
    """Averages the LoRA factors of `models` in place (pad → mean over the clients having that module → truncate).
    Returns the bytes each client sends (float32), summed over clients."""
    groups: dict[tuple[int, int], list[tuple[torch.Tensor, torch.Tensor]]] = defaultdict(list)
    sent = 0
    for model in models:
        for key, (a, b) in lora_factors(model, adapter).items():
            groups[key].append((a, b))
            sent += 4 * (a.numel() + b.numel())
    for pairs in groups.values():
        r = max(a.shape[0] for a, _ in pairs)
        d_in = max(a.shape[1] for a, _ in pairs)
        d_out = max(b.shape[0] for _, b in pairs)
        mean_a = torch.zeros(r, d_in)
        mean_b = torch.zeros(d_out, r)
        for a, b in pairs:
            mean_a[: a.shape[0], : a.shape[1]] += a.float() / len(pairs)
            mean_b[: b.shape[0], : b.shape[1]] += b.float() / len(pairs)
        for a, b in pairs:
            a.copy_(mean_a[: a.shape[0], : a.shape[1]])
            b.copy_(mean_b[: b.shape[0], : b.shape[1]])
    return sent
