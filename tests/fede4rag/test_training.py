"""The local objective (closed form) and one Trainer step with a LoRA adapter and the KD teacher."""


import pytest
import torch
import torch.nn.functional as F

from hf_ext.fede4rag.training import kd_contrastive_loss, similarity, split_sides


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


def test_trainer_step_moves_only_the_adapter_and_kd_pulls_towards_the_teacher(tmp_path):
    from datasets import Dataset
    from peft import get_peft_model

    from hf_ext.fede4rag.encoder import lora_config
    from hf_ext.fede4rag.testing import VOCAB, tiny_retriever
    from hf_ext.fede4rag.training import (FedE4RAGTrainer, FedE4RAGTrainingArguments, TokenPairCollator,
                                          frozen_teacher)

    g = torch.Generator().manual_seed(1)
    ds = Dataset.from_dict({"q_input_ids": torch.randint(1, VOCAB, (8, 5), generator=g).tolist(),
                            "p_input_ids": torch.randint(1, VOCAB, (8, 9), generator=g).tolist()})
    base = tiny_retriever()
    frozen_before = {n: p.detach().clone() for n, p in base.named_parameters()}
    model = get_peft_model(base, lora_config(4, layers=[1]))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    teacher = frozen_teacher(model)
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    args = FedE4RAGTrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=3,
                                     per_device_train_batch_size=8, learning_rate=5e-2, save_strategy="no",
                                     disable_tqdm=True, seed=0, kd_lambda=100.0, weight_decay=0.0)
    trainer = FedE4RAGTrainer(model=model, args=args, train_dataset=ds, teacher=teacher,
                              data_collator=TokenPairCollator())
    trainer.train()
    assert trainer.state.global_step == 3 and set(trainer.last_parts) == {"contrastive", "kd"}
    assert trainer.last_parts["kd"] > 0
    assert all(not torch.equal(lora_before[n], p) for n, p in model.named_parameters() if p.requires_grad)
    base_after = dict(model.get_base_model().named_parameters())
    for name, before in frozen_before.items():
        key = name if name in base_after else name.replace(".weight", ".base_layer.weight").replace(
            ".bias", ".base_layer.bias")
        assert torch.equal(base_after[key], before), name
    assert all(not p.requires_grad for p in teacher.parameters())
