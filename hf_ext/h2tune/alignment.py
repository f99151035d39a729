"""Relation-guided matrix layer alignment: a client's persistent relation matrix P_c (L_max × L_c) maps the global
tensor G (L_max × M × R × R) onto the client's L_c layers and back.

- download: M̃_c[l, m] = Σ_j P_c[j, l] · G[j, m]
- upload:   G_c[j, m] = Σ_l P_c[j, l] · M̃_c[l, m]   (computed from the *trained* M̃; the released code used the
  pre-training copy)

P_c stays on the client and persists across rounds (the released code reloaded it under a wrong key, so it was
re-randomised every round). It is trained in the shared parameter group, by the task loss and the paper's L2 penalty:
during a round the client's matrices are M̃_c = P_cᵀ·G + D_c (G this round's download, D_c the change training
writes through T), so the cross-entropy reaches P_c through the entries T holds (`model.relation_path`). The
released code loaded M̃ as a constant, so only the norm penalty touched P_c and shrank it every round.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def mix_layers(relation: torch.Tensor, global_tensor: torch.Tensor) -> torch.Tensor:
    """Σ_j relation[j, l]·G[j, m]: (L_c, M, R, R) from a (L_max × L_c) relation and G (L_max, M, R, R)."""
    return torch.einsum("jl,jmab->lmab", relation, global_tensor.to(relation.dtype))


class RelationMatrix(nn.Module):
    """P_c ∈ R^{L_max × L_c}, kaiming-uniform init (seeded) or a fixed index alignment (ablation).

    Args:
        max_layers (`int`): L_max, the depth of the deepest client (rows of G).
        num_layers (`int`): L_c, this client's depth.
        seed (`int`, defaults to 0): seed of the kaiming init.
        index_aligned (`bool`, defaults to `False`): the "index-aligned layers" ablation: P_c[j, l] = 1 for
            j = L_max − L_c + l (a shallower model's layers map onto the top layers of the deepest one, the released
            code's commented-out baseline), frozen.
    """

    def __init__(self, max_layers: int, num_layers: int, seed: int = 0, index_aligned: bool = False):
        super().__init__()
        for name, value in (("max_layers", max_layers), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"RelationMatrix {name} must be an integer >= 1, got {value!r}")
        if num_layers > max_layers:
            raise ValueError(f"client depth {num_layers} exceeds L_max {max_layers}")
        weight = torch.zeros(max_layers, num_layers)
        if index_aligned:
            offset = max_layers - num_layers
            weight[torch.arange(num_layers) + offset, torch.arange(num_layers)] = 1.0
        else:
            g = torch.Generator().manual_seed(seed)
            bound = 1.0 / math.sqrt(num_layers)  # kaiming_uniform(a=√5) bound for fan_in = L_c
            weight.uniform_(-bound, bound, generator=g)
        self.weight = nn.Parameter(weight, requires_grad=not index_aligned)
        self.index_aligned = index_aligned

    def download(self, global_tensor: torch.Tensor) -> torch.Tensor:
        """M̃_c (L_c, M, R, R) from G (L_max, M, R, R)."""
        self._check(global_tensor)
        return mix_layers(self.weight.detach(), global_tensor)

    def upload(self, middle: torch.Tensor) -> torch.Tensor:
        """G_c (L_max, M, R, R) from the trained M̃_c (L_c, M, R, R)."""
        if not isinstance(middle, torch.Tensor) or middle.ndim != 4:
            raise ValueError(f"middle must be a (L_c, M, R, R) tensor, got {getattr(middle, 'shape', middle)!r}")
        if middle.shape[0] != self.weight.shape[1]:
            raise ValueError(f"middle has {middle.shape[0]} layers, P_c expects {self.weight.shape[1]}")
        return torch.einsum("jl,lmab->jmab", self.weight.detach(), middle.to(self.weight.dtype))

    def _check(self, global_tensor: torch.Tensor) -> None:
        if global_tensor.ndim != 4 or global_tensor.shape[0] != self.weight.shape[0]:
            raise ValueError(f"G must be (L_max={self.weight.shape[0]}, M, R, R), got {tuple(global_tensor.shape)}")
        if not bool(torch.isfinite(global_tensor).all()):
            raise ValueError("G holds NaN/Inf values: refusing to mix it into this client's layers")


def initial_global(max_layers: int, num_slots: int, global_rank: int, seed: int = 0) -> torch.Tensor:
    """The common G⁰ the server sends in round 0: kaiming-uniform with a fixed seed (the released code let every
    client draw its own random G, so the first average mixed unrelated matrices)."""
    for name, value in (("max_layers", max_layers), ("num_slots", num_slots), ("global_rank", global_rank)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"initial_global {name} must be an integer >= 1, got {value!r}")
    g = torch.Generator().manual_seed(seed)
    bound = 1.0 / math.sqrt(global_rank)
    return torch.empty(max_layers, num_slots, global_rank, global_rank).uniform_(-bound, bound, generator=g)
