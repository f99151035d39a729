"""Tokenizer and processor of TinyAlign: a word-level tokenizer built from captions, the prompt template with one
placeholder per image / memory token, labels on the caption only, and the bank builder over a `datasets.Dataset`."""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import torch

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>", "<image>", "<rag>"]  # ids 0..5; <image>=4, <rag>=5 as in the config
PROMPT = "the caption of the image is :"
IGNORE_INDEX = -100


def build_tokenizer(texts: Iterable[str]):
    """A word-level `PreTrainedTokenizerFast` over the words of `texts` plus the prompt (punctuation split off)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for t in [*texts, PROMPT] for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + [w for w in words if w not in SPECIAL_TOKENS])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", additional_special_tokens=["<image>", "<rag>"])


class TinyAlignProcessor:
    """Turns images and captions into model inputs for one config.

    Layout: `<s> <image>×Nv <rag>×(k·L) the caption of the image is : caption </s>`; labels are the caption and
    `</s>` only. The baseline (`use_retrieval=False`) has no `<rag>` tokens.

    Args:
        tokenizer (`PreTrainedTokenizerFast`): from [`build_tokenizer`].
        config ([`TinyAlignConfig`]): gives the placeholder ids and counts.
    """

    def __init__(self, tokenizer, config):
        self.tokenizer = tokenizer
        self.config = config
        for name in ("image_token_id", "rag_token_id"):
            tok = tokenizer.convert_ids_to_tokens(getattr(config, name))
            if tok != ("<image>" if name == "image_token_id" else "<rag>"):
                raise ValueError(f"config.{name}={getattr(config, name)} is {tok!r} in this tokenizer")
        prompt_len = len(self.words(PROMPT))
        if prompt_len != config.query_prompt_length:  # the honest query's positional cut-off would be wrong
            raise ValueError(f"the prompt {PROMPT!r} has {prompt_len} tokens but config.query_prompt_length is "
                             f"{config.query_prompt_length}")
        if len(tokenizer) > config.text_config.vocab_size:
            raise ValueError(f"tokenizer has {len(tokenizer)} tokens, the LM vocabulary only "
                             f"{config.text_config.vocab_size}")

    def words(self, text: str) -> list[int]:
        return self.tokenizer(text.lower(), add_special_tokens=False)["input_ids"]

    def prefix_ids(self) -> list[int]:
        c = self.config
        return ([self.tokenizer.bos_token_id] + [c.image_token_id] * c.num_image_tokens
                + [c.rag_token_id] * c.num_memory_tokens + self.words(PROMPT))

    def pixel_values(self, images) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(images, dtype=np.float32))
        if x.ndim == 3:  # (B, S, S) grey images
            x = x[:, None]
        return x

    def __call__(self, images, captions: list[str] | None = None) -> dict[str, torch.Tensor]:
        """`captions=None` gives generation prompts; otherwise training inputs with labels (right-padded)."""
        if len(images) == 0:
            raise ValueError("images is an empty batch: pass at least one image")
        if captions is not None and (isinstance(captions, str) or len(captions) != len(images)):
            raise ValueError(f"captions must be a list with one caption per image ({len(images)}), got "
                             f"{'a string' if isinstance(captions, str) else len(captions)}")
        if captions is not None and not all(isinstance(c, str) for c in captions):
            raise ValueError("captions must be strings")
        prefix = self.prefix_ids()
        rows, labels = [], []
        for i in range(len(images)):
            if captions is None:
                rows.append(prefix)
                continue
            answer = self.words(captions[i]) + [self.tokenizer.eos_token_id]
            rows.append(prefix + answer)
            labels.append([IGNORE_INDEX] * len(prefix) + answer)
        n = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        out = {
            "input_ids": torch.tensor([r + [pad] * (n - len(r)) for r in rows]),
            "attention_mask": torch.tensor([[1] * len(r) + [0] * (n - len(r)) for r in rows]),
            "pixel_values": self.pixel_values(images),
        }
        if captions is not None:
            out["labels"] = torch.tensor([lab + [IGNORE_INDEX] * (n - len(lab)) for lab in labels])
        return out

    def key_text(self, captions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids and mask of `<s> prompt caption` (no placeholders): the text part of a memory key."""
        rows = [[self.tokenizer.bos_token_id] + self.words(PROMPT) + self.words(c) for c in captions]
        n = max(len(r) for r in rows)
        ids = torch.tensor([r + [self.tokenizer.pad_token_id] * (n - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (n - len(r)) for r in rows])
        return ids, mask

    def decode(self, ids) -> list[str]:
        return [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]


@torch.no_grad()
def build_memory_bank(model, processor: TinyAlignProcessor, dataset, batch_size: int = 64, progress: bool = True,
                      image_column: str = "pixel_values", caption_column: str = "caption", index_factory: str = "Flat"):
    """Builds a [`MemoryBank`] from an image–caption `datasets.Dataset`, attaches it to `model` and returns it.

    The model's current connector is frozen as its retrieval projector first, so keys and later queries share one
    projection. Shows a tqdm progress bar unless `progress=False`. `index_factory` picks the faiss index (`"Flat"`:
    exact; `"HNSW32"`: approximate, for large banks; see [`MemoryBank`]).
    """
    from tqdm.auto import tqdm

    from .memory import MemoryBank, MemoryBankError

    if len(dataset) == 0:
        raise MemoryBankError("cannot build a memory bank from an empty dataset")
    for col in (image_column, caption_column):
        if col not in dataset.column_names:
            raise ValueError(f"dataset has no column {col!r} (columns: {dataset.column_names})")
    was_training = model.training
    model.eval()
    model.snapshot_retrieval_connector()
    keys, values, captions = [], [], []
    for start in tqdm(range(0, len(dataset), batch_size), desc="TinyAlign memory bank", disable=not progress):
        batch = dataset[start : start + batch_size]
        pixels = processor.pixel_values(batch[image_column]).to(model.device)
        ids, mask = processor.key_text(batch[caption_column])
        k, v = model.encode_memory(pixels, ids.to(model.device), mask.to(model.device), batch[caption_column])
        keys.append(k)
        values.append(v)
        captions.extend(batch[caption_column])
    bank = MemoryBank(torch.cat(keys), torch.cat(values), captions, index_factory=index_factory)
    model.set_memory_bank(bank)
    model.train(was_training)
    return bank
