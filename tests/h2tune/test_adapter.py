"""H2Tune PEFT adapter: closed forms, families, save/load, merge, and the post-step write-back."""

from __future__ import annotations

import pytest
import torch
from peft import PeftModel, get_peft_model

import hf_ext.h2tune  # noqa: F401  (installs the config hook)
from hf_ext.h2tune import H2TuneConfig, H2TuneLinear, H2TuneVariant
from hf_ext.h2tune.layer import select_indices
from hf_ext.h2tune.model import get_middle, set_middle, sync_middle
from hf_ext.h2tune.testing import tiny_base, tiny_base_config, tiny_inputs

FAMILIES = ["llama", "qwen2", "gpt2"]


def _adapter(family, **overrides):
    kwargs = dict(r=4, global_rank=8, lora_dropout=0.0, task_type="CAUSAL_LM", init_lora_weights=False)
    kwargs.update(overrides)
    torch.manual_seed(0)
    return get_peft_model(tiny_base(tiny_base_config(family)), H2TuneConfig(**kwargs))


def _logits(model, inputs):
    model.eval()
    with torch.no_grad():
        return model(**inputs).logits


@pytest.mark.parametrize("family", FAMILIES)
def test_every_linear_is_wrapped_and_delta_matches_formula(family):
    model = _adapter(family)
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, H2TuneLinear)]
    assert len(layers) == {"llama": 14, "qwen2": 14, "gpt2": 8}[family]
    for _, m in layers:
        a, b, t = m.lora_A["default"].weight, m.lora_B["default"].weight, m.lora_T["default"]
        assert t.shape == (4, 4) and m.lora_S["default"].shape == (8, 8) and m.lora_lT["default"].shape == (8, 8)
        # T is exactly the top-k (k = r²) entries of the shared matrix, picked by S
        idx = torch.topk(m.lora_S["default"].detach().flatten(), 16).indices.sort().values
        assert torch.equal(m.lora_idx["default"], idx)
        assert torch.equal(t.detach().flatten(), m.lora_lT["default"].flatten()[idx])
        expected = (16 / 4) * b @ (t + torch.eye(4)) @ a  # (α/r)·B(T+I)A
        delta = H2TuneVariant.delta_weight(m, "default")
        torch.testing.assert_close(delta.T if m.fan_in_fan_out else delta, expected)
        # the layer's forward adds exactly ΔW·x
        x = torch.randn(3, a.shape[1])
        m.eval()
        with torch.no_grad():
            base = m.get_base_layer()(x)
            torch.testing.assert_close(m(x), base + x @ expected.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_save_plain_from_pretrained_and_merge(family, tmp_path):
    model, inputs = _adapter(family), tiny_inputs()
    before = _logits(model, inputs)
    model.save_pretrained(tmp_path)
    reloaded = PeftModel.from_pretrained(tiny_base(tiny_base_config(family)), tmp_path)  # no config= argument
    assert type(reloaded.peft_config["default"]) is H2TuneConfig
    assert any(isinstance(m, H2TuneLinear) for m in reloaded.modules())
    torch.testing.assert_close(_logits(reloaded, inputs), before, rtol=1e-6, atol=1e-6)
    merged = reloaded.merge_and_unload()
    assert not any(isinstance(m, H2TuneLinear) for m in merged.modules())
    torch.testing.assert_close(_logits(merged, inputs), before, rtol=1e-5, atol=1e-5)


def test_merge_unmerge_roundtrip():
    model, inputs = _adapter("llama"), tiny_inputs()
    unmerged = _logits(model, inputs)
    model.merge_adapter()
    torch.testing.assert_close(_logits(model, inputs), unmerged, rtol=1e-5, atol=1e-5)
    model.unmerge_adapter()
    torch.testing.assert_close(_logits(model, inputs), unmerged, rtol=1e-6, atol=1e-6)


def test_vanilla_lora_load_would_differ(tmp_path):
    """Guard for the reason the hook exists: loaded as plain LoRA, the same folder gives other logits."""
    from peft import LoraConfig

    model, inputs = _adapter("llama"), tiny_inputs()
    before = _logits(model, inputs)
    model.save_pretrained(tmp_path)
    cfg = LoraConfig(
        **{
            k: v
            for k, v in H2TuneConfig.from_json_file(str(tmp_path / "adapter_config.json")).items()
            if k in LoraConfig.__dataclass_fields__ and k != "peft_type"
        }
    )
    plain = PeftModel.from_pretrained(tiny_base(), tmp_path, config=cfg)
    assert not torch.allclose(_logits(plain, inputs), before, atol=1e-4)


def test_step_writes_back_and_reselects():
    model = _adapter("llama")
    name, m = next((n, m) for n, m in model.named_modules() if isinstance(m, H2TuneLinear))
    idx = m.lora_idx["default"].clone()
    with torch.no_grad():
        m.lora_T["default"].add_(1.0)  # what an optimiser step does to T
    sync_middle(model)
    assert torch.equal(m.lora_lT["default"].flatten()[idx], m.lora_T["default"].detach().flatten())
    # S changed so that a different block is selected: T is reloaded from the *updated* shared matrix
    with torch.no_grad():
        m.lora_S["default"].copy_(-m.lora_S["default"])
    written = m.lora_lT["default"].clone()
    t_param = m.lora_T["default"]
    sync_middle(model)
    new_idx = m.lora_idx["default"]
    assert not torch.equal(new_idx, idx)
    assert m.lora_T["default"] is t_param  # updated in place: the optimiser keeps its parameter
    assert torch.equal(m.lora_T["default"].detach().flatten(), written.flatten()[new_idx])


def test_no_sparsify_uses_fixed_leading_block_and_rank_checks():
    model = _adapter("llama", r=8, sparsify=False)  # r == R: T is the whole shared matrix (k = R²)
    m = next(m for m in model.modules() if isinstance(m, H2TuneLinear))
    assert torch.equal(m.lora_T["default"].detach(), m.lora_lT["default"])
    with pytest.raises(ValueError, match="global_rank"):
        H2TuneConfig(r=32, global_rank=16)
    small = _adapter("llama", r=4, sparsify=False)  # r < R: the leading 4×4 block, whatever S says
    m = next(m for m in small.modules() if isinstance(m, H2TuneLinear))
    assert torch.equal(m.lora_T["default"].detach(), m.lora_lT["default"][:4, :4])
    with torch.no_grad():
        m.lora_S["default"].copy_(torch.randn_like(m.lora_S["default"]))
    sync_middle(small)
    assert torch.equal(m.lora_T["default"].detach(), m.lora_lT["default"][:4, :4])
    assert select_indices(torch.zeros(4, 4), 2, sparsify=False).tolist() == [0, 1, 4, 5]
    assert select_indices(torch.arange(16.0).reshape(4, 4), 2).tolist() == [12, 13, 14, 15]


def test_get_set_middle_roundtrip():
    model = _adapter("qwen2")
    mid = get_middle(model)
    assert mid.shape == (2, 7, 8, 8)
    new = torch.randn_like(mid)
    set_middle(model, new)
    torch.testing.assert_close(get_middle(model), new)
