"""Tokenizer and processor of TinyAlign: a word-level tokenizer built from captions, the prompt template with one
placeholder per image / memory token, labels on the caption only, and the bank builder over a `datasets.Dataset`."""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import PIL.Image
import torch
from transformers import BatchFeature, ProcessorMixin
from transformers.image_processing_utils import BaseImageProcessor

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
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        additional_special_tokens=["<image>", "<rag>"],
    )


def add_placeholder_tokens(tokenizer):
    """Adds `<image>` and `<rag>` as special tokens to a pretrained LM's tokenizer (in place; returns it). They get
    ids past the LM vocabulary, which is fine: the model never embeds placeholders (no embedding resize)."""
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<image>", "<rag>"]}, replace_extra_special_tokens=False
    )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


class TinyAlignImageProcessor(BaseImageProcessor):
    r"""Images → `pixel_values` `(B, C, S, S)`: grey or RGB conversion, bilinear resize to `size`, rescale to [0, 1],
    optional inversion (dark-on-light photos to the digits' light-on-dark), then `(x − image_mean) / image_std`.

    Accepts PIL images, `(H, W)` / `(H, W, C)` / `(C, H, W)` arrays or tensors (uint8 in [0, 255] or float in
    [0, 1]), or one stacked `(B, C, S, S)` float batch (already at size: only normalised).

    Args:
        size (`int`): output height and width.
        num_channels (`int`): 1 (grey) or 3 (RGB).
        image_mean (`list[float]`, *optional*), image_std (`list[float]`, *optional*): per-channel normalisation
            (defaults 0 and 1: none). EfficientNet-Lite0 wants the ImageNet mean and std.
        invert (`bool`): `x → 1 − x` after rescaling.
    """

    model_input_names = ["pixel_values"]

    def __init__(
        self, size: int = 8, num_channels: int = 1, image_mean=None, image_std=None, invert: bool = False, **kwargs
    ):
        kwargs.pop("image_processor_type", None)
        super().__init__(**kwargs)
        if num_channels not in (1, 3):
            raise ValueError(f"num_channels must be 1 (grey) or 3 (RGB), got {num_channels}")
        self.size, self.num_channels, self.invert = int(size), int(num_channels), bool(invert)
        self.image_mean = list(image_mean) if image_mean is not None else [0.0] * num_channels
        self.image_std = list(image_std) if image_std is not None else [1.0] * num_channels
        if len(self.image_mean) != num_channels or len(self.image_std) != num_channels or min(self.image_std) <= 0:
            raise ValueError(
                f"image_mean and image_std need {num_channels} values (std > 0), got {self.image_mean} "
                f"and {self.image_std}"
            )

    def _one(self, image) -> np.ndarray:
        from PIL import Image

        if not isinstance(image, Image.Image):
            arr = np.asarray(image.detach().cpu() if isinstance(image, torch.Tensor) else image)
            if arr.ndim == 3 and arr.shape[0] in (1, 3) and arr.shape[-1] not in (1, 3):
                arr = arr.transpose(1, 2, 0)  # (C, H, W) -> (H, W, C)
            if arr.ndim not in (2, 3) or min(arr.shape[:2]) < 1:
                raise ValueError(f"an image must be (H, W), (H, W, C) or (C, H, W), got shape {arr.shape}")
            arr = arr.astype(np.float32)
            arr = arr / 255.0 if arr.max() > 1.0 else arr
            arr = np.clip(arr.squeeze(-1) if arr.ndim == 3 and arr.shape[-1] == 1 else arr, 0.0, 1.0)
            image = Image.fromarray((arr * 255.0 + 0.5).astype(np.uint8))
        image = image.convert("L" if self.num_channels == 1 else "RGB")
        if image.size != (self.size, self.size):
            image = image.resize((self.size, self.size), Image.BILINEAR)
        arr = np.asarray(image, dtype=np.float32) / 255.0
        return arr[None] if self.num_channels == 1 else arr.transpose(2, 0, 1)

    def preprocess(self, images, return_tensors="pt", **kwargs) -> BatchFeature:
        want = (self.num_channels, self.size, self.size)
        if isinstance(images, (np.ndarray, torch.Tensor)) and images.ndim == 4 and tuple(images.shape[1:]) == want:
            batch = torch.as_tensor(np.asarray(images, dtype=np.float32))
        elif isinstance(images, (np.ndarray, torch.Tensor)) and images.ndim == 4:
            batch = torch.from_numpy(np.stack([self._one(im) for im in images]))
        elif not isinstance(images, (list, tuple)) and not hasattr(images, "__len__"):
            batch = torch.from_numpy(self._one(images)[None])
        else:
            if len(images) == 0:
                raise ValueError("images is an empty batch: pass at least one image")
            try:  # a batch of equal-shape numeric images (a dataset column): one array
                stacked = np.asarray(images, dtype=np.float32)
            except (ValueError, TypeError):
                stacked = None
            if stacked is not None and stacked.ndim == 3:
                stacked = stacked[:, None]  # (B, S, S) grey
            if (
                stacked is not None
                and stacked.ndim == 4
                and stacked.shape[1:] == (self.num_channels, self.size, self.size)
            ):
                batch = torch.from_numpy(stacked)
            else:
                batch = torch.from_numpy(np.stack([self._one(im) for im in images]))
        if batch.ndim != 4 or tuple(batch.shape[1:]) != (self.num_channels, self.size, self.size):
            raise ValueError(
                f"images must become (batch, {self.num_channels}, {self.size}, {self.size}); got {tuple(batch.shape)}"
            )
        if not bool(torch.isfinite(batch).all()):  # NaN would run through the normalisation to the model unnoticed
            raise ValueError("images must hold finite pixel values; got NaN or Inf")
        if self.invert:
            batch = 1.0 - batch
        mean = torch.tensor(self.image_mean, dtype=torch.float32)[None, :, None, None]
        std = torch.tensor(self.image_std, dtype=torch.float32)[None, :, None, None]
        return BatchFeature({"pixel_values": (batch - mean) / std}, tensor_type=return_tensors)


class TinyAlignProcessor(ProcessorMixin):
    """Turns images and captions into model inputs: [`TinyAlignImageProcessor`] for the images, the tokenizer for
    the text. Saved with the artifact (`save_pretrained`), so `AutoProcessor.from_pretrained(dir)` rebuilds it.

    Layout: `<bos> <image>×Nv <rag>×(k·L) prompt caption <eos>`; labels are the caption and `<eos>` only. The
    baseline (`num_memory_tokens=0`) has no `<rag>` tokens. Captions are lower-cased.

    Args:
        image_processor ([`TinyAlignImageProcessor`]): image preprocessing.
        tokenizer (`PreTrainedTokenizerBase`): from [`build_tokenizer`] or a pretrained LM's tokenizer with `<image>`
            and `<rag>` added (see [`add_placeholder_tokens`]).
        num_image_tokens (`int`), num_memory_tokens (`int`): placeholders per image (the model config's).
        prompt (`str`): the instruction between the memory tokens and the caption.

    [`from_config`] builds one for a [`TinyAlignConfig`] (the form `TinyAlignProcessor(tokenizer, config)` is
    accepted too).
    """

    def __init__(
        self,
        image_processor=None,
        tokenizer=None,
        num_image_tokens: int = 16,
        num_memory_tokens: int = 0,
        prompt: str = PROMPT,
        chat_template=None,
        **kwargs,
    ):
        from transformers import PreTrainedConfig, PreTrainedTokenizerBase

        config = None
        if isinstance(image_processor, PreTrainedTokenizerBase) and isinstance(tokenizer, PreTrainedConfig):
            image_processor, tokenizer, config = None, image_processor, tokenizer  # (tokenizer, config) form
        if config is not None:
            num_image_tokens, num_memory_tokens = config.num_image_tokens, config.num_memory_tokens
            if image_processor is None:
                image_processor = TinyAlignImageProcessor(size=config.image_size, num_channels=config.num_channels)
        self.num_image_tokens, self.num_memory_tokens, self.prompt = (
            int(num_image_tokens),
            int(num_memory_tokens),
            prompt,
        )
        super().__init__(image_processor, tokenizer, chat_template=chat_template)
        missing = [t for t in ("<image>", "<rag>") if t not in tokenizer.get_vocab()]
        if missing:
            raise ValueError(f"the tokenizer lacks the placeholder tokens {missing}: use add_placeholder_tokens")
        self.image_token_id = tokenizer.convert_tokens_to_ids("<image>")
        self.rag_token_id = tokenizer.convert_tokens_to_ids("<rag>")
        self.config = config
        if config is not None:
            self.check_config(config)

    @classmethod
    def from_config(cls, tokenizer, config, image_processor=None):
        """The processor of `config` (placeholder counts, image size and channels) with this tokenizer."""
        if image_processor is None:
            image_processor = TinyAlignImageProcessor(size=config.image_size, num_channels=config.num_channels)
        proc = cls(image_processor, tokenizer, config.num_image_tokens, config.num_memory_tokens)
        proc.config = config
        proc.check_config(config)
        return proc

    def check_config(self, config) -> None:
        """Refuses a config whose placeholder ids, counts or honest-query prompt length differ from this processor's."""
        for name, ours in (
            ("image_token_id", self.image_token_id),
            ("rag_token_id", self.rag_token_id),
            ("num_image_tokens", self.num_image_tokens),
            ("num_memory_tokens", self.num_memory_tokens),
        ):
            if getattr(config, name) != ours:
                raise ValueError(f"config.{name}={getattr(config, name)} but this processor has {ours}")
        prompt_len = len(self.prompt_ids())
        if prompt_len != config.query_prompt_length:  # the honest query's positional cut-off would be wrong
            raise ValueError(
                f"the prompt {self.prompt!r} has {prompt_len} tokens but config.query_prompt_length is "
                f"{config.query_prompt_length}"
            )
        placeholders = {self.image_token_id, self.rag_token_id}
        real = [i for i in self.tokenizer.get_vocab().values() if i not in placeholders]
        if real and max(real) >= config.text_config.vocab_size:
            raise ValueError(
                f"tokenizer has ids up to {max(real)}, the LM vocabulary only {config.text_config.vocab_size}"
            )

    def words(self, text: str) -> list[int]:
        # the leading space makes a BPE tokenizer (SmolLM2) read word-initial tokens; a word-level one ignores it
        return self.tokenizer(" " + text.lower(), add_special_tokens=False)["input_ids"]

    def prompt_ids(self) -> list[int]:
        return self.tokenizer(" " + self.prompt, add_special_tokens=False)["input_ids"]

    def _bos(self) -> list[int]:
        bos = self.tokenizer.bos_token_id
        return [bos] if bos is not None else []

    def prefix_ids(self) -> list[int]:
        return (
            self._bos()
            + [self.image_token_id] * self.num_image_tokens
            + [self.rag_token_id] * self.num_memory_tokens
            + self.prompt_ids()
        )

    def pixel_values(self, images) -> torch.Tensor:
        return self.image_processor(images, return_tensors="pt")["pixel_values"]

    def __call__(
        self, images=None, captions: list[str] | None = None, text=None, return_tensors="pt", **kwargs
    ) -> BatchFeature:
        """Model inputs for a batch of images.

        - `captions` given: training inputs with labels (right-padded; labels are the caption and `<eos>`).
        - otherwise generation prompts. `text` (the keyword `pipeline("image-text-to-text")` passes) is the start of
          the caption to continue: `""` or `None` starts right after the fixed prompt, `"a light"` continues from
          those words. One string applies to every image; a list needs one per image, all of one token length (the
          honest query reads the prompt by position, so rows cannot be left-padded).

        A single PIL image is taken as a batch of one. `return_tensors` is always PyTorch.
        """
        if isinstance(images, PIL.Image.Image):
            images = [images]
        if images is None or len(images) == 0:
            raise ValueError("images is an empty batch: pass at least one image")
        if captions is not None and (isinstance(captions, str) or len(captions) != len(images)):
            raise ValueError(
                f"captions must be a list with one caption per image ({len(images)}), got "
                f"{'a string' if isinstance(captions, str) else len(captions)}"
            )
        if captions is not None and not all(isinstance(c, str) for c in captions):
            raise ValueError("captions must be strings")
        prefix = self.prefix_ids()
        if captions is None:
            starts = [text] * len(images) if text is None or isinstance(text, str) else list(text)
            if len(starts) != len(images) or not all(t is None or isinstance(t, str) for t in starts):
                raise ValueError(f"text must be a string or a list of {len(images)} strings (one per image)")
            rows = [prefix + (self.words(t) if t and t.strip() else []) for t in starts]
            if len({len(r) for r in rows}) > 1:
                raise ValueError(
                    "text starts of different token lengths in one batch: the prompt is read by "
                    "position, so pass them one image at a time"
                )
            return BatchFeature(
                {
                    "input_ids": torch.tensor(rows),
                    "attention_mask": torch.ones(len(rows), len(rows[0]), dtype=torch.long),
                    "pixel_values": self.pixel_values(images),
                }
            )
        rows, labels = [], []
        for i in range(len(images)):
            answer = self.words(captions[i]) + [self.tokenizer.eos_token_id]
            rows.append(prefix + answer)
            labels.append([IGNORE_INDEX] * len(prefix) + answer)
        n = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        return BatchFeature(
            {
                "input_ids": torch.tensor([r + [pad] * (n - len(r)) for r in rows]),
                "attention_mask": torch.tensor([[1] * len(r) + [0] * (n - len(r)) for r in rows]),
                "pixel_values": self.pixel_values(images),
                "labels": torch.tensor([lab + [IGNORE_INDEX] * (n - len(lab)) for lab in labels]),
            }
        )

    def key_text(self, captions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids and mask of `<s> prompt caption` (no placeholders): the text part of a memory key."""
        rows = [self._bos() + self.prompt_ids() + self.words(c) for c in captions]
        n = max(len(r) for r in rows)
        ids = torch.tensor([r + [self.tokenizer.pad_token_id] * (n - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (n - len(r)) for r in rows])
        return ids, mask

    def decode(self, ids) -> list[str]:
        return [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]


@torch.no_grad()
def build_memory_bank(
    model,
    processor: TinyAlignProcessor,
    dataset,
    batch_size: int = 64,
    progress: bool = True,
    image_column: str = "pixel_values",
    caption_column: str = "caption",
    index_factory: str = "Flat",
):
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
    # which rows the bank was built from (the dataset's `index` column when it has one): lets a run check that the
    # honest bank shares no row with the training split (kept in memory, not saved with the bank)
    bank.source_ids = list(dataset["index"]) if "index" in dataset.column_names else None
    model.set_memory_bank(bank)
    model.train(was_training)
    return bank


def _register_processor() -> None:
    """`AutoProcessor` / `AutoImageProcessor` for TinyAlign artifacts (done when this module is imported, which the
    modeling module does); `register_for_auto_class` writes the `auto_map` so a pushed artifact's processor loads as
    remote code too."""
    from transformers import AutoImageProcessor, AutoProcessor

    from .configuration_tinyalign import TinyAlignConfig

    AutoImageProcessor.register(
        TinyAlignConfig, image_processor_classes={"pil": TinyAlignImageProcessor}, exist_ok=True
    )
    AutoProcessor.register(TinyAlignConfig, TinyAlignProcessor, exist_ok=True)
    TinyAlignImageProcessor.register_for_auto_class("AutoImageProcessor")
    TinyAlignProcessor.register_for_auto_class("AutoProcessor")


_register_processor()
