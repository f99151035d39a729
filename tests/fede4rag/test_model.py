"""The retriever: pooling, the frozen-layer cache, MiniLM through AutoModel, and the Hub artifact that transformers
and sentence-transformers both load."""

import numpy as np
import pytest
import torch

from hf_ext.fede4rag import FedE4RAGConfig, FedE4RAGRetriever
from hf_ext.fede4rag.modeling_fede4rag import pool_tokens
from hf_ext.fede4rag.testing import tiny_config, tiny_inputs, tiny_retriever

TEXTS = [
    "What was PepsiCo's net revenue growth in 2022?",
    "Boeing delivered 480 commercial airplanes in 2022.",
    "AES operating margin increased by $108 million.",
]


def test_masked_mean_pooling_ignores_padding_and_the_released_pooling_does_not():
    states = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.allclose(pool_tokens(states, mask, "mean"), torch.tensor([[2.0, 3.0]]))
    assert torch.allclose(pool_tokens(states, mask, "mean_unmasked"), torch.tensor([[104 / 3, 106 / 3]]))
    assert torch.allclose(pool_tokens(states, mask, "cls"), torch.tensor([[1.0, 2.0]]))
    # masked: a text's vector does not depend on how much padding its batch needed
    model = tiny_retriever()
    ids = torch.randint(1, 100, (1, 5), generator=torch.Generator().manual_seed(0))
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], 1)
    pad_mask = torch.cat([torch.ones(1, 5), torch.zeros(1, 4)], 1).long()
    with torch.no_grad():
        alone = model(input_ids=ids).pooler_output
        batched = model(input_ids=padded, attention_mask=pad_mask).pooler_output
    assert torch.allclose(alone, batched, atol=1e-5)
    assert torch.allclose(alone.norm(dim=-1), torch.ones(1))


def test_cached_lower_layers_give_the_full_forward():
    model, inputs = tiny_retriever(), tiny_inputs()
    with torch.no_grad():
        full = model(**inputs).pooler_output
        hidden = model.lower_hidden_states(inputs["input_ids"], inputs["attention_mask"], 1)
        cached = model(hidden_states=hidden, attention_mask=inputs["attention_mask"], start_layer=1).pooler_output
    assert torch.allclose(full, cached, atol=1e-6)
    with pytest.raises(ValueError, match="start_layer"):
        model(input_ids=inputs["input_ids"], start_layer=1)
    with pytest.raises(ValueError, match="width"):
        model(hidden_states=torch.zeros(1, 3, 7), start_layer=1)


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="pooling"):
        tiny_config(pooling="max")
    with pytest.raises(ValueError, match="max_passage_length"):
        tiny_config(max_passage_length=10_000)


@pytest.fixture(scope="module")
def minilm():
    from hf_ext.fede4rag.encoder import load_pretrained_retriever

    return load_pretrained_retriever()


def test_minilm_through_automodel_matches_sentence_transformers(minilm):
    from sentence_transformers import SentenceTransformer

    from hf_ext.fede4rag.encoder import encode_texts, minilm_path

    model, tokenizer = minilm
    ours = encode_texts(model, tokenizer, TEXTS)
    reference = SentenceTransformer(str(minilm_path()), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_lora_retriever_saves_as_one_artifact_for_transformers_and_sentence_transformers(minilm, tmp_path):
    import copy

    from peft import get_peft_model
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from hf_ext.fede4rag.encoder import encode_texts, lora_config, save_retriever

    model, tokenizer = minilm
    peft_model = get_peft_model(copy.deepcopy(model), lora_config(4, layers=[5]))
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("layer.5." in n and "lora_" in n for n in trainable)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)  # a trained-looking adapter, so the merge matters
    expected = encode_texts(peft_model, tokenizer, TEXTS)
    assert np.abs(expected - encode_texts(model, tokenizer, TEXTS)).max() > 1e-3
    save_retriever(peft_model, tokenizer, tmp_path / "r")
    reloaded = AutoModel.from_pretrained(tmp_path / "r")
    assert type(reloaded) is FedE4RAGRetriever and isinstance(reloaded.config, FedE4RAGConfig)
    np.testing.assert_allclose(encode_texts(reloaded, tokenizer, TEXTS), expected, atol=1e-5)
    st = SentenceTransformer(str(tmp_path / "r"), device="cpu")
    np.testing.assert_allclose(st.encode(TEXTS), expected, atol=1e-5)
    unmasked = copy.deepcopy(model)
    unmasked.config.pooling = "mean_unmasked"
    with pytest.raises(ValueError, match="masked mean pooling"):
        save_retriever(unmasked, tokenizer, tmp_path / "bad")


def test_sentence_transformers_loads_the_saved_retriever_without_hf_ext_or_remote_code(minilm, tmp_path):
    """Issue 36: `SentenceTransformer(path)` in a process that never imports hf_ext (and passes no
    `trust_remote_code`) gives the embeddings hf_ext computes, for a retriever with a trained-looking LoRA merged."""
    import copy
    import json
    import os
    import subprocess
    import sys

    from peft import get_peft_model

    from hf_ext.fede4rag.encoder import encode_texts, lora_config, save_retriever

    model, tokenizer = minilm
    peft_model = get_peft_model(copy.deepcopy(model), lora_config(4, layers=[5]))
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    expected = encode_texts(peft_model, tokenizer, TEXTS)
    save_retriever(peft_model, tokenizer, tmp_path / "r")
    modules = json.loads((tmp_path / "r" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((tmp_path / "r" / "0_Transformer" / "config.json").read_text())["model_type"] == "bert"
    assert json.loads((tmp_path / "r" / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"]
    assert json.loads((tmp_path / "r" / "config.json").read_text())["model_type"] == "hf_ext_fede4rag"
    code = (
        "import json, sys\n"
        "from sentence_transformers import SentenceTransformer\n"
        f"st = SentenceTransformer({str(tmp_path / 'r')!r}, device='cpu')\n"
        f"emb = st.encode({TEXTS!r})\n"
        "assert not any(m == 'hf_ext' or m.startswith('hf_ext.') for m in sys.modules), 'hf_ext was imported'\n"
        "print(json.dumps(emb.tolist()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # hf_ext not importable from the checkout
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = np.asarray(json.loads(proc.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(got, expected, atol=1e-5)
