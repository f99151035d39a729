"""Smaller bases derived from SmolLM2-135M-Instruct: layer-dropped, then healed by a short distillation from the full
model, cached. Client-model name `smollm2-L<N>` (e.g. `smollm2-L10`): keep the first ⌈N/2⌉ and the last ⌊N/2⌋ of
the 30 decoder blocks (dropping the middle hurt least of the prunings measured: sentence CE 6.7 vs 12.2 for every
second block and 17.7 for the first 15, against 3.19 unpruned), then distil for `heal_steps` steps
(KL(teacher ‖ student) on the next-token distributions of a small fixed corpus: plain sums as chat turns and a few
sentences; AdamW lr 1e-4).

The derived model is a plain `LlamaForCausalLM` folder (with SmolLM2's tokenizer) under `cache_dir`, keyed by the
kept blocks, the healing steps and a hash of the recipe; it is written atomically.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

DERIVED_RE = re.compile(r"^smollm2-L(\d+)$")
SMOLLM2_LAYERS = 30
HEAL = {"lr": 1e-4, "batch": 8, "max_len": 64, "seed": 0}
# healing text: plain sums (not the clients' mod-10 tasks; the tiny bases pretrain on the same) and plain sentences,
# so the student keeps both; the sums are posed as chat turns when the tokenizer has a chat template, the form the
# clients' prompts take (data.TokenizerCodec)
HEAL_SUMS = [(f"{a}+{b}=", str(a + b)) for a in range(10) for b in range(10)]
HEAL_TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "Federated learning trains one model on many devices.",
    "Paris is the capital of France.",
    "Water boils at one hundred degrees Celsius.",
    "A matrix has rows and columns.",
    "The sum of two and three is five.",
]


def is_derived(name: str) -> bool:
    return bool(DERIVED_RE.match(name or ""))


def kept_layers(name: str) -> list[int]:
    """The SmolLM2 blocks a `smollm2-L<N>` base keeps: the first ⌈N/2⌉ and the last ⌊N/2⌋."""
    match = DERIVED_RE.match(name)
    if match is None:
        raise ValueError(f"{name!r} is not a derived SmolLM2 name (smollm2-L<N>, 1 <= N <= {SMOLLM2_LAYERS})")
    n = int(match.group(1))
    if not 1 <= n <= SMOLLM2_LAYERS:
        raise ValueError(f"{name!r}: N must lie in [1, {SMOLLM2_LAYERS}]")
    head = (n + 1) // 2
    return list(range(head)) + list(range(SMOLLM2_LAYERS - (n - head), SMOLLM2_LAYERS))


def drop_layers(model, keep: list[int]):
    """`model` (a Llama decoder, changed in place) with only the blocks `keep`, renumbered for the KV cache."""
    from torch import nn

    layers = model.model.layers
    model.model.layers = nn.ModuleList([layers[i] for i in keep])
    for new, block in enumerate(model.model.layers):
        if hasattr(block.self_attn, "layer_idx"):
            block.self_attn.layer_idx = new
    model.config.num_hidden_layers = len(keep)
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = [model.config.layer_types[i] for i in keep]
    return model


def heal_texts(tokenizer) -> list[str]:
    """The healing corpus as text: [`HEAL_SUMS`] (as user/assistant chat turns when `tokenizer` has a chat template,
    else `a+b=c`) and [`HEAL_TEXT`]."""
    if getattr(tokenizer, "chat_template", None):
        sums = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": q}, {"role": "assistant", "content": a}], tokenize=False
            )
            for q, a in HEAL_SUMS
        ]
    else:
        sums = [q + a for q, a in HEAL_SUMS]
    return sums + HEAL_TEXT


def derived_path(name: str, heal_steps: int, cache_dir: str | Path) -> Path:
    keep = kept_layers(name)
    recipe = {"keep": keep, "heal": HEAL, "sums": HEAL_SUMS, "text": HEAL_TEXT, "steps": heal_steps, "chat": True}
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    return Path(cache_dir) / f"smollm2-L{len(keep)}-heal{heal_steps}-{digest}"


def distill_loss(student, teacher, batch) -> "torch.Tensor":  # noqa: F821, UP037 (torch is imported lazily)
    """Mean over real tokens of KL(teacher ‖ student) of the next-token distributions."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        t_logits = teacher(**batch).logits
    s_logits = student(**batch).logits
    mask = batch["attention_mask"].bool()
    return F.kl_div(
        F.log_softmax(s_logits[mask], -1), F.log_softmax(t_logits[mask], -1), log_target=True, reduction="batchmean"
    )


def derive_smollm2(name: str, heal_steps: int, cache_dir: str | Path):
    """`(model, tokenizer)` of the derived base `name` (`smollm2-L<N>`), made and cached on first use."""
    import copy

    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from hf_ext.core.hub import atomic_write_dir
    from hf_ext.core.pretrained import load_smollm2

    folder = derived_path(name, heal_steps, cache_dir)
    if (folder / "config.json").is_file():
        return LlamaForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    from hf_ext.core.devices import torch_device

    device = torch_device()  # `--device` ($HF_EXT_DEVICE): the healing runs where the federations will
    teacher, tokenizer = load_smollm2()
    teacher = teacher.to(device)
    student = drop_layers(copy.deepcopy(teacher), kept_layers(name)).train()
    opt = torch.optim.AdamW(student.parameters(), lr=HEAL["lr"])
    gen = torch.Generator().manual_seed(HEAL["seed"])
    texts = heal_texts(tokenizer)
    for _ in range(heal_steps):
        idx = torch.randint(len(texts), (HEAL["batch"],), generator=gen).tolist()
        batch = tokenizer(
            [texts[i] for i in idx],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=HEAL["max_len"],
            add_special_tokens=False,
        )
        loss = distill_loss(student, teacher, {k: v.to(device) for k, v in batch.items()})
        opt.zero_grad()
        loss.backward()
        opt.step()
    student.eval()

    def write(tmp: Path) -> None:
        student.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    atomic_write_dir(folder, write)
    return student, tokenizer


__all__ = ["derive_smollm2", "derived_path", "distill_loss", "drop_layers", "heal_texts", "is_derived", "kept_layers"]
