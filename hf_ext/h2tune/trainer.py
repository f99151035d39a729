"""The H2Tune Trainer: the loss changes, hence the subclasses (layout rule 6).

- [`H2TuneCallback`]: after each optimiser step, scatters T back into the shared matrix M̃ and re-selects it (and
  keeps M̃ = P_cᵀ·G + D_c while P_c trains).
- [`H2TuneTrainer`]: round 0 ("joint"): L = CE_LM + λ·mean_k ‖θ_k‖₂ over T, S and P_c.
- [`H2TuneAlternatingTrainer`]: rounds ≥ 1, alternating task-knowledge disentanglement. Every training step makes two
  passes over the batch, then one optimiser step:

  1. shared pass, A and B frozen: L_a = CE + λ·mean‖θ‖₂ (T, S, P_c)
     + mean_modules KL(softmax(vec T_prev) ‖ softmax(vec T)); its logits z_a are kept (detached);
  2. specific pass, T, S and P_c frozen: L_b = CE + KL(softmax(z_a) ‖ softmax(z_b)) over the answer tokens.

  "Frozen" is implemented by switching `requires_grad` off during the pass's forward, so a single backward of
  L_a + L_b sends L_a's gradient only to the shared part and L_b's only to A and B.

The two-pass step lives here, beside the Trainer, rather than on the tuner in `model.py`: it is a training step (two
forwards, one backward, one optimiser step, a loss that reads the previous round's T), expressed as
`Trainer.compute_loss`, and H2Tune has no tuner class of its own to hang it on (the tuner is PEFT's `LoraModel`).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from transformers import Trainer, TrainerCallback

from .alignment import mix_layers
from .model import (
    cached_modules,
    h2tune_modules,
    local_parameters,
    relation_path,
    shared_parameters,
    shift_middle,
    sync_middle,
)


def norm_penalty(params: list[torch.Tensor]) -> torch.Tensor:
    """mean_k ‖θ_k‖₂ over the given tensors (the paper's regulariser on T, S and P_c)."""
    # P_c stays on the CPU beside a model on the GPU: the norms meet on the first tensor's device
    device = params[0].device
    return torch.stack([p.norm().to(device) for p in params]).mean()


class H2TuneCallback(TrainerCallback):
    """Scatters every T back into the shared matrix and re-selects it after each optimiser step.

    With a `relation` (P_c) and this round's `global_tensor` G, it also moves M̃ by ΔP_cᵀ·G after each step, so
    that M̃ = P_cᵀ·G + D_c holds while P_c trains (see [`relation_path`]).

    Also clears the gradients of `extra_params` (P_c) at the start of training and after every step: they live
    outside the model, and `Trainer` only zeroes the model's own gradients, so they would otherwise accumulate
    across steps and rounds.

    Between `on_train_begin` and `on_train_end` it keeps the model's list of H2Tune layers ([`modules`]; the layers do
    not change while training), so that each step does not walk every module of the model again.
    """

    def __init__(self, adapter: str = "default", extra_params=(), relation=None, global_tensor=None):
        self.adapter, self.extra_params = adapter, list(extra_params)
        self.relation, self.global_tensor = relation, global_tensor
        self._relation_before = None
        self._training = False
        self._h2tune_module_cache = None  # (model, adapter, layers) while training ([`cached_modules`])

    def modules(self, model):
        """The H2Tune layers of `model`: kept from the first look-up while training, looked up afresh otherwise."""
        if not self._training:
            return list(h2tune_modules(model, self.adapter))
        return cached_modules(self, model, self.adapter)

    def _clear_extra_grads(self):
        for p in self.extra_params:
            p.grad = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._h2tune_module_cache = None
        self._training = True
        self._clear_extra_grads()
        if self.relation is not None and self.global_tensor is not None:
            self._relation_before = self.relation.detach().clone()

    def on_train_end(self, args, state, control, **kwargs):
        self._training = False
        self._h2tune_module_cache = None

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is None:
            return
        modules = self.modules(model)
        sync_middle(model, self.adapter, modules=modules)
        if self._relation_before is not None:
            delta = self.relation.detach() - self._relation_before
            if torch.any(delta != 0):
                shift_middle(model, mix_layers(delta, self.global_tensor), self.adapter, modules=modules)
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
        self.h2tune_callback = H2TuneCallback(
            adapter, extra_params=self.extra_shared, relation=self.relation, global_tensor=self.global_tensor
        )
        self.add_callback(self.h2tune_callback)
        self._flos_per_token = None

    def floating_point_ops(self, inputs) -> int:
        """`Trainer.floating_point_ops` (6 · tokens · parameters without embeddings), with the parameter count taken
        once: `Trainer` asks at every step, and counting walks every parameter of the model."""
        main_input = getattr(self.model, "main_input_name", "input_ids")
        if main_input not in inputs or not hasattr(self.model, "num_parameters"):
            return super().floating_point_ops(inputs)
        if self._flos_per_token is None or self._flos_per_token[0] is not self.model:
            self._flos_per_token = (self.model, 6 * self.model.num_parameters(exclude_embeddings=True))
        return inputs[main_input].numel() * self._flos_per_token[1]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        modules = self.h2tune_callback.modules(model)
        with relation_path(model, self.relation, self.global_tensor, self.adapter, modules=modules):
            loss, outputs = super().compute_loss(
                model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
            )
        shared = [p for p in shared_parameters(model, self.adapter, modules) + self.extra_shared if p.requires_grad]
        if shared and self.norm_weight:
            loss = loss + self.norm_weight * norm_penalty(shared)
        return (loss, outputs) if return_outputs else loss


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


def t_kl(model, prev: dict[str, torch.Tensor], adapter: str = "default", modules=None) -> torch.Tensor:
    """mean over modules of KL(softmax(vec T_prev) ‖ softmax(vec T))."""
    terms = []
    for name, m in h2tune_modules(model, adapter) if modules is None else modules:
        if name in prev:
            t = m.lora_T[adapter]  # T_prev may come back from the CPU (a client restored from its saved state)
            p_log = F.log_softmax(prev[name].reshape(-1).to(t.device, t.dtype), dim=0)
            q_log = F.log_softmax(t.reshape(-1), dim=0)
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
        loss, out_b = two_pass_loss(
            model,
            inputs,
            self.prev_t,
            extra_shared=self.extra_shared,
            norm_weight=self.norm_weight,
            adapter=self.adapter,
            relation=self.relation,
            global_tensor=self.global_tensor,
            modules=self.h2tune_callback.modules(model),
        )
        return (loss, out_b) if return_outputs else loss


def two_pass_loss(
    model,
    inputs: dict,
    prev_t: dict[str, torch.Tensor],
    *,
    extra_shared=(),
    norm_weight: float = 1.0,
    adapter: str = "default",
    relation=None,
    global_tensor=None,
    modules=None,
):
    """L_a + L_b of the two-pass step (the module docstring) on one batch; returns `(loss, outputs of pass 2)`.
    [`H2TuneAlternatingTrainer.compute_loss`] is this function; `benchmarks/h2tune_cost.py` times it. `modules`:
    [`~hf_ext.h2tune.model.h2tune_modules`]'s list when the caller keeps one."""
    modules = list(h2tune_modules(model, adapter)) if modules is None else modules
    shared = [p for p in shared_parameters(model, adapter, modules) + list(extra_shared)]
    local = local_parameters(model, adapter, modules)
    labels = inputs.get("labels")
    with frozen(local), relation_path(model, relation, global_tensor, adapter, modules):  # pass 1: the shared part
        out_a = model(**inputs)
        loss_a = out_a.loss + norm_weight * norm_penalty(shared) + t_kl(model, prev_t, adapter, modules)
    with frozen(shared):  # pass 2: task-specific part, distilled toward the shared pass
        out_b = model(**inputs)
        z_a, z_b = out_a.logits.detach()[:, :-1], out_b.logits[:, :-1]
        mask = (
            labels[:, 1:] != -100
            if labels is not None
            else torch.ones(z_b.shape[:2], dtype=torch.bool, device=z_b.device)
        )
        kl = F.kl_div(
            F.log_softmax(z_b[mask], -1), F.log_softmax(z_a[mask], -1), log_target=True, reduction="batchmean"
        )
        loss_b = out_b.loss + kl
    return loss_a + loss_b, out_b


def compute_metrics(eval_pred) -> dict[str, float]:
    """`Trainer(compute_metrics=...)` of H2Tune's clients (with `preprocess_logits_for_metrics=argmax_logits`):
    `exact_match` as in the README table (teacher forcing over the first two answer positions equals
    `hf_ext.h2tune.data.exact_match`'s two-token greedy decode; the test checks it) and `token_acc`."""
    from hf_ext.core.trainer_metrics import answer_exact_match, token_accuracy

    return {**answer_exact_match(eval_pred, max_positions=2), **token_accuracy(eval_pred)}


__all__ = [
    "H2TuneAlternatingTrainer",
    "H2TuneCallback",
    "H2TuneTrainer",
    "compute_metrics",
    "frozen",
    "norm_penalty",
    "previous_t",
    "t_kl",
    "two_pass_loss",
]
