"""Composition from pretrained parts: an EfficientNet-Lite tower (random here; ImageNet in the slow test) and a causal
LM loaded by path, frozen; artifacts that reference the frozen parts instead of copying them, loaded in a fresh
process; the full save; memory tokens at the LM's embedding scale; frozen BatchNorm kept in eval mode."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from hf_ext.tinyalign import TinyAlignForConditionalGeneration
from hf_ext.tinyalign.configuration_tinyalign import TinyAlignEfficientNetConfig
from hf_ext.tinyalign.modeling_efficientnet import TinyAlignEfficientNetModel
from hf_ext.tinyalign.processing_tinyalign import (
    TinyAlignImageProcessor,
    TinyAlignProcessor,
    build_memory_bank,
    build_tokenizer,
)
from hf_ext.tinyalign.testing import TINY_CAPTIONS, tiny_data

ROOT = Path(__file__).resolve().parents[2]
IMAGE = 32  # EfficientNet-Lite at 32 px: one visual token of width 1280


def _parts(folder: Path):
    """A random EfficientNet-Lite0 tower and a tiny Llama, saved as `from_pretrained` folders."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    tower = TinyAlignEfficientNetModel(TinyAlignEfficientNetConfig(image_size=IMAGE))
    tower.save_pretrained(folder / "tower")
    tok = build_tokenizer(TINY_CAPTIONS)
    lm = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=128,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
    )
    lm.save_pretrained(folder / "lm")
    return tok


def _compose(folder: Path, **kwargs):
    tok = _parts(folder)
    model = TinyAlignForConditionalGeneration.from_pretrained_parts(
        str(folder / "tower"),
        str(folder / "lm"),
        image_size=IMAGE,
        memory_top_k=2,
        value_num_latents=4,
        value_latent_dim=8,
        value_d_model=16,
        value_num_self_attends=1,
        value_num_heads=2,
        **kwargs,
    )
    proc = TinyAlignProcessor(
        TinyAlignImageProcessor(size=IMAGE, num_channels=3, image_mean=[0.5] * 3, image_std=[0.25] * 3),
        tok,
        model.config.num_image_tokens,
        model.config.num_memory_tokens,
    )
    proc.check_config(model.config)
    data = tiny_data(8, seed=5)
    build_memory_bank(model, proc, data, batch_size=8, progress=False)
    return model, proc


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parts")
    model, proc = _compose(folder)
    return folder, model, proc


def _inputs(proc):
    rows = tiny_data(3, seed=9)
    return proc(rows["pixel_values"], rows["caption"])


FRESH = """
import json, sys, torch
from transformers import AutoModelForImageTextToText, AutoProcessor, AutoImageProcessor
import hf_ext  # noqa: F401  (registration only; nothing else of hf_ext is used)
model = AutoModelForImageTextToText.from_pretrained(sys.argv[1]).eval()
proc = AutoProcessor.from_pretrained(sys.argv[1])
assert type(AutoImageProcessor.from_pretrained(sys.argv[1])).__name__ == "TinyAlignImageProcessor"
batch = proc(torch.load(sys.argv[2])["pixel_values"], json.loads(sys.argv[3]))
with torch.no_grad():
    out = model(**batch)
torch.save({"logits": out.logits, "ids": out.retrieved_ids, "input_ids": batch["input_ids"]}, sys.argv[4])
"""


def _fresh_process_outputs(artifact: Path, tmp: Path, rows) -> dict:
    """Loads `artifact` with the Auto classes in a new interpreter (nothing registered beforehand)."""
    torch.save({"pixel_values": torch.tensor(rows["pixel_values"])}, tmp / "px.pt")
    subprocess.run(
        [
            sys.executable,
            "-c",
            FRESH,
            str(artifact),
            str(tmp / "px.pt"),
            json.dumps(list(rows["caption"])),
            str(tmp / "out.pt"),
        ],
        check=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    return torch.load(tmp / "out.pt")


def test_parts_are_the_pretrained_ones_frozen_and_referenced(composed):
    folder, model, _ = composed
    lm = __import__("transformers").AutoModelForCausalLM.from_pretrained(folder / "lm")
    torch.testing.assert_close(
        model.language_model.model.layers[0].mlp.up_proj.weight, lm.model.layers[0].mlp.up_proj.weight, rtol=0, atol=0
    )  # not re-initialised
    assert model.config.num_image_tokens == 1 and model.config.vision_config.model_type == "hf_ext_efficientnet_lite"
    assert model.config.vision_model_name_or_path == str(folder / "tower")
    assert model.config.text_model_name_or_path == str(folder / "lm")
    trainable = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"connector", "connector2", "memory_scale"}


def test_referenced_artifact_saves_only_trained_parts_and_loads_in_a_fresh_process(composed, tmp_path):
    _, model, proc = composed
    model.save_pretrained(tmp_path / "ref")
    proc.save_pretrained(tmp_path / "ref")
    with safe_open(str(tmp_path / "ref" / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert keys and not any(k.startswith(("vision_tower.", "language_model.")) for k in keys)
    assert any(k.startswith("connector2.") for k in keys) and "memory_scale" in keys
    rows = tiny_data(3, seed=9)
    model.eval()
    with torch.no_grad():
        want = model(**proc(rows["pixel_values"], rows["caption"]))
    got = _fresh_process_outputs(tmp_path / "ref", tmp_path, rows)
    torch.testing.assert_close(got["logits"], want.logits)
    assert torch.equal(got["ids"], want.retrieved_ids)


def test_full_save_holds_every_weight_and_no_references(composed, tmp_path):
    from transformers import AutoModelForImageTextToText

    _, model, proc = composed
    model.save_pretrained(tmp_path / "full", save_frozen_parts=True)
    config = json.loads((tmp_path / "full" / "config.json").read_text())
    assert config["vision_model_name_or_path"] is None and config["text_model_name_or_path"] is None
    assert model.config.vision_model_name_or_path  # the live model keeps its references
    with safe_open(str(tmp_path / "full" / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert {k for k in model.state_dict() if k.startswith(("vision_tower.", "language_model.model."))} <= keys
    loaded = AutoModelForImageTextToText.from_pretrained(tmp_path / "full").eval()
    batch = _inputs(proc)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)


def test_referenced_part_that_does_not_fit_is_a_clear_error(composed, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    _, model, _ = composed
    model.save_pretrained(tmp_path / "ref")
    other = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=40,
            hidden_size=24,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    other.save_pretrained(tmp_path / "other")
    cfg = json.loads((tmp_path / "ref" / "config.json").read_text())
    cfg["text_model_name_or_path"] = str(tmp_path / "other")
    (tmp_path / "ref" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="language_model referenced as .* does not fit"):
        TinyAlignForConditionalGeneration.from_pretrained(tmp_path / "ref", hf_ext_strict=False)


def test_memory_tokens_start_at_the_token_embedding_scale(composed):
    _, model, proc = composed
    emb = float(model.get_input_embeddings().weight.norm(dim=-1).mean())
    assert float(model.memory_scale) == pytest.approx(emb, rel=1e-5)
    values = model.memory_bank.gather(torch.tensor([[0, 1], [2, 3]]))
    norms = model.memory_tokens(values).norm(dim=-1)
    torch.testing.assert_close(norms, torch.full_like(norms, emb))
    raw = model.connector2(values).norm(dim=-1)
    assert not torch.allclose(raw, norms, rtol=0.2)  # connector2 alone is off-scale: the norm does the work
    model.config.memory_token_norm = False
    try:
        torch.testing.assert_close(model.memory_tokens(values), model.connector2(values))
    finally:
        model.config.memory_token_norm = True


def test_frozen_batchnorm_tower_stays_in_eval_mode_while_training(composed):
    _, model, proc = composed
    bn = model.vision_tower.net._bn0
    before = bn.running_mean.clone()
    model.train()
    assert model.training and model.connector.training and not model.vision_tower.training
    out = model(**_inputs(proc))
    out.loss.backward()
    model.zero_grad()
    torch.testing.assert_close(bn.running_mean, before, rtol=0, atol=0)
    model.eval()


def test_precomputed_vision_features_give_the_same_outputs_and_generation(composed):
    _, model, proc = composed
    model.eval()
    batch = _inputs(proc)
    feats = model.image_features(batch["pixel_values"])
    rest = {k: v for k, v in batch.items() if k != "pixel_values"}
    with torch.no_grad():
        a, b = model(**batch), model(**rest, vision_features=feats)
        prompt = proc(tiny_data(3, seed=9)["pixel_values"])
        gen_a = model.generate(**prompt, max_new_tokens=3, do_sample=False)
        gen_b = model.generate(
            input_ids=prompt["input_ids"],
            attention_mask=prompt["attention_mask"],
            vision_features=feats,
            max_new_tokens=3,
            do_sample=False,
        )
    torch.testing.assert_close(a.logits, b.logits)
    assert torch.equal(gen_a, gen_b)
    with pytest.raises(ValueError, match="vision_features must be a float tensor of shape"):
        model(**rest, vision_features=feats[:, :, :7])


@pytest.mark.slow
def test_real_pretrained_pair_referenced_artifact_is_small_and_reloads(tmp_path):
    """EfficientNet-Lite0 (ImageNet) + SmolLM2-135M: the referenced artifact holds no frozen weight and reloads."""
    from hf_ext.core.pretrained import efficientnet_lite0_available, smollm2_available

    if not (smollm2_available() and efficientnet_lite0_available()):
        pytest.skip("the offline pretrained packages are not installed")
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from hf_ext.tinyalign.pretrained_parts import pretrained_tinyalign

    model, proc = pretrained_tinyalign(memory_top_k=1, value_num_latents=4)
    build_memory_bank(
        model, proc, tiny_data(4, seed=1).map(lambda r: {"pixel_values": r["pixel_values"][0]}), progress=False
    )
    model.save_pretrained(tmp_path)
    proc.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").stat().st_size < 30e6  # the LM alone is 540 MB in fp32
    loaded = AutoModelForImageTextToText.from_pretrained(tmp_path).eval()
    batch = AutoProcessor.from_pretrained(tmp_path)(tiny_data(2, seed=2)["pixel_values"], ["a thin one", "a wide"])
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model.eval()(**batch).logits)
