"""TinyAlign's memory: the fused key (attention pooling of visual and caption tokens), the frozen random Perceiver
that writes values, and the faiss inner-product bank saved next to the model weights in safetensors.

Self-contained (torch, transformers, faiss, safetensors): the modeling file imports it relatively, so it travels with
the model code to the Hub.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import PerceiverConfig
from transformers.models.perceiver import modeling_perceiver as mp

BANK_FILE = "memory_bank.safetensors"
BYTE_OFFSET = 6  # PerceiverTokenizer's byte ids start after 6 special tokens; 0 is its pad id


def attention_pool(
    visual: torch.Tensor, text: torch.Tensor, text_mask: torch.Tensor | None, alpha: float
) -> torch.Tensor:
    """The fused key/query of one image–text pair, batched: `k = wᵀF` with `F = [α·V̂ ; (1−α)·T̂]`,
    `A = softmax(F Fᵀ)` row-wise and `w` the mean of `A`'s rows.

    Args:
        visual (`torch.Tensor` of shape `(B, Nv, H)`): connector outputs; rows are L2-normalised here.
        text (`torch.Tensor` of shape `(B, Nt, H)`): LM token embeddings; rows are L2-normalised here.
        text_mask (`torch.Tensor` of shape `(B, Nt)`, *optional*): 1 for text tokens that take part (padding and
            excluded tokens are 0), so each row pools over its own `Nv + n_t` tokens only.
        alpha (`float`): weight of the visual part.

    Returns:
        `torch.Tensor` of shape `(B, H)`: the pooled vectors (not yet L2-normalised; the bank normalises).
    """
    v = nn.functional.normalize(visual, dim=-1) * alpha
    t = nn.functional.normalize(text, dim=-1) * (1.0 - alpha)
    f = torch.cat([v, t], dim=1)
    valid = torch.ones(f.shape[:2], dtype=torch.bool, device=f.device)
    if text_mask is not None:
        valid[:, visual.shape[1] :] = text_mask.bool()
    scores = f @ f.transpose(1, 2)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    attn = scores.softmax(dim=-1) * valid[:, :, None]  # rows of excluded tokens do not vote
    w = attn.sum(dim=1) / valid.sum(dim=1, keepdim=True)
    return torch.einsum("bn,bnh->bh", w, f)


def encode_caption_bytes(captions: list[str], length: int) -> torch.Tensor:
    """UTF-8 bytes shifted by 6 (PerceiverTokenizer's byte ids), truncated/padded with 0 to `length`."""
    out = torch.zeros(len(captions), length, dtype=torch.long)
    for i, caption in enumerate(captions):
        ids = [b + BYTE_OFFSET for b in caption.encode("utf-8")][:length]
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


class TinyAlignValueEncoder(nn.Module):
    """The value writer: transformers' Perceiver with a multimodal preprocessor (image: conv1x1 + trainable position
    encoding; text: byte embeddings) into `num_latents × latent_dim` latents. Random weights, frozen, eval mode, as in
    the released `build_memory_bank.py` (values are never trained; connector2 learns to read them)."""

    def __init__(self, config):
        super().__init__()
        d = config.value_d_model
        self.perceiver_config = PerceiverConfig(
            num_latents=config.value_num_latents,
            d_latents=config.value_latent_dim,
            d_model=d,
            num_blocks=1,
            num_self_attends_per_block=config.value_num_self_attends,
            num_self_attention_heads=config.value_num_heads,
            num_cross_attention_heads=config.value_num_heads,
            qk_channels=config.value_latent_dim,
            v_channels=config.value_latent_dim,
            image_size=config.image_size,
            max_position_embeddings=config.value_text_length,
            vocab_size=262,
        )
        pixels = config.image_size * config.image_size
        image = mp.PerceiverImagePreprocessor(
            self.perceiver_config,
            prep_type="conv1x1",
            spatial_downsample=1,
            in_channels=config.num_channels,
            out_channels=d // 2,
            position_encoding_type="trainable",
            concat_or_add_pos="concat",
            trainable_position_encoding_kwargs={"num_channels": d // 2, "index_dims": pixels},
        )
        text = mp.PerceiverTextPreprocessor(self.perceiver_config)
        self.perceiver = mp.PerceiverModel(
            self.perceiver_config,
            input_preprocessor=mp.PerceiverMultimodalPreprocessor(
                modalities={"image": image, "text": text}, min_padding_size=2
            ),
        )
        self.text_length = config.value_text_length
        self.requires_grad_(False)

    @torch.no_grad()
    def forward(self, pixel_values: torch.Tensor, captions: list[str]) -> torch.Tensor:
        """Values of shape `(B, num_latents, latent_dim)` for images `(B, C, S, S)` and their captions."""
        was_training = self.training
        self.eval()
        text = encode_caption_bytes(captions, self.text_length).to(pixel_values.device)
        out = self.perceiver(inputs={"image": pixel_values, "text": text}).last_hidden_state
        self.train(was_training)
        return out


class RetrievalCache:
    """Retrieved `(scores, ids)` per query row, for queries whose every input is frozen (stage 1: vision tower, LM
    embeddings and the retrieval connector frozen; the honest query). Then the query of an (image, prompt) pair is
    the same at every epoch, and so is its top-k: a hit skips the pooling and the faiss search and returns exactly
    what they would (no approximation, recall 1 against the search).

    A row's key is a hash of its visual features and of its query token ids. [`check`] drops every entry when the
    bank, `k`, or any weight the query reads changed (identity and in-place version counter of each tensor, which
    `load_state_dict`, optimiser steps and other in-place writes bump), so a stale hit cannot happen.
    """

    def __init__(self, max_entries: int = 1_000_000):
        self.max_entries = max_entries
        self.entries: dict[bytes, tuple[torch.Tensor, torch.Tensor]] = {}
        self.fingerprint = None
        self.hits = self.misses = 0

    def check(self, bank, k: int, modules) -> None:
        fingerprint = (
            id(bank),
            len(bank) if bank is not None else 0,
            k,
            tuple((id(p), p._version) for m in modules for p in m.parameters()),
        )
        if fingerprint != self.fingerprint:
            self.clear()
            self.fingerprint = fingerprint

    def clear(self) -> None:
        self.entries.clear()
        self.fingerprint = None

    @staticmethod
    def _keys(feats: torch.Tensor, input_ids: torch.Tensor, text_mask: torch.Tensor) -> list[bytes]:
        import hashlib

        f = feats.detach().float().cpu().contiguous().numpy()
        ids, mask = input_ids.cpu().numpy(), text_mask.cpu().numpy().astype(bool)
        return [
            hashlib.blake2b(f[i].tobytes() + ids[i][mask[i]].tobytes(), digest_size=16).digest()
            for i in range(f.shape[0])
        ]

    def lookup(self, feats, input_ids, text_mask):
        """`(scores, ids)` for the whole batch if every row is cached, else `None` (the batch is searched)."""
        keys = self._keys(feats, input_ids, text_mask)
        rows = [self.entries.get(key) for key in keys]
        if any(r is None for r in rows):
            self.misses += 1
            return None
        self.hits += 1
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])

    def store(self, feats, input_ids, text_mask, scores: torch.Tensor, ids: torch.Tensor) -> None:
        keys = self._keys(feats, input_ids, text_mask)
        if len(self.entries) + len(keys) > self.max_entries:
            self.entries.clear()
        for key, s, i in zip(keys, scores.cpu(), ids.cpu()):
            self.entries[key] = (s.clone(), i.clone())


FAISS_PIP = "pip install 'faiss-cpu>=1.15.1,<1.16'"


def _import_faiss():
    """faiss, imported on first use. Inside a `try` on purpose: transformers' remote-code import check skips `try`
    blocks, so a machine without faiss gets this message with the real pip name (`faiss-cpu`),
    not `pip install faiss`."""
    try:
        import faiss
    except ImportError as err:
        raise ImportError(f"TinyAlign's memory bank needs faiss, which is not installed: {FAISS_PIP}") from err
    return faiss


class MemoryBankError(ValueError):
    """A memory bank that does not fit the model or the request (width, emptiness, k)."""


class MemoryBank:
    """A faiss inner-product index over L2-normalised keys (cosine) with the values stacked in id order.

    Args:
        keys (`torch.Tensor` of shape `(N, H)`): pooled keys; normalised here.
        values (`torch.Tensor` of shape `(N, L, D)`): Perceiver latents.
        captions (`list[str]`, *optional*): the memory captions, kept for inspection (demo, neighbours).
        index_factory (`str`, defaults to `"Flat"`): the faiss index, as a `faiss.index_factory` string with the
            inner-product metric. `"Flat"` is exact (`IndexFlatIP`, the paper's); an approximate graph index such
            as `"HNSW32"` searches a 100k-key bank about 30× faster at some recall (`benchmarks/tinyalign_retrieval.py`
            measures both). Whatever is built is serialised with the bank, so `from_pretrained` restores it.
        ef_search (`int`, defaults to 128): HNSW search breadth (ignored by other indexes): higher is slower and
            closer to exact.
    """

    def __init__(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        captions: list[str] | None = None,
        index=None,
        index_factory: str = "Flat",
        ef_search: int = 128,
    ):
        faiss = _import_faiss()

        if keys.ndim != 2 or values.ndim != 3:
            raise MemoryBankError(
                f"keys must be (N, H) and values (N, L, D); got {tuple(keys.shape)} and {tuple(values.shape)}"
            )
        if keys.shape[0] == 0:
            raise MemoryBankError("the memory bank is empty: build it from at least one image–caption pair")
        if keys.shape[0] != values.shape[0]:
            raise MemoryBankError(f"{keys.shape[0]} keys but {values.shape[0]} values")
        if captions is not None and len(captions) != keys.shape[0]:
            raise MemoryBankError(f"{len(captions)} captions for {keys.shape[0]} keys")
        if not bool(torch.isfinite(keys).all()) or not bool(torch.isfinite(values).all()):
            raise MemoryBankError("memory bank keys and values must be finite; got NaN or Inf")
        self.keys = nn.functional.normalize(keys.detach().float().cpu(), dim=-1).contiguous()
        self.values = values.detach().float().cpu().contiguous()
        self.captions = list(captions) if captions is not None else None
        self.source_ids: list | None = None  # the rows it was built from, when known (see build_memory_bank)
        if index is None:
            try:
                index = faiss.index_factory(self.key_dim, index_factory, faiss.METRIC_INNER_PRODUCT)
            except RuntimeError as err:
                raise MemoryBankError(
                    f"faiss cannot build index_factory={index_factory!r}: {str(err).splitlines()[-1]}"
                ) from None
            if not index.is_trained:
                raise MemoryBankError(
                    f"index_factory={index_factory!r} needs training (IVF, PQ); use a flat or "
                    f"graph index such as 'Flat' or 'HNSW32'"
                )
            if hasattr(index, "hnsw"):
                index.hnsw.efSearch = ef_search
            index.add(self.keys.numpy())
        if index.ntotal != len(self) or index.d != self.key_dim:
            raise MemoryBankError(
                f"faiss index holds {index.ntotal} vectors of width {index.d}, the bank "
                f"{len(self)} of width {self.key_dim}"
            )
        self.index = index

    def __len__(self) -> int:
        return self.keys.shape[0]

    @property
    def key_dim(self) -> int:
        return self.keys.shape[1]

    @property
    def value_shape(self) -> tuple[int, int]:
        return tuple(self.values.shape[1:])

    def search(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-`k` cosine neighbours of each query: `(scores, ids)`, both `(B, k)`, best first."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise MemoryBankError(f"top_k must be an integer >= 1, got {k!r}")
        if k > len(self):
            raise MemoryBankError(f"top_k={k} is larger than the memory bank ({len(self)} entries)")
        if queries.ndim != 2 or queries.shape[0] == 0:
            raise MemoryBankError(f"queries must be a non-empty (batch, width) tensor, got {tuple(queries.shape)}")
        if not bool(torch.isfinite(queries).all()):
            raise MemoryBankError("queries must be finite; got NaN or Inf")
        if queries.shape[-1] != self.key_dim:
            raise MemoryBankError(f"query width {queries.shape[-1]} does not match the bank's key width {self.key_dim}")
        q = nn.functional.normalize(queries.detach().float().cpu(), dim=-1).numpy()
        scores, ids = self.index.search(np.ascontiguousarray(q), k)
        return torch.from_numpy(scores), torch.from_numpy(ids).long()

    def gather(self, ids: torch.Tensor) -> torch.Tensor:
        """Values of `ids` `(B, k)` concatenated along the token axis: `(B, k·L, D)` (the only shape that fits
        connector2's `Linear(D → H)`; the released code concatenates along the feature axis)."""
        b, k = ids.shape
        return self.values[ids.reshape(-1)].reshape(b, k * self.values.shape[1], self.values.shape[2])

    def state(self) -> dict[str, torch.Tensor]:
        faiss = _import_faiss()

        raw = faiss.serialize_index(self.index)
        return {"keys": self.keys, "values": self.values, "faiss_index": torch.from_numpy(np.asarray(raw).copy())}

    def save(self, folder: str | Path) -> Path:
        """Writes `memory_bank.safetensors` (faiss index bytes, keys, values; captions in the metadata)."""
        from safetensors.torch import save_file

        path = Path(folder) / BANK_FILE
        meta = {"format": "pt", "captions": json.dumps(self.captions) if self.captions is not None else "null"}
        save_file(self.state(), str(path), metadata=meta)
        return path

    @classmethod
    def load(cls, path: str | Path) -> MemoryBank:
        faiss = _import_faiss()
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}
            meta = f.metadata() or {}
        missing = {"keys", "values", "faiss_index"} - set(tensors)
        if missing:
            raise MemoryBankError(f"{path} lacks {sorted(missing)}: not a TinyAlign memory bank")
        index = faiss.deserialize_index(tensors["faiss_index"].numpy())
        captions = json.loads(meta.get("captions", "null"))
        return cls(tensors["keys"], tensors["values"], captions, index=index)
