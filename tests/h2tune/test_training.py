"""Alternating disentanglement: each pass's loss reaches only its own parameter group; T_prev KL closed form."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import TrainingArguments

from hf_ext.h2tune.model import h2tune_modules, local_parameters, shared_parameters
from hf_ext.h2tune.testing import make_adapter, tiny_base, tiny_base_config, tiny_config, tiny_inputs
from hf_ext.h2tune.trainer import H2TuneAlternatingTrainer, norm_penalty, previous_t, t_kl


def _grads(params):
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]


def test_two_pass_loss_routes_gradients(tmp_path):
    # dropout on, with the RNG reseeded identically below: the two passes see different dropout masks (z_a != z_b, as
    # in training), so a z_a that is not detached would send L_b's KL gradient into the shared part
    model = make_adapter(tiny_config(lora_dropout=0.3))
    # T_prev differs from T by more than a constant (softmax ignores a shift): the T_prev KL is not zero here
    prev = {k: 3 * v + 0.1 for k, v in previous_t(model).items()}
    ids = tiny_inputs(batch=2, length=8)["input_ids"]
    inputs = {"input_ids": ids, "labels": ids.clone()}
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=1)
    trainer = H2TuneAlternatingTrainer(model=model, args=args, prev_t=prev)
    model.train()
    shared, local = shared_parameters(model), local_parameters(model)
    torch.manual_seed(5)
    trainer.compute_loss(model, dict(inputs)).backward()
    got_shared, got_local = _grads(shared), _grads(local)

    model.zero_grad()
    torch.manual_seed(5)
    out = model(**inputs)
    assert t_kl(model, prev) > 1e-3
    (out.loss + norm_penalty(shared) + t_kl(model, prev)).backward()  # L_a
    for g, e in zip(got_shared, _grads(shared)):
        torch.testing.assert_close(g, e)
    model.zero_grad()
    z_a = out.logits.detach()
    out_b = model(**inputs)
    mask = inputs["labels"][:, 1:] != -100
    kl = F.kl_div(
        F.log_softmax(out_b.logits[:, :-1][mask], -1),
        F.log_softmax(z_a[:, :-1][mask], -1),
        log_target=True,
        reduction="batchmean",
    )
    assert kl > 1e-6  # the passes differ (dropout)
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


def _relation_setup(layers: int = 2, max_layers: int = 3):
    from hf_ext.h2tune.alignment import RelationMatrix, initial_global
    from hf_ext.h2tune.model import MODULE_SLOTS, set_middle

    model = make_adapter(tiny_config(), base=tiny_base(tiny_base_config(layers=layers))).double()
    relation = RelationMatrix(max_layers, layers, seed=3).double()
    g = initial_global(max_layers, len(MODULE_SLOTS), 8, seed=1).double()
    set_middle(model, relation.download(g))
    return model, relation, g


def test_task_loss_reaches_relation_matrix_with_the_chain_rule_gradient():
    """∂CE/∂P_c from `relation_path` equals the gradient of the same loss with every T computed *literally* as the
    selected entries of P_cᵀ·G (right after download, D_c = 0), via `torch.func.functional_call`."""
    from hf_ext.h2tune.model import module_slot, relation_path

    model, relation, g = _relation_setup()
    model.eval()
    ids = tiny_inputs(batch=2, length=8)["input_ids"]

    def lm_loss(logits):
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    values_before = [m.lora_T["default"].detach().clone() for _, m in h2tune_modules(model)]
    with relation_path(model, relation.weight, g):
        loss = lm_loss(model(input_ids=ids).logits)
    loss.backward()
    assert all(not getattr(m, "h2tune_t_offset", {}) for _, m in h2tune_modules(model))  # offsets removed
    got = relation.weight.grad.clone()
    assert got.abs().max() > 1e-4  # the task loss now reaches P_c

    p = relation.weight.detach().clone().requires_grad_(True)
    literal = {}
    for name, m in h2tune_modules(model):
        layer, slot = module_slot(name)
        r = m.lora_T["default"].shape[0]
        mixed = torch.einsum("j,jab->ab", p[:, layer], g[:, slot]).reshape(-1)  # (P_cᵀ·G)[layer, slot]
        literal[f"{name}.lora_T.default"] = mixed[m.lora_idx["default"]].reshape(r, r)
    reference = lm_loss(torch.func.functional_call(model, literal, (), {"input_ids": ids}).logits)
    torch.testing.assert_close(reference, loss.detach())
    (expected,) = torch.autograd.grad(reference, p)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)
    for (_, m), before in zip(h2tune_modules(model), values_before):  # the offset never changed T's value
        torch.testing.assert_close(m.lora_T["default"].detach(), before)


def test_training_the_relation_matrix_keeps_middle_equal_to_its_mixture(tmp_path):
    """With only P_c trainable, after each optimiser step M̃ is exactly P_cᵀ·G for the updated P_c."""
    from hf_ext.h2tune.model import get_middle
    from hf_ext.h2tune.testing import relation_trainer

    model, relation, g = _relation_setup()
    for p in model.parameters():
        p.requires_grad_(False)
    before = relation.weight.detach().clone()
    trainer = relation_trainer(model, relation, g, tmp_path)
    trainer.train()
    assert (relation.weight.detach() - before).abs().max() > 1e-3
    torch.testing.assert_close(get_middle(model).double(), relation.download(g).float().double(), rtol=1e-5, atol=1e-6)


def test_kept_scores_get_the_straight_through_gradient_and_the_rest_none():
    """∂L/∂S at the top-k positions is ∂L/∂T ⊙ T (values unchanged).

    Other scores and the fixed-block ablation get none.
    """
    ids = tiny_inputs(batch=2, length=8)["input_ids"]
    for sparsify in (True, False):
        model = make_adapter(tiny_config(sparsify=sparsify))
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        for _, m in h2tune_modules(model):
            s_grad = m.lora_S["default"].grad
            if not sparsify:
                assert s_grad is None or not s_grad.any()
                continue
            t, idx = m.lora_T["default"], m.lora_idx["default"]
            expected = torch.zeros(s_grad.numel())
            expected[idx] = (t.grad * t.detach()).reshape(-1)
            torch.testing.assert_close(s_grad.reshape(-1), expected)
            assert s_grad.reshape(-1)[idx].abs().max() > 0


class _OneDevicePerOp(torch.overrides.TorchFunctionMode):
    """Fails any op whose tensor operands (0-dim scalars aside, which CUDA also accepts from the CPU) sit on more than
    one device; `.to` / `copy_` are the moves themselves. With the model on the meta device this finds, on the CPU,
    the device mixes a GPU run would raise on."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") not in ("to", "copy_", "__get__", "__set__"):
            leaves = torch.utils._pytree.tree_leaves((args, kwargs))
            devices = {t.device for t in leaves if isinstance(t, torch.Tensor) and t.dim() > 0}
            assert len(devices) <= 1, f"{getattr(func, '__name__', func)} mixes devices {devices}"
        return func(*args, **kwargs)


def test_a_cpu_relation_matrix_meets_a_model_on_another_device():
    """On a GPU, `Trainer` moves the model while P_c (outside it), G and a restored T_prev stay on the CPU. The
    model goes to the meta device here as the GPU's stand-in: the relation path, the norm penalty and the T-KL term
    must each compute on the layer's device, never mixing the two."""
    from hf_ext.h2tune.model import relation_path

    model, relation, g = _relation_setup()
    prev = previous_t(model)  # on the CPU, as after a client restored its saved state
    model = model.to("meta")
    shared = shared_parameters(model) + [relation.weight]
    with _OneDevicePerOp():
        penalty = norm_penalty(shared)
        kl = t_kl(model, prev)
        with relation_path(model, relation.weight, g):
            offsets = [m.h2tune_t_offset["default"] for _, m in h2tune_modules(model)]
    assert penalty.device.type == kl.device.type == "meta"
    assert offsets and all(o.device.type == "meta" for o in offsets)
    assert relation.weight.device.type == "cpu"  # P_c itself stays where its optimiser state is
