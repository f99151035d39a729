"""The frozen parts TinyAlign composes, built from tiny configs in code and trained here on the memory split only
(nothing is downloaded): a ConvNeXt digit classifier whose backbone becomes the vision encoder, and two Llama LMs of
different sizes pretrained text-only on the memory captions. Cached under `runs/tinyalign/cache/`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from hf_ext.core.paths import work_dir

from .processing_tinyalign import PROMPT

CACHE_DIR = work_dir("tinyalign", "cache")

VISION_CONFIG = {
    "model_type": "convnext",
    "num_channels": 1,
    "patch_size": 2,
    "num_stages": 1,
    "hidden_sizes": [64],
    "depths": [2],
    "image_size": 8,
}
# The small/large pair tests the paper's claim that a small LM bottlenecks alignment.
LM_CONFIGS = {
    "small": {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 512,
    },
    "large": {
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 512,
    },
}


def _key(*parts) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


def _config(d: dict):
    from transformers import AutoConfig

    d = dict(d)
    return AutoConfig.for_model(d.pop("model_type"), **d)


def pretrain_vision_encoder(
    memory, steps: int = 300, seed: int = 0, cache_dir: Path | None = CACHE_DIR, vision_config: dict = VISION_CONFIG
) -> tuple[dict, dict]:
    """Trains a ConvNeXt classifier on the memory split's digit labels; returns `(backbone state dict, info)`."""
    from transformers import ConvNextForImageClassification

    folder = cache_dir / f"vision-{_key(vision_config, steps, seed, len(memory))}" if cache_dir else None
    if folder is not None and (folder / "model.safetensors").is_file():
        clf = ConvNextForImageClassification.from_pretrained(folder)
        return clf.convnext.state_dict(), json.loads((folder / "info.json").read_text())
    torch.manual_seed(seed)
    clf = ConvNextForImageClassification(_config({**vision_config, "num_labels": 10}))
    x = torch.tensor(memory["pixel_values"])
    y = torch.tensor(memory["label"])
    opt = torch.optim.AdamW(clf.parameters(), lr=3e-3, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    clf.train()
    for _ in range(steps):
        idx = torch.randint(0, len(y), (64,), generator=g)
        loss = clf(pixel_values=x[idx], labels=y[idx]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    clf.eval()
    with torch.no_grad():
        acc = float((clf(pixel_values=x).logits.argmax(-1) == y).float().mean())
    info = {"memory_split_accuracy": acc, "steps": steps}
    if folder is not None:
        clf.save_pretrained(folder)
        (folder / "info.json").write_text(json.dumps(info))
    return clf.convnext.state_dict(), info


def pretrain_lm(
    size: str,
    tokenizer,
    memory_captions: list[str],
    steps: int = 400,
    seed: int = 0,
    cache_dir: Path | None = CACHE_DIR,
) -> tuple[dict, dict]:
    """A Llama LM of `size` ("small" / "large") trained text-only on `<s> prompt caption </s>` of the memory split.
    Returns `(state dict, info)`; `info["text_config"]` is the config dict to give `TinyAlignConfig`."""
    from transformers import LlamaForCausalLM

    text_config = {
        **LM_CONFIGS[size],
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    folder = cache_dir / f"lm-{size}-{_key(text_config, vocab, steps, seed, memory_captions)}" if cache_dir else None
    if folder is not None and (folder / "model.safetensors").is_file():
        lm = LlamaForCausalLM.from_pretrained(folder)
        return lm.state_dict(), json.loads((folder / "info.json").read_text())
    torch.manual_seed(seed)
    lm = LlamaForCausalLM(_config(text_config))
    rows = [
        [tokenizer.bos_token_id]
        + tokenizer(f"{PROMPT} {c}".lower(), add_special_tokens=False)["input_ids"]
        + [tokenizer.eos_token_id]
        for c in memory_captions
    ]
    n = max(map(len, rows))
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (n - len(r)) for r in rows])
    labels = torch.tensor([r + [-100] * (n - len(r)) for r in rows])
    opt = torch.optim.AdamW(lm.parameters(), lr=3e-3 if size == "small" else 1e-3)
    g = torch.Generator().manual_seed(seed)
    lm.train()
    for _ in range(steps):
        idx = torch.randint(0, len(rows), (64,), generator=g)
        loss = lm(input_ids=ids[idx], attention_mask=(labels[idx] != -100).long(), labels=labels[idx]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    lm.eval()
    with torch.no_grad():
        final = float(lm(input_ids=ids, attention_mask=(labels != -100).long(), labels=labels).loss)
    info = {
        "memory_caption_loss": final,
        "steps": steps,
        "text_config": text_config,
        "parameters": sum(p.numel() for p in lm.parameters()),
    }
    if folder is not None:
        lm.save_pretrained(folder)
        (folder / "info.json").write_text(json.dumps(info))
    return lm.state_dict(), info
