"""FedE4RAG configuration: a BERT encoder's configuration plus how sentence vectors are pooled.

This file is copied next to the weights when a FedE4RAG retriever is saved (transformers' `register_for_auto_class`),
so it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.
"""

from __future__ import annotations

from transformers import BertConfig

POOLINGS = ("mean", "mean_unmasked", "cls")


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
        """Checks the added fields; every failure is a `ValueError` that names the field."""
        name = type(self).__name__
        if self.pooling not in POOLINGS:
            raise ValueError(f"{name}.pooling must be one of {POOLINGS}, got {self.pooling!r}")
        for field in ("max_query_length", "max_passage_length"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= self.max_position_embeddings:
                raise ValueError(f"{name}.{field} must be an int in [1, {self.max_position_embeddings}], got {value!r}")


__all__ = ["FedE4RAGConfig", "POOLINGS"]
