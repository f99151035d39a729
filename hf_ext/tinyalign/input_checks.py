"""Input checks of [`TinyAlignForConditionalGeneration`] (a mixin), so bad inputs fail with the field named instead
of deep inside an embedding lookup or a reshape. Self-contained: it travels with the modeling file as remote code."""

from __future__ import annotations

import torch

IGNORE_INDEX = -100


class TinyAlignInputChecks:
    """Checks of `pixel_values` and the token inputs; mixed into the model (reads `self.config`, `self.memory_bank`)."""

    def check_pixel_values(self, pixel_values: torch.Tensor) -> None:
        c, s = self.config.num_channels, self.config.image_size
        if not isinstance(pixel_values, torch.Tensor) or not pixel_values.is_floating_point():
            raise ValueError(
                f"pixel_values must be a float tensor of shape (batch, {c}, {s}, {s}), got "
                f"{getattr(pixel_values, 'dtype', type(pixel_values).__name__)}"
            )
        if pixel_values.ndim != 4 or tuple(pixel_values.shape[1:]) != (c, s, s):
            raise ValueError(
                f"pixel_values must have shape (batch, {c}, {s}, {s}) (channels={c}, image_size={s}); "
                f"got {tuple(pixel_values.shape)}"
            )
        if pixel_values.shape[0] == 0:
            raise ValueError("pixel_values is an empty batch: pass at least one image")
        if not bool(torch.isfinite(pixel_values).all()):
            raise ValueError("pixel_values must be finite; got NaN or Inf values")

    def check_text_inputs(self, input_ids, attention_mask=None, labels=None, memory_ids=None) -> None:
        """Shapes, dtypes and id ranges of the token inputs, so bad ones fail here with the field named instead of
        deep inside an embedding lookup (`IndexError: index out of range in self`) or a reshape."""
        vocab = self.config.text_config.vocab_size
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
            raise ValueError(
                f"input_ids must be an integer tensor of shape (batch, length), got "
                f"{tuple(getattr(input_ids, 'shape', ()))} {getattr(input_ids, 'dtype', type(input_ids))}"
            )
        if input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
            raise ValueError(f"input_ids is empty (shape {tuple(input_ids.shape)}): pass at least one token per row")
        placeholder = (input_ids == self.config.image_token_id) | (input_ids == self.config.rag_token_id)
        outside = ((input_ids < 0) | (input_ids >= vocab)) & ~placeholder
        if bool(outside.any()):
            bad = input_ids[outside].unique()[:5].tolist()
            raise ValueError(f"input_ids must lie in [0, vocab_size={vocab}), got {bad}")
        for name, value in (("attention_mask", attention_mask), ("labels", labels)):
            if value is not None and (not isinstance(value, torch.Tensor) or value.shape != input_ids.shape):
                raise ValueError(
                    f"{name} must have the shape of input_ids {tuple(input_ids.shape)}, got "
                    f"{tuple(getattr(value, 'shape', ()))}"
                )
        if labels is not None:
            if labels.is_floating_point():
                raise ValueError(
                    f"labels must be integer token ids (or {IGNORE_INDEX}), got {labels.dtype} "
                    f"(NaN labels would give a NaN loss)"
                )
            bad = (labels != IGNORE_INDEX) & ((labels < 0) | (labels >= vocab))
            if bool(bad.any()):
                raise ValueError(
                    f"labels must lie in [0, vocab_size={vocab}) or be {IGNORE_INDEX}, got "
                    f"{labels[bad].unique()[:5].tolist()}"
                )
        if memory_ids is not None:
            k, n = self.config.memory_top_k, len(self.memory_bank) if self.memory_bank is not None else 0
            if (
                not isinstance(memory_ids, torch.Tensor)
                or memory_ids.is_floating_point()
                or tuple(memory_ids.shape) != (input_ids.shape[0], k)
            ):
                raise ValueError(
                    f"memory_ids must be an integer tensor of shape (batch={input_ids.shape[0]}, "
                    f"memory_top_k={k}), got {tuple(getattr(memory_ids, 'shape', ()))}"
                )
            if bool(((memory_ids < 0) | (memory_ids >= n)).any()):
                raise ValueError(
                    f"memory_ids must be bank entries in [0, {n}), got "
                    f"{memory_ids[(memory_ids < 0) | (memory_ids >= n)].unique()[:5].tolist()}"
                )
