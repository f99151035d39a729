"""FedE4RAG's local objective and its `Trainer`: in-batch contrastive loss plus λ·MSE between the student's and the
received global model's (teacher's) question–passage similarity matrices.

Per batch of B pairs (qᵢ, pᵢ): `S[i, j] = cos(E(qᵢ), E(pⱼ))`; `L = CE(S / τ, diag) + λ · MSE(S_c, S_g)`
with τ = 1 (the code uses no temperature) and λ = 100 (the code's value). Without a teacher (the FedAvg baseline) only
the contrastive term is used.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import Trainer, TrainingArguments

from .encoder import HiddenCache

SIDES = ("q", "p")


def similarity(queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
    """B×B cosine similarities (inputs are normalised again, so unnormalised vectors are fine)."""
    return F.normalize(queries, dim=-1) @ F.normalize(passages, dim=-1).T


def kd_contrastive_loss(
    sim: torch.Tensor, teacher_sim: torch.Tensor | None = None, kd_lambda: float = 100.0, temperature: float = 1.0
) -> tuple[torch.Tensor, dict[str, float]]:
    """`CE(S / τ, diag) + λ·MSE(S, S_teacher)`; returns the loss and its two parts (floats, for logging)."""
    if sim.ndim != 2 or sim.shape[0] != sim.shape[1]:
        raise ValueError(f"the similarity matrix must be square (in-batch negatives), got shape {tuple(sim.shape)}")
    labels = torch.arange(sim.shape[0], device=sim.device)
    contrastive = F.cross_entropy(sim / temperature, labels)
    loss, parts = contrastive, {"contrastive": float(contrastive.detach())}
    if teacher_sim is not None and kd_lambda > 0:
        if teacher_sim.shape != sim.shape:
            raise ValueError(f"teacher similarities have shape {tuple(teacher_sim.shape)}, student {tuple(sim.shape)}")
        kd = F.mse_loss(sim, teacher_sim.detach())
        loss = loss + kd_lambda * kd
        parts["kd"] = float(kd.detach())
    return loss, parts


@dataclass
class FedE4RAGTrainingArguments(TrainingArguments):
    """`TrainingArguments` plus FedE4RAG's loss knobs.

    Args:
        kd_lambda (`float`, defaults to 100.0): weight λ of the similarity-matrix distillation term (0 = FedAvg).
        temperature (`float`, defaults to 1.0): τ of the contrastive softmax (1 = none, as the code).
    """

    kd_lambda: float = field(default=100.0, metadata={"help": "weight of the KD (MSE of similarity matrices) term"})
    temperature: float = field(default=1.0, metadata={"help": "softmax temperature of the contrastive term"})
    remove_unused_columns: bool = False


def split_sides(inputs: Mapping[str, torch.Tensor]) -> dict[str, dict]:
    """`{"q_input_ids": ..., "p_hidden_states": ...}` → `{"q": {"input_ids": ...}, "p": {"hidden_states": ...}}`."""
    sides: dict[str, dict] = {s: {} for s in SIDES}
    for key, value in inputs.items():
        side, _, name = key.partition("_")
        if side not in sides or not name:
            raise ValueError(f"unexpected input {key!r}: keys must start with 'q_' or 'p_'")
        sides[side][name] = value
    for side, values in sides.items():
        if "input_ids" not in values and "hidden_states" not in values:
            raise ValueError(f"the {side!r} side has neither input_ids nor hidden_states")
    return sides


class FedE4RAGTrainer(Trainer):
    """`Trainer` with FedE4RAG's local loss (subclassed because the loss changes: two encoders' similarity matrices).

    Args:
        teacher (`torch.nn.Module`, *optional*): the received global model, frozen; `None` or `kd_lambda = 0` gives
            the contrastive-only (FedAvg) objective.
        *args, **kwargs: as `Trainer`; `args` should be [`FedE4RAGTrainingArguments`].
    """

    def __init__(self, *args, teacher: torch.nn.Module | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = teacher
        if teacher is not None:
            teacher.eval()
            for p in teacher.parameters():
                p.requires_grad_(False)
        self.last_parts: dict[str, float] = {}

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        sides = split_sides(inputs)
        q, p = (model(**sides[s]).pooler_output for s in SIDES)
        sim = similarity(q, p)
        kd_lambda = float(getattr(self.args, "kd_lambda", 0.0))
        teacher_sim = None
        if self.teacher is not None and kd_lambda > 0:
            with torch.no_grad():
                teacher_sim = similarity(*(self.teacher(**sides[s]).pooler_output for s in SIDES))
        loss, self.last_parts = kd_contrastive_loss(
            sim, teacher_sim, kd_lambda, float(getattr(self.args, "temperature", 1.0))
        )
        return (loss, {"similarity": sim}) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """Evaluation: the loss, and per query the rank of its own passage among the batch's passages (0 = first),
        so [`compute_metrics`] can report in-batch hit@k / MRR from `trainer.evaluate()`."""
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss, out = self.compute_loss(model, inputs, return_outputs=True)
        if prediction_loss_only:
            return loss.detach(), None, None
        sim = out["similarity"]
        ranks = (sim > sim.diagonal()[:, None]).sum(dim=1)  # passages scored above the positive
        return loss.detach(), ranks, torch.zeros_like(ranks)


class TextPairCollator:
    """Tokenises `question` / `passage` features into `q_*` / `p_*` tensors."""

    def __init__(self, tokenizer, max_query_length: int = 64, max_passage_length: int = 256):
        self.tokenizer, self.max_q, self.max_p = tokenizer, max_query_length, max_passage_length

    def __call__(self, features: Sequence[Mapping]) -> dict[str, torch.Tensor]:
        out = {}
        for side, key, length in (("q", "question", self.max_q), ("p", "passage", self.max_p)):
            enc = self.tokenizer(
                [f[key] for f in features], truncation=True, max_length=length, padding=True, return_tensors="pt"
            )
            out.update({f"{side}_{k}": v for k, v in enc.items() if k in ("input_ids", "attention_mask")})
        return out


class TokenPairCollator:
    """Pads pre-tokenised `q_input_ids` / `p_input_ids` features (id 0 = [PAD]) into `q_*` / `p_*` tensors."""

    def __call__(self, features: Sequence[Mapping]) -> dict[str, torch.Tensor]:
        out = {}
        for side in SIDES:
            seqs = [list(f[f"{side}_input_ids"]) for f in features]
            length = max(len(s) for s in seqs)
            ids = torch.zeros(len(seqs), length, dtype=torch.long)
            mask = torch.zeros(len(seqs), length, dtype=torch.long)
            for j, s in enumerate(seqs):
                ids[j, : len(s)] = torch.tensor(s)
                mask[j, : len(s)] = 1
            out[f"{side}_input_ids"], out[f"{side}_attention_mask"] = ids, mask
        return out


class CachedPairCollator:
    """Looks up `q_row` / `p_row` features in [`HiddenCache`]s (frozen lower layers computed once)."""

    def __init__(self, questions: HiddenCache, passages: HiddenCache):
        self.caches = {"q": questions, "p": passages}

    def __call__(self, features: Sequence[Mapping]) -> dict[str, torch.Tensor]:
        out = {}
        for side, cache in self.caches.items():
            for k, v in cache.batch([f[f"{side}_row"] for f in features]).items():
                out[f"{side}_{k}"] = v
        return out


_TEACHERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def frozen_teacher(model, reuse: bool = False) -> torch.nn.Module:
    """A frozen copy of `model` (the received global model, before local training).

    With `reuse`, the copy made earlier for this same `model` object is refreshed in place (every parameter and buffer
    copied from `model`: the same weights a new deep copy would have) instead of deep-copying the whole encoder again.
    A federated client calls this once per round; the deep copy cost ~0.5 s a round under load, the refresh ~1/20 of
    that. The first call for a model deep-copies it."""
    teacher = _TEACHERS.get(model) if reuse else None
    if teacher is None:
        teacher = copy.deepcopy(model)
        if reuse:
            _TEACHERS[model] = teacher
    else:
        with torch.no_grad():
            teacher.load_state_dict(model.state_dict(), strict=True)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


__all__ = [
    "CachedPairCollator",
    "FedE4RAGTrainer",
    "FedE4RAGTrainingArguments",
    "TextPairCollator",
    "TokenPairCollator",
    "frozen_teacher",
    "kd_contrastive_loss",
    "similarity",
    "split_sides",
]


def compute_metrics(eval_pred) -> dict[str, float]:
    """`Trainer(compute_metrics=...)` for [`FedE4RAGTrainer`]: in-batch retrieval (each query against the passages of
    its evaluation batch) as `inbatch_hit@1`, `inbatch_hit@5` and `inbatch_mrr`. The README's hit@k / MRR rank the
    whole corpus (`hf_ext.fede4rag.evaluation`); these are the same measures over a batch-sized candidate set."""
    import numpy as np

    ranks = np.asarray(eval_pred.predictions).reshape(-1)
    ranks = ranks[ranks >= 0]  # drop Trainer's cross-batch padding
    return {
        "inbatch_hit@1": float((ranks < 1).mean()),
        "inbatch_hit@5": float((ranks < 5).mean()),
        "inbatch_mrr": float((1.0 / (ranks + 1)).mean()),
    }
