"""Reference points of the Proto-EVFL reproduction that are not federations: the **local-only** model (the active
party alone, with its own feature block and its aligned labels) and the **oracle unseen prototype** (the ceiling
of the zero-shot transfer: `P_u` set to the true mean fused feature of the unseen class's test rows)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .metrics import classification_metrics
from .task import ProtoEvflRunConfig, seeded, single_thread


def run_local_only(settings: ProtoEvflRunConfig) -> dict[str, float]:
    """Trains the active party's own encoder (the same MLP as its Proto-EVFL encoder) with a softmax head on its
    aligned labels only, for as many Adam steps as the federation's upper level takes, and tests it on its own
    block of the test entities. What a label holder gets without any other party."""
    from torch import nn

    from .data import build_vertical_split
    from .modeling_proto_evfl import ProtoEvflPartyModel

    args = settings.training
    split = build_vertical_split(settings.data)
    party, labels = split.party(0), split.labels()
    x, y = torch.from_numpy(party.aligned_features), torch.from_numpy(labels.aligned_labels)
    with single_thread():
        encoder = seeded(args.seed * 1009, lambda: ProtoEvflPartyModel(settings.party_config(0)))
        head = seeded(args.seed * 1009 + 1, lambda: nn.Linear(settings.embed_dim, settings.num_classes))
        params = list(encoder.encoder.parameters()) + list(head.parameters())
        optimizer = torch.optim.Adam(params, lr=args.top_learning_rate)
        for rnd in range(1, args.rounds + 1):
            order = np.random.default_rng([args.seed, 7, rnd]).permutation(len(y))
            for start in range(0, len(order), args.aligned_batch_size):
                idx = torch.from_numpy(order[start : start + args.aligned_batch_size])
                loss = F.cross_entropy(head(encoder.embed(x[idx])), y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            pred = head(encoder.embed(torch.from_numpy(party.test_features))).argmax(-1).numpy()
    return classification_metrics(labels.test_labels, pred, settings.num_classes, labels.unseen_class)


def oracle_unseen_metrics(predictions: dict, unseen_class: int, temperature: float) -> dict[str, float]:
    """Accuracy with the unseen class's global prototype replaced by the normalised mean of the fused test features
    `h` of its rows (an oracle: it reads test labels), everything else unchanged.

    Args:
        predictions (`dict`): a run's `predictions` (`fused`, `global_prototypes`, `labels`).
        unseen_class (`int`): the never-labelled class.
        temperature (`float`): `τ_p` (only the argmax matters, kept for the logits' scale).
    """
    h = torch.from_numpy(np.asarray(predictions["fused"]))
    prototypes = torch.from_numpy(np.array(predictions["global_prototypes"]))
    labels = np.asarray(predictions["labels"])
    rows = torch.from_numpy(labels == unseen_class)
    if not rows.any():
        raise ValueError(f"the test set has no row of the unseen class {unseen_class}")
    prototypes[unseen_class] = F.normalize(h[rows].mean(0), dim=-1)
    logits = F.normalize(h, dim=-1) @ F.normalize(prototypes, dim=-1).T / temperature
    pred = logits.argmax(-1).numpy()
    return {"oracle_accuracy": float((pred == labels).mean()),
            "oracle_unseen_accuracy": float((pred[labels == unseen_class] == unseen_class).mean())}  # fmt: skip


__all__ = ["oracle_unseen_metrics", "run_local_only"]
