"""FedE4RAG configuration: a BERT encoder's configuration plus how sentence vectors are pooled.

This file is copied next to the weights when a FedE4RAG retriever is saved (transformers' `register_for_auto_class`),
so it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.
"""

from __future__ import annotations

import math

from transformers import BertConfig

POOLINGS = ("mean", "mean_unmasked", "cls")
# The encoder's integer fields and their lower bounds, checked with the added ones (transformers checks the types of
# some BERT fields, not their ranges: `vocab_size=0` or `num_hidden_layers=-1` would build a broken model).
_INT_FIELDS = {
    "vocab_size": 1,
    "hidden_size": 1,
    "num_hidden_layers": 1,
    "num_attention_heads": 1,
    "intermediate_size": 1,
    "max_position_embeddings": 1,
    "type_vocab_size": 1,
}
# (low, high, open_high): dropout probabilities in [0, 1), positive scales.
_FLOAT_FIELDS = {
    "hidden_dropout_prob": (0.0, 1.0, True),
    "attention_probs_dropout_prob": (0.0, 1.0, True),
}
_POSITIVE_FIELDS = ("initializer_range", "layer_norm_eps")


class FedE4RAGConfig(BertConfig):
    r"""Configuration of a FedE4RAG dense retriever
    ([FedE4RAG, arXiv 2504.19101](https://arxiv.org/abs/2504.19101)): a BERT encoder (all-MiniLM-L6-v2 in the
    reproduction) whose pooled, L2-normalised sentence vectors embed questions and passages in one space.

    Every [`~transformers.BertConfig`] field applies to the encoder; the fields below are added.

    Args:
        pooling (`str`, defaults to `"mean"`): `"mean"` averages the token states where `attention_mask` is 1
            (what sentence-transformers does); `"mean_unmasked"` averages over every position *including padding*,
            as the official code's `torch.mean(last_hidden_state, dim=1)` does (a known bug kept as an option, so the
            sentence vector of a text depends on what it was batched with); `"cls"` takes the first token.
        normalize (`bool`, defaults to `True`): L2-normalise sentence vectors (inner product = cosine).
        max_query_length (`int`, defaults to 64): tokens kept of a question.
        max_passage_length (`int`, defaults to 256): tokens kept of a passage.
    """

    model_type = "hf_ext_fede4rag"

    pooling: str = "mean"
    normalize: bool = True
    max_query_length: int = 64
    max_passage_length: int = 256

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.validate_retriever()

    def validate_retriever(self):
        """Checks the types and ranges of the encoder's numeric fields and of the added ones (at construction and
        on load); every failure is a `ValueError` that names the field. A string or `None` where a number is needed
        is refused, so is a non-finite number."""
        name = type(self).__name__
        for field, low in _INT_FIELDS.items():
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name}.{field} must be an integer >= {low}, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"{name}.hidden_size ({self.hidden_size}) must be a multiple of num_attention_heads "
                f"({self.num_attention_heads})"
            )
        for field, (low, high, open_high) in _FLOAT_FIELDS.items():
            value = getattr(self, field)
            if not _finite_number(value) or value < low or (value >= high if open_high else value > high):
                raise ValueError(f"{name}.{field} must be a finite number in [{low:g}, {high:g}), got {value!r}")
        for field in _POSITIVE_FIELDS:
            value = getattr(self, field)
            if not _finite_number(value) or value <= 0:
                raise ValueError(f"{name}.{field} must be a finite number > 0, got {value!r}")
        if not isinstance(self.pooling, str) or self.pooling not in POOLINGS:
            raise ValueError(f"{name}.pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if not isinstance(self.normalize, bool):
            raise ValueError(f"{name}.normalize must be a bool (true/false), got {self.normalize!r}")
        for field in ("max_query_length", "max_passage_length"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= self.max_position_embeddings:
                raise ValueError(f"{name}.{field} must be an int in [1, {self.max_position_embeddings}], got {value!r}")


def _finite_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _field_errors_as_value_errors(init):
    """BertConfig's own strict type checks (huggingface_hub's strict dataclasses) raise an error that is neither a
    `ValueError` nor a `TypeError`; re-raised as a `ValueError` that keeps its message (which names the field), so
    every bad field of this config fails the same way."""
    import functools

    from huggingface_hub.errors import StrictDataclassError

    @functools.wraps(init)
    def wrapped(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except StrictDataclassError as err:
            raise ValueError(f"{type(self).__name__}: {err}") from err

    return wrapped


# Wrapped after the class is built: a `__init__` in the class body would replace the dataclass-generated one.
FedE4RAGConfig.__init__ = _field_errors_as_value_errors(FedE4RAGConfig.__init__)


__all__ = ["FedE4RAGConfig", "POOLINGS"]
