"""The local objective (closed form) and one Trainer step with a LoRA adapter and the KD teacher."""

import pytest
import torch
import torch.nn.functional as F

from hf_ext.fede4rag.trainer import kd_contrastive_loss, similarity, split_sides


def test_loss_is_contrastive_plus_lambda_mse():
    g = torch.Generator().manual_seed(0)
    q, p = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    sim = similarity(q, p)
    manual = F.normalize(q, dim=-1) @ F.normalize(p, dim=-1).T
    assert torch.allclose(sim, manual)
    teacher = sim + 0.1 * torch.randn(4, 4, generator=g)
    loss, parts = kd_contrastive_loss(sim, teacher, kd_lambda=100.0)
    ce = -torch.log_softmax(sim, dim=1).diag().mean()  # no temperature, as the code
    mse = ((sim - teacher) ** 2).mean()
    assert loss.item() == pytest.approx((ce + 100 * mse).item(), rel=1e-6)
    assert parts["kd"] == pytest.approx(mse.item(), rel=1e-6)
    alone, parts0 = kd_contrastive_loss(sim, None)
    assert alone.item() == pytest.approx(ce.item(), rel=1e-6) and "kd" not in parts0
    assert kd_contrastive_loss(sim, sim.clone())[1]["kd"] == 0.0
    with pytest.raises(ValueError, match="square"):
        kd_contrastive_loss(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="q_"):
        split_sides({"x_input_ids": torch.zeros(1)})


def _train_tiny(tmp_path, kd_lambda: float, steps: int = 4):
    """`steps` Trainer steps of a LoRA adapter on the tiny retriever, from a fixed init and a fixed batch of 8; returns
    the model, its (frozen, pre-training) teacher, the trainer, the frozen base weights and the adapter before."""
    from datasets import Dataset
    from peft import get_peft_model

    from hf_ext.fede4rag.encoder import lora_config
    from hf_ext.fede4rag.testing import VOCAB, tiny_retriever
    from hf_ext.fede4rag.trainer import FedE4RAGTrainer, FedE4RAGTrainingArguments, TokenPairCollator, frozen_teacher

    g = torch.Generator().manual_seed(1)
    ds = Dataset.from_dict(
        {
            "q_input_ids": torch.randint(1, VOCAB, (8, 5), generator=g).tolist(),
            "p_input_ids": torch.randint(1, VOCAB, (8, 9), generator=g).tolist(),
        }
    )
    base = tiny_retriever()
    frozen_before = {n: p.detach().clone() for n, p in base.named_parameters()}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the same LoRA A for both λ
        model = get_peft_model(base, lora_config(4, layers=[1]))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:  # B = 0 would make student and teacher identical at every step's start
                p.normal_(0, 0.1, generator=g)
    teacher = frozen_teacher(model)
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    args = FedE4RAGTrainingArguments(
        output_dir=str(tmp_path / f"kd{kd_lambda:g}"),
        use_cpu=True,
        report_to="none",
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=5e-2,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        kd_lambda=kd_lambda,
        weight_decay=0.0,
    )
    trainer = FedE4RAGTrainer(
        model=model, args=args, train_dataset=ds, teacher=teacher, data_collator=TokenPairCollator()
    )
    trainer.train()
    batch = TokenPairCollator()([ds[i] for i in range(len(ds))])
    return model, teacher, trainer, frozen_before, lora_before, batch


def _sim(model, batch) -> torch.Tensor:
    from hf_ext.fede4rag.trainer import SIDES

    model.eval()
    with torch.no_grad():
        sides = split_sides(batch)
        return similarity(*(model(**sides[s]).pooler_output for s in SIDES))


def test_trainer_step_moves_only_the_adapter_and_kd_pulls_towards_the_teacher(tmp_path):
    model, teacher, trainer, frozen_before, lora_before, batch = _train_tiny(tmp_path, kd_lambda=100.0)
    assert trainer.state.global_step == 4 and set(trainer.last_parts) == {"contrastive", "kd"}
    assert trainer.last_parts["kd"] > 0
    assert all(not torch.equal(lora_before[n], p) for n, p in model.named_parameters() if p.requires_grad)
    base_after = dict(model.get_base_model().named_parameters())
    for name, before in frozen_before.items():
        key = (
            name
            if name in base_after
            else name.replace(".weight", ".base_layer.weight").replace(".bias", ".base_layer.bias")
        )
        assert torch.equal(base_after[key], before), name
    assert all(not p.requires_grad for p in teacher.parameters())
    # "pulls towards the teacher": same init, data and steps, λ = 0 vs λ = 100; the teacher is the same frozen
    # pre-training model in both runs, so the KD run's similarity matrix must end closer to it.
    plain, teacher0, trainer0, *_, batch0 = _train_tiny(tmp_path, kd_lambda=0.0)
    assert set(trainer0.last_parts) == {"contrastive"}
    t_sim = _sim(teacher, batch)
    assert torch.equal(t_sim, _sim(teacher0, batch0))  # both runs start from the same model and see the same batch
    mse_kd = F.mse_loss(_sim(model, batch), t_sim).item()
    mse_plain = F.mse_loss(_sim(plain, batch0), t_sim).item()
    assert mse_plain > 0 and mse_kd < 0.5 * mse_plain, (mse_kd, mse_plain)
