"""FedE4RAG retriever: a BERT encoder with pooled, L2-normalised sentence vectors for questions and passages.

This file is copied next to the weights when a retriever is saved (transformers' `register_for_auto_class`), so it
imports nothing from hf_ext. `forward` returns the token states as `last_hidden_state` (what sentence-transformers'
`Transformer` module reads) and the sentence vector as `pooler_output`.

`forward` can also start from cached hidden states at layer `start_layer`: when only the top layers are trained (LoRA
on the last k layers), the frozen lower layers' outputs never change, so a client computes them once and each step
runs only the trainable top. The result is the same as a full forward (tested).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import BertModel, BertPreTrainedModel
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutputWithPooling

from .configuration_fede4rag import FedE4RAGConfig


def pool_tokens(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """Sentence vectors from token states.

    Args:
        last_hidden_state (`torch.Tensor` of shape `(batch, length, hidden)`): token states.
        attention_mask (`torch.Tensor` of shape `(batch, length)`, *optional*): 1 for real tokens, 0 for padding.
        pooling (`str`): `"mean"` (mask-aware), `"mean_unmasked"` (the official code: padding included) or `"cls"`.
    """
    if pooling == "cls":
        return last_hidden_state[:, 0]
    if pooling == "mean_unmasked" or attention_mask is None:
        # Deviation kept only as an option: the released code averages padding positions too.
        return last_hidden_state.mean(dim=1)
    mask = attention_mask.to(last_hidden_state.dtype).unsqueeze(-1)
    return (last_hidden_state * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


class FedE4RAGRetriever(BertPreTrainedModel):
    r"""Dense retriever of FedE4RAG ([arXiv 2504.19101](https://arxiv.org/abs/2504.19101)): questions and passages
    are embedded by the same BERT encoder, pooled ([`FedE4RAGConfig.pooling`]) and L2-normalised; relevance is the
    cosine similarity.

    Args:
        config ([`FedE4RAGConfig`]): encoder and pooling configuration.
    """

    config_class = FedE4RAGConfig
    base_model_prefix = "bert"

    def __init__(self, config: FedE4RAGConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.bert.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.bert.set_input_embeddings(value)

    def _extended_mask(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None):
        return create_bidirectional_mask(config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask)

    def lower_hidden_states(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        num_layers: int = 0,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Hidden states after the embeddings and the first `num_layers` layers (what [`forward`] can start from)."""
        if not 0 <= num_layers <= self.config.num_hidden_layers:
            raise ValueError(f"num_layers must be in [0, {self.config.num_hidden_layers}], got {num_layers}")
        hidden = self.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        mask = self._extended_mask(hidden, attention_mask)
        for layer in self.bert.encoder.layer[:num_layers]:
            hidden = layer(hidden, mask)
        return hidden

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        hidden_states: torch.Tensor | None = None,
        start_layer: int = 0,
        **kwargs,
    ) -> BaseModelOutputWithPooling:
        r"""Embeds a batch of texts.

        Args:
            input_ids (`torch.LongTensor` of shape `(batch, length)`, *optional*): token ids.
            attention_mask (`torch.Tensor` of shape `(batch, length)`, *optional*): 1 for tokens, 0 for padding.
            token_type_ids (`torch.LongTensor`, *optional*): segment ids (all zero for single texts).
            hidden_states (`torch.Tensor` of shape `(batch, length, hidden)`, *optional*): cached output of the first
                `start_layer` layers, instead of `input_ids`.
            start_layer (`int`, defaults to 0): the layer `hidden_states` enters at.

        Returns:
            [`~transformers.modeling_outputs.BaseModelOutputWithPooling`]: `last_hidden_state` (token states) and
            `pooler_output` (the pooled, optionally normalised sentence vectors).
        """
        self._check_inputs(input_ids, attention_mask, hidden_states)
        if hidden_states is None:
            if input_ids is None:
                raise ValueError("FedE4RAGRetriever needs input_ids or hidden_states")
            if start_layer != 0:
                raise ValueError("start_layer > 0 needs the cached hidden_states of that layer")
            tokens = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            tokens = tokens.last_hidden_state
        else:
            if not 0 <= start_layer <= self.config.num_hidden_layers:
                raise ValueError(f"start_layer must be in [0, {self.config.num_hidden_layers}], got {start_layer}")
            if hidden_states.shape[-1] != self.config.hidden_size:
                raise ValueError(
                    f"hidden_states has width {hidden_states.shape[-1]}, the encoder's hidden_size is "
                    f"{self.config.hidden_size}"
                )
            tokens = hidden_states
            mask = self._extended_mask(tokens, attention_mask)
            for layer in self.bert.encoder.layer[start_layer:]:
                tokens = layer(tokens, mask)
        pooled = pool_tokens(tokens, attention_mask, self.config.pooling)
        if self.config.normalize:
            pooled = F.normalize(pooled, p=2, dim=-1)
        return BaseModelOutputWithPooling(last_hidden_state=tokens, pooler_output=pooled)

    def _check_inputs(self, input_ids, attention_mask, hidden_states) -> None:
        """Refuses what would crash deep inside torch (ids outside the vocabulary, mismatched shapes) or pass through
        silently (NaN / inf in cached hidden states): a `ValueError` naming the argument."""
        if input_ids is not None:
            if not isinstance(input_ids, torch.Tensor) or input_ids.dtype.is_floating_point or input_ids.dim() != 2:
                got = (
                    f"{input_ids.dtype} {tuple(input_ids.shape)}" if isinstance(input_ids, torch.Tensor) else input_ids
                )
                raise ValueError(f"input_ids must be an integer tensor of shape (batch, length), got {got!r}")
            vocab = self.config.vocab_size
            if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab):
                raise ValueError(
                    f"input_ids must be token ids in [0, {vocab}), got values in "
                    f"[{int(input_ids.min())}, {int(input_ids.max())}]"
                )
        if hidden_states is not None:
            if not isinstance(hidden_states, torch.Tensor) or not hidden_states.dtype.is_floating_point:
                got = getattr(hidden_states, "dtype", type(hidden_states).__name__)
                raise ValueError(f"hidden_states must be a floating-point tensor, got {got}")
            if hidden_states.dim() != 3:
                raise ValueError(
                    f"hidden_states must have shape (batch, length, hidden), got {tuple(hidden_states.shape)}"
                )
            if not torch.isfinite(hidden_states).all():
                raise ValueError("hidden_states contains NaN or inf")
        if attention_mask is not None:
            ref = input_ids if input_ids is not None else hidden_states
            if not isinstance(attention_mask, torch.Tensor):
                raise ValueError(f"attention_mask must be a tensor, got {type(attention_mask).__name__}")
            if ref is not None and tuple(attention_mask.shape) != tuple(ref.shape[:2]):
                raise ValueError(
                    f"attention_mask has shape {tuple(attention_mask.shape)}, expected {tuple(ref.shape[:2])} "
                    "(batch, length)"
                )
            if attention_mask.dtype.is_floating_point and not torch.isfinite(attention_mask).all():
                raise ValueError("attention_mask contains NaN or inf")

    def encode(self, **inputs) -> torch.Tensor:
        """The sentence vectors only (`forward(...).pooler_output`)."""
        return self(**inputs).pooler_output


__all__ = ["FedE4RAGRetriever", "pool_tokens"]
