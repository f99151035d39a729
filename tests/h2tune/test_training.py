"""Alternating disentanglement: each pass's loss reaches only its own parameter group; T_prev KL closed form."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import TrainingArguments

from hf_ext.h2tune.model import local_parameters, norm_penalty, shared_parameters
from hf_ext.h2tune.testing import make_adapter, tiny_config, tiny_inputs
from hf_ext.h2tune.training import H2TuneAlternatingTrainer, previous_t, t_kl


def _grads(params):
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]


def test_two_pass_loss_routes_gradients(tmp_path):
    model = make_adapter(tiny_config())
    prev = {k: v + 0.3 for k, v in previous_t(model).items()}
    ids = tiny_inputs(batch=2, length=8)["input_ids"]
    inputs = {"input_ids": ids, "labels": ids.clone()}
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=1)
    trainer = H2TuneAlternatingTrainer(model=model, args=args, prev_t=prev)
    model.train()
    shared, local = shared_parameters(model), local_parameters(model)
    trainer.compute_loss(model, dict(inputs)).backward()
    got_shared, got_local = _grads(shared), _grads(local)

    model.zero_grad()
    out = model(**inputs)
    (out.loss + norm_penalty(shared) + t_kl(model, prev)).backward()  # L_a
    for g, e in zip(got_shared, _grads(shared)):
        torch.testing.assert_close(g, e)
    model.zero_grad()
    z_a = out.logits.detach()
    out_b = model(**inputs)
    mask = inputs["labels"][:, 1:] != -100
    kl = F.kl_div(F.log_softmax(out_b.logits[:, :-1][mask], -1), F.log_softmax(z_a[:, :-1][mask], -1),
                  log_target=True, reduction="batchmean")
    (out_b.loss + kl).backward()  # L_b
    for g, e in zip(got_local, _grads(local)):
        torch.testing.assert_close(g, e)
    assert all(p.requires_grad for p in shared + local)  # the passes restore requires_grad


def test_t_kl_zero_at_prev_and_positive_elsewhere():
    model = make_adapter(tiny_config())
    prev = previous_t(model)
    assert t_kl(model, prev).item() < 1e-6
    shifted = {k: v * 3 for k, v in prev.items()}
    assert t_kl(model, shifted).item() > 1e-3
