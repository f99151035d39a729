"""The one CodeBC LoRA adapter: its PEFT config, attaching it to a base, copies of its state (to evaluate each stage's
checkpoint) and saving base + adapter (+ tokenizer, card) atomically in one folder."""

from __future__ import annotations

import copy

import torch

from .trainer import CodeBCStageArguments


def lora_config(args: CodeBCStageArguments):
    from peft import LoraConfig

    extra = {"trainable_token_indices": list(args.trainable_token_ids)} if args.trainable_token_ids else {}
    return LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=list(args.lora_targets),
        task_type="CAUSAL_LM",
        **extra,
    )


def add_adapter(model, args: CodeBCStageArguments | None = None):
    """Wraps the base model with the one CodeBC LoRA adapter (carried through CI → VD → TI)."""
    from peft import get_peft_model

    return get_peft_model(model, lora_config(args or CodeBCStageArguments()))


def adapter_state(model) -> dict[str, torch.Tensor]:
    """A copy of the LoRA weights (to evaluate each stage's checkpoint of the one sequential adapter)."""
    from peft import get_peft_model_state_dict

    return copy.deepcopy({k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()})


def load_adapter_state(model, state: dict[str, torch.Tensor]) -> None:
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(model, state)


def base_state_dict(peft_model) -> dict[str, torch.Tensor]:
    """The base model's own weights under their original names (LoRA tensors dropped, `base_layer.` unwrapped)."""
    state = {}
    for name, tensor in peft_model.get_base_model().state_dict().items():
        if "lora_" in name or "trainable_tokens_delta" in name:
            continue
        state[name.replace(".token_adapter.base_layer.", ".").replace(".base_layer.", ".")] = tensor
    return state


def save_codebc(peft_model, out_dir, tokenizer=None, spec=None):
    """Saves base model + CodeBC adapter (+ tokenizer, + card with `spec`) into one folder, atomically.

    The base goes to the folder itself through `save_pretrained(state_dict=...)` with the LoRA tensors removed; the
    adapter goes to `adapter/` (an `adapter_config.json` beside the base's `config.json` would make transformers
    attach the adapter while loading the base, and `PeftModel` would then add it a second time). Load with
    `PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder), folder / "adapter")`.
    """
    from hf_ext.core.hub import atomic_write_dir

    def write(tmp):
        peft_model.get_base_model().save_pretrained(tmp, state_dict=base_state_dict(peft_model))
        peft_model.save_pretrained(tmp / "adapter")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if spec is not None:
            from hf_ext.core.cards import render_card

            render_card(spec).save(tmp / "README.md")

    return atomic_write_dir(out_dir, write)
