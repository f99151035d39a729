"""Configuration of the H2Tune triple-matrix LoRA adapter (arXiv 2507.22633).

PEFT 0.21 has no public way to add a tuner type, so H2Tune is a [`~peft.LoraConfig`] subclass: the `use_h2tune`
field is tagged `is_lora_variant`, which makes PEFT's LoRA layers pick the [`~hf_ext.h2tune.layer.H2TuneVariant`],
and `__post_init__` registers [`~hf_ext.h2tune.layer.H2TuneLinear`] for `nn.Linear` and GPT-2's `Conv1D`
(`_register_custom_module`; the mapping is not serialized, so it is redone on every construction).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from peft import LoraConfig

# PEFT versions this module was tested against. The variant and config hooks are private PEFT API
# (see `hf_ext/h2tune/hooks.py` and tests/h2tune/test_hooks.py, which fail loudly when they change).
TESTED_PEFT_RANGE = (">=0.21.2", "<0.22")

H2TUNE_MARKER = "use_h2tune"
# The `peft_type` written to adapter_config.json. Not a member of PEFT's closed `PeftType` enum on purpose: plain
# PEFT (no hf_ext) refuses the adapter with `KeyError: 'HF_EXT_H2TUNE'` instead of silently building an ordinary
# LoRA without the middle matrix (logits off by up to 0.42). `import hf_ext` maps it back (see `hooks.py`).
H2TUNE_PEFT_TYPE = "HF_EXT_H2TUNE"


@dataclass
class H2TuneConfig(LoraConfig):
    """Config of a client's H2Tune adapter: ΔW = (α/r)·B(T+I)A with T an r×r block picked out of a shared R×R
    middle matrix by a top-k (k = r²) of a learnable score matrix S.

    Paper: [H2Tune: Federated Foundation Model Fine-Tuning with Hybrid Heterogeneity](https://arxiv.org/abs/2507.22633).

    Args:
        r (`int`, defaults to 8): the client's LoRA rank r_c (its resource budget; k = r_c² entries of the shared
            matrix are trained).
        global_rank (`int`, defaults to 16): R = max_c r_c, the side of the shared middle matrix (`lora_lT`) and of
            the score matrix S (`lora_S`). Must be ≥ every layer's rank.
        sparsify (`bool`, defaults to `True`): pick T by top-k of S. `False` is the "no sparsification" ablation:
            no learned selection, T is the fixed leading r×r block of the shared matrix (the whole R×R matrix,
            k = R², when r == R; the spec's ablation, extended to smaller ranks).
        use_h2tune (`bool`, defaults to `True`): the LoRA-variant switch PEFT dispatches on; also the marker that
            lets plain `PeftModel.from_pretrained` rebuild an `H2TuneConfig` (see `hf_ext.h2tune.hooks`).
        lora_alpha (`int`, defaults to 16) and lora_dropout (`float`, defaults to 0.05): the paper's code defaults.
        target_modules (defaults to `"all-linear"`): every linear layer of the decoder except the output head.
    """

    r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: Any = "all-linear"
    global_rank: int = field(default=16, metadata={"help": "R: side of the shared middle matrix and of S."})
    sparsify: bool = field(
        default=True, metadata={"help": "Top-k selection of T; False = fixed leading block (ablation)."}
    )
    use_h2tune: bool = field(default=True, metadata={"is_lora_variant": True, "help": "H2Tune LoRA variant switch."})

    def __post_init__(self):
        for name in ("r", "global_rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"H2TuneConfig.{name} must be an integer >= 1, got {value!r}")
        super().__post_init__()
        ranks = [self.r, *(self.rank_pattern or {}).values()]
        if self.global_rank < max(ranks):
            raise ValueError(f"global_rank R={self.global_rank} must be >= every LoRA rank, got ranks {ranks}")
        if self.use_dora:
            raise ValueError("H2Tune does not combine with DoRA")
        from torch import nn
        from transformers.pytorch_utils import Conv1D

        from .layer import H2TuneLinear

        self._register_custom_module({nn.Linear: H2TuneLinear, Conv1D: H2TuneLinear})

    def save_pretrained(self, save_directory: str, **kwargs) -> None:
        """PEFT's save, with `peft_type` set to [`H2TUNE_PEFT_TYPE`] in `adapter_config.json` (see above)."""
        import json
        import os

        from peft.utils import CONFIG_NAME

        super().save_pretrained(save_directory, **kwargs)
        path = os.path.join(save_directory, CONFIG_NAME)
        with open(path) as f:
            data = json.load(f)
        data["peft_type"] = H2TUNE_PEFT_TYPE
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(json.dumps(data, indent=2, sort_keys=True))
        os.replace(tmp, path)

    @classmethod
    def from_dict(cls, config_dict: dict) -> H2TuneConfig:
        """Inverse of `to_dict()` (keys that are not fields, such as PEFT's bookkeeping, are ignored)."""
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        return cls(**{k: v for k, v in config_dict.items() if k in names and k != "peft_type"})
