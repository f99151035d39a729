"""The shortcuts that keep `hf-ext reproduce h2tune` fast give the results of the plain code: batched greedy decoding
(`data.greedy_batch`, what `exact_match` runs) answers as one-prompt `greedy` does, the Trainer's layer list and
FLOP count are those it would look up each step, and the layer's cheap finiteness test refuses what the full one did."""

from __future__ import annotations

import os
import random

import pytest
import torch
from torch import nn
from transformers import Trainer

from hf_ext.h2tune import data
from hf_ext.h2tune.data import EOS, OFFSET, exact_match, greedy, greedy_batch, make_example
from hf_ext.h2tune.model import h2tune_modules
from hf_ext.h2tune.testing import _trainer, make_adapter, tiny_config


def _trained_like_adapter():
    model = make_adapter(tiny_config())  # init_lora_weights=False: B is not zero, the adapter changes the logits
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model


def _prompts():
    rng = random.Random(0)
    # every task: prompts of several token lengths, decoded side by side
    return [make_example(task, rng.randrange(10), rng.randrange(10), rng) for task in data.TASKS for _ in range(4)]


def test_greedy_batch_answers_as_greedy_does(monkeypatch):
    model = _trained_like_adapter()
    pairs = _prompts()
    budgets = [1 + i % 3 for i in range(len(pairs))]
    want = [greedy(model, p, n) for (p, _), n in zip(pairs, budgets)]
    assert len({len(data.encode(p)) for p, _ in pairs}) > 1 and len(set(want)) > 1  # mixed lengths and answers
    assert greedy_batch(model, [p for p, _ in pairs], budgets) == want
    # whichever way each row's token is taken (always alone, never alone), the answers are the same here
    for margin in (float("inf"), -1.0):
        monkeypatch.setattr(data, "BATCH_MARGIN", margin)
        assert greedy_batch(model, [p for p, _ in pairs], budgets) == want
    # exact_match counts what greedy answers: half the pairs carry the model's own answer
    own = [(p, w) for (p, _), w in zip(pairs, [greedy(model, p, 2) for p, _ in pairs])]
    mixed = own[::2] + pairs[1::2]
    expected = sum(greedy(model, p, 2) == a for p, a in mixed) / len(mixed)
    assert exact_match(model, mixed) == pytest.approx(expected) and expected > 0


class _BatchSensitive(nn.Module):
    """Logits whose top two tokens are 1e-5 apart and swap order when the batch has more than one row: the case where
    a batched kernel's rounding would change an arg-max."""

    device = torch.device("cpu")

    def forward(self, input_ids):
        logits = torch.zeros(*input_ids.shape, OFFSET + 10)
        first, second = OFFSET + 7, OFFSET + 3  # "7" and "3"
        logits[..., first] = 1.0
        logits[..., second] = 1.0 + (1e-5 if input_ids.shape[0] > 1 else -1e-5)
        logits[..., EOS] = 0.5
        return type("Out", (), {"logits": logits})()


def test_greedy_batch_decodes_close_rows_alone(monkeypatch):
    model = _BatchSensitive()
    prompts = ["1+2=", "3+4=", "5+6="]
    assert [greedy(model, p, 1) for p in prompts] == ["7"] * 3
    assert greedy_batch(model, prompts, [1] * 3) == ["7"] * 3  # the gap is under the margin: each row alone
    monkeypatch.setattr(data, "BATCH_MARGIN", 0.0)
    assert greedy_batch(model, prompts, [1] * 3) == ["3"] * 3  # trusting the batch here would change the answers


def test_trainer_keeps_the_layer_list_only_while_training(tmp_path):
    model = make_adapter(tiny_config())
    trainer = _trainer(model, tmp_path)
    callback = trainer.h2tune_callback
    walked = [m for _, m in h2tune_modules(model)]
    assert [m for _, m in callback.modules(model)] == walked and callback._h2tune_module_cache is None
    seen = []
    original = callback.modules

    def spy(m):
        out = original(m)
        seen.append(out)
        return out

    callback.modules = spy
    trainer.train()
    assert len(seen) >= 2 and all(s is seen[0] for s in seen)  # one list, looked up once, for the whole run
    assert [m for _, m in seen[0]] == walked
    assert callback._h2tune_module_cache is None and not callback._training  # dropped at the end of training


def test_trainer_flops_equal_the_trainer_count(tmp_path):
    model = make_adapter(tiny_config())
    trainer = _trainer(model, tmp_path)
    inputs = {"input_ids": torch.zeros(3, 7, dtype=torch.long)}
    want = Trainer.floating_point_ops(trainer, inputs)
    assert want > 0 and trainer.floating_point_ops(inputs) == want == trainer.floating_point_ops(inputs)
    assert trainer.floating_point_ops({"other": inputs["input_ids"]}) == 0
    trainer.train()  # what the run logs as total_flos: one step of 8 sequences of 12 tokens
    assert trainer.state.total_flos == pytest.approx(want / 21 * 8 * 12 * trainer.state.global_step)


def test_layer_refuses_non_finite_inputs_and_only_them():
    model = make_adapter(tiny_config()).eval()
    embeds = model.get_input_embeddings().weight.shape[1]
    with torch.no_grad():
        # finite, but so large that their sum overflows to inf: the element-wise test still lets them through
        model(inputs_embeds=torch.full((1, 3, embeds), 3e38))
        for bad in (float("nan"), float("inf"), float("-inf")):
            x = torch.zeros(1, 3, embeds)
            x[0, 1, 2] = bad
            with pytest.raises(ValueError, match="NaN/Inf"):
                model(inputs_embeds=x)


def test_cached_base_is_loaded_once_and_handed_out_as_copies(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    from hf_ext.h2tune import bases
    from hf_ext.h2tune.task import ClientSpec, RunConfig, pretrained_base
    from hf_ext.h2tune.testing import tiny_base, tiny_base_config

    spec = ClientSpec("c", "gpt2", 1, 16, 4, "fill_in")
    run = RunConfig(pretrain_steps=1, cache_dir=str(tmp_path))

    def base():
        return tiny_base(tiny_base_config(spec.family, spec.layers, spec.hidden, data.VOCAB_SIZE), seed=1)

    trained = pretrained_base(base(), spec, run, init_seed=1)  # trains and writes the cache folder
    loads = []
    real = AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", lambda *a, **k: loads.append(a) or real(*a, **k))
    first = pretrained_base(base(), spec, run, init_seed=1)
    with torch.no_grad():
        for p in first.parameters():
            p.add_(1.0)  # a caller trains its copy in place
    second = pretrained_base(base(), spec, run, init_seed=1)
    assert len(loads) == 1 and second is not first
    for (name, a), (_, b) in zip(trained.state_dict().items(), second.state_dict().items()):
        assert torch.equal(a, b), name  # the files' weights, untouched by what the first caller did
    folder = next(p for p in tmp_path.iterdir() if not p.name.startswith("."))
    weights = next(f for f in folder.iterdir() if f.suffix == ".safetensors")
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a rewritten cache file is read again
    pretrained_base(base(), spec, run, init_seed=1)
    assert len(loads) == 2 and str(folder.resolve()) in bases._LOADED
