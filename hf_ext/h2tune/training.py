"""Alternating task-knowledge disentanglement (rounds ≥ 1 of H2Tune).

Every training step makes two passes over the batch, then one optimiser step:

1. shared pass, A and B frozen: L_a = CE + λ·mean‖θ‖₂ (T, S, P_c)
   + mean_modules KL(softmax(vec T_prev) ‖ softmax(vec T));
   its logits z_a are kept (detached);
2. specific pass, T, S and P_c frozen: L_b = CE + KL(softmax(z_a) ‖ softmax(z_b)) over the answer tokens.

"Frozen" is implemented by switching `requires_grad` off during the pass's forward, so a single backward of
L_a + L_b sends L_a's gradient only to the shared part and L_b's only to A and B.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from .model import H2TuneTrainer, h2tune_modules, local_parameters, norm_penalty, relation_path, shared_parameters


@contextlib.contextmanager
def frozen(params):
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(params, flags):
            p.requires_grad_(f)


def previous_t(model, adapter: str = "default") -> dict[str, torch.Tensor]:
    """Each layer's T now, to serve as T_prev in the next round."""
    return {name: m.lora_T[adapter].detach().clone() for name, m in h2tune_modules(model, adapter)}


def t_kl(model, prev: dict[str, torch.Tensor], adapter: str = "default") -> torch.Tensor:
    """mean over modules of KL(softmax(vec T_prev) ‖ softmax(vec T))."""
    terms = []
    for name, m in h2tune_modules(model, adapter):
        if name in prev:
            p_log = F.log_softmax(prev[name].reshape(-1).to(m.lora_T[adapter].dtype), dim=0)
            q_log = F.log_softmax(m.lora_T[adapter].reshape(-1), dim=0)
            terms.append(F.kl_div(q_log, p_log, log_target=True, reduction="sum"))
    return torch.stack(terms).mean() if terms else torch.zeros(())


class H2TuneAlternatingTrainer(H2TuneTrainer):
    """[`H2TuneTrainer`] for rounds ≥ 1: the two-pass step described in the module docstring.

    Args:
        prev_t (`dict[str, torch.Tensor]`): T of every layer at the end of the previous round ([`previous_t`]).
        (other arguments as [`H2TuneTrainer`])
    """

    def __init__(self, *args, prev_t: dict[str, torch.Tensor], **kwargs):
        super().__init__(*args, **kwargs)
        self.prev_t = prev_t

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        shared = [p for p in shared_parameters(model, self.adapter) + self.extra_shared]
        local = local_parameters(model, self.adapter)
        labels = inputs.get("labels")
        with frozen(local), relation_path(model, self.relation, self.global_tensor, self.adapter):  # pass 1: shared
            out_a = model(**inputs)
            loss_a = out_a.loss + self.norm_weight * norm_penalty(shared) + t_kl(model, self.prev_t, self.adapter)
        with frozen(shared):  # pass 2: task-specific part, distilled toward the shared pass
            out_b = model(**inputs)
            z_a, z_b = out_a.logits.detach()[:, :-1], out_b.logits[:, :-1]
            mask = labels[:, 1:] != -100 if labels is not None else torch.ones(z_b.shape[:2], dtype=torch.bool)
            kl = F.kl_div(
                F.log_softmax(z_b[mask], -1), F.log_softmax(z_a[mask], -1), log_target=True, reduction="batchmean"
            )
            loss_b = out_b.loss + kl
        loss = loss_a + loss_b
        return (loss, out_b) if return_outputs else loss


def compute_metrics(eval_pred) -> dict[str, float]:
    """`Trainer(compute_metrics=...)` of H2Tune's clients (with `preprocess_logits_for_metrics=argmax_logits`):
    `exact_match` as in the README table (teacher forcing over the first two answer positions equals
    `hf_ext.h2tune.data.exact_match`'s two-token greedy decode; the test checks it) and `token_acc`."""
    from hf_ext.core.trainer_metrics import answer_exact_match, token_accuracy

    return {**answer_exact_match(eval_pred, max_positions=2), **token_accuracy(eval_pred)}
