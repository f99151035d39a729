"""CodeBC's base model: `LlamaForCausalLM` under its own config class, so it has its own Auto registration.

Self-contained (copied next to the weights by `register_for_auto_class`); imports nothing from hf_ext. The CodeBC
stages add one PEFT LoRA adapter (r 8, α 32, dropout 0.1 on `q_proj`/`v_proj`) on top of this model.
"""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM

from .configuration_codebc import CodeBCConfig


class CodeBCForCausalLM(LlamaForCausalLM):
    """A LLaMA causal LM with a [`CodeBCConfig`]; behaviour is LLaMA's, the security tags live in the vocabulary."""

    config_class = CodeBCConfig

    def check_inputs(self, input_ids=None, attention_mask=None, labels=None, inputs_embeds=None) -> None:
        """Shapes, dtypes and id ranges of the token inputs: a bad batch fails here with the field and the allowed
        range named, not inside the embedding lookup (`index out of range in self`) or a reshape of 0 elements."""
        vocab = self.config.vocab_size
        if input_ids is not None:
            if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
                raise ValueError(
                    f"input_ids must be an integer tensor of shape (batch, length), got "
                    f"{tuple(getattr(input_ids, 'shape', ()))} "
                    f"{getattr(input_ids, 'dtype', type(input_ids).__name__)}"
                )
            if input_ids.numel() == 0:
                raise ValueError(f"input_ids is empty (shape {tuple(input_ids.shape)}): pass at least one token")
            bad = (input_ids < 0) | (input_ids >= vocab)
            if bool(bad.any()):
                raise ValueError(
                    f"input_ids must lie in [0, vocab_size={vocab}), got {input_ids[bad].unique()[:5].tolist()}"
                )
        if inputs_embeds is not None:
            width = self.config.hidden_size
            if (
                not isinstance(inputs_embeds, torch.Tensor)
                or not inputs_embeds.is_floating_point()
                or inputs_embeds.ndim != 3
                or inputs_embeds.shape[-1] != width
            ):
                raise ValueError(
                    f"inputs_embeds must be a float tensor of shape (batch, length, {width}), got "
                    f"{tuple(getattr(inputs_embeds, 'shape', ()))} "
                    f"{getattr(inputs_embeds, 'dtype', type(inputs_embeds).__name__)}"
                )
            if not bool(torch.isfinite(inputs_embeds).all()):  # NaN would run through and give NaN logits silently
                raise ValueError("inputs_embeds must be finite; got NaN or Inf values")
        ref = input_ids.shape if input_ids is not None else None
        if attention_mask is not None and ref is not None and attention_mask.ndim == 2:
            if attention_mask.shape[0] != ref[0] or attention_mask.shape[1] < ref[1]:
                raise ValueError(
                    f"attention_mask must have shape (batch={ref[0]}, >= {ref[1]}), got {tuple(attention_mask.shape)}"
                )
        if labels is not None:
            if not isinstance(labels, torch.Tensor) or labels.is_floating_point():
                raise ValueError(
                    f"labels must be integer token ids (or -100), got "
                    f"{getattr(labels, 'dtype', type(labels).__name__)} (NaN labels give a NaN loss)"
                )
            if ref is not None and labels.shape != ref:
                raise ValueError(f"labels must have the shape of input_ids {tuple(ref)}, got {tuple(labels.shape)}")
            bad = (labels != -100) & ((labels < 0) | (labels >= vocab))
            if bool(bad.any()):
                raise ValueError(
                    f"labels must lie in [0, vocab_size={vocab}) or be -100, got {labels[bad].unique()[:5].tolist()}"
                )

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        cache=None,
        inputs_embeds=None,
        labels=None,
        use_cache=None,
        logits_to_keep=0,
        **kwargs,
    ):
        """`LlamaForCausalLM.forward`, after [`check_inputs`]."""
        self.check_inputs(input_ids, attention_mask, labels, inputs_embeds)
        return super().forward(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            inputs_embeds=inputs_embeds,
            labels=labels,
            use_cache=use_cache,
            logits_to_keep=logits_to_keep,
            **kwargs,
        )
