"""The inversion attack of the FL-LLaMA privacy analysis, and ROUGE.

A curious server colludes with client 0, which also hands over its raw token ids. The server trains a decoder
`D` = the last `attack_layers` LLaMA blocks (random init) + RMSNorm + `lm_head` with cross-entropy between `D(h̃_A)`
and the ids at the same positions, then decodes another client's `h̃_A` and the reconstruction is scored with
ROUGE-1/2/L F against that client's true text. Expected: ROUGE falls as the noise scale `s` and the depth `a` grow.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

from .modeling_fl_llama import causal_mask_4d, position_ids_from_mask, run_blocks


@functools.lru_cache(maxsize=1)
def _scorer():
    try:
        from rouge_score import rouge_scorer
    except ImportError as err:  # pragma: no cover - the fl_llama extra installs it
        raise ImportError("the inversion attack's ROUGE needs `rouge-score` (pip install 'hf_ext[fl_llama]')") from err
    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)


def rouge(prediction: str, reference: str) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F-measures from Google's `rouge-score` package (the ROUGE-1.5.5 re-implementation
    that HF `evaluate` uses; its tokeniser lower-cases and keeps `[a-z0-9]` runs; no stemming)."""
    if not isinstance(prediction, str) or not isinstance(reference, str):
        raise TypeError(f"rouge takes two strings, got {type(prediction).__name__} and {type(reference).__name__}")
    scores = _scorer().score(reference, prediction)  # rouge-score's order: (target, prediction)
    return {key: float(scores[key].fmeasure) for key in ("rouge1", "rouge2", "rougeL")}


class InversionDecoder(nn.Module):
    """`D`: `attack_layers` randomly initialised LLaMA blocks + RMSNorm + `lm_head`, mapping `h̃_A` to token logits.

    Args:
        llama_config (`LlamaConfig`): the split model's config (sizes).
        attack_layers (`int`): decoder blocks (random init, as in the official attack).
        seed (`int`): initialisation seed.
        vocab_ids (`torch.LongTensor`, *optional*): predict only these token ids (e.g. the colluding client's own
            vocabulary): a 49k-token head is most of the cost on CPU, and the attacker knows its own data.
        head_weight, norm_weight (`torch.Tensor`, *optional*): initial `lm_head` rows (all tokens; restricted to
            `vocab_ids`) and final-norm weight. A curious server splitting a *public* pretrained model knows them.
    """

    def __init__(self, llama_config, attack_layers: int = 1, seed: int = 0, vocab_ids: torch.Tensor | None = None,
                 head_weight: torch.Tensor | None = None, norm_weight: torch.Tensor | None = None):  # fmt: skip
        super().__init__()
        torch.manual_seed(seed)
        cfg = llama_config
        cfg._attn_implementation = "sdpa"
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg, i) for i in range(attack_layers))
        self.norm = LlamaRMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        vocab = cfg.vocab_size if vocab_ids is None else len(vocab_ids)
        self.lm_head = nn.Linear(cfg.hidden_size, vocab, bias=False)
        self.rotary = LlamaRotaryEmbedding(cfg)
        self.vocab_ids = None if vocab_ids is None else vocab_ids.long().clone()
        with torch.no_grad():
            if head_weight is not None:
                self.lm_head.weight.copy_(head_weight if vocab_ids is None else head_weight[self.vocab_ids])
            if norm_weight is not None:
                self.norm.weight.copy_(norm_weight)

    def to_local(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids as indices of the head (`-100`, ignored, for a token outside `vocab_ids`)."""
        if self.vocab_ids is None:
            return ids
        table = torch.full((int(max(ids.max(), self.vocab_ids.max())) + 1,), -100, dtype=torch.long)
        table[self.vocab_ids] = torch.arange(len(self.vocab_ids))
        return table[ids.clamp(min=0)].masked_fill(ids < 0, -100)

    def to_global(self, idx: torch.Tensor) -> torch.Tensor:
        return idx if self.vocab_ids is None else self.vocab_ids[idx]

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.bool()
        h = run_blocks(self.layers, self.rotary, hidden, causal_mask_4d(mask, mask.shape[1]),
                       position_ids_from_mask(mask))  # fmt: skip
        return self.lm_head(self.norm(h))


def train_inversion(decoder: InversionDecoder, hidden: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor,
                    steps: int = 200, batch_size: int = 16, lr: float = 2e-3,
                    seed: int = 0) -> list[float]:  # fmt: skip
    """Fits `D` on the colluding client's `(h̃_A, ids)` pairs (real tokens only)."""
    opt = torch.optim.AdamW(decoder.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    losses = []
    decoder.train()
    for _ in range(steps):
        idx = torch.randint(0, len(ids), (batch_size,), generator=g)
        logits = decoder(hidden[idx], mask[idx])
        target = decoder.to_local(ids[idx].masked_fill(~mask[idx].bool(), -100))
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=-100)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def reconstruct(decoder: InversionDecoder, hidden: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    """The decoder's arg-max token at every real position of each row."""
    decoder.eval()
    pred = decoder.to_global(decoder(hidden, mask).argmax(-1))
    return [row[m.bool()].tolist() for row, m in zip(pred, mask)]


def attack_rouge(decoder: InversionDecoder, tokenizer, hidden: torch.Tensor, ids: torch.Tensor,
                 mask: torch.Tensor) -> dict[str, float]:  # fmt: skip
    """Mean ROUGE-1/2/L F of the victim's reconstructed texts against its true texts."""
    recon = reconstruct(decoder, hidden, mask)
    scores = [rouge(tokenizer.decode(r), tokenizer.decode(t[m.bool()].tolist())) for r, t, m in zip(recon, ids, mask)]
    return {k: sum(s[k] for s in scores) / len(scores) for k in scores[0]}


__all__ = ["InversionDecoder", "attack_rouge", "reconstruct", "rouge", "train_inversion"]
