"""Training knobs of FL-LLaMA (kept apart from the partition config), the per-part optimiser, and LoRA on a part."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass
class FlLlamaTrainingArguments:
    """Optimisation of each part, as in the official scripts: one AdamW per part with a linear decay to 0.

    Args:
        learning_rate (`float`): AdamW learning rate of every part.
        adam_beta1, adam_beta2 (`float`): AdamW betas (0.9, 0.999).
        adam_epsilon (`float`): AdamW eps (1e-5 in the official code).
        weight_decay (`float`): AdamW weight decay (0.01).
        max_grad_norm (`float`, *optional*): per-part gradient-norm clip (1.0); `None` disables it.
        max_steps (`int`, *optional*): steps of the linear schedule `1 -> 0` (`LinearLR`); `None` (the default)
            keeps the learning rate constant. There is no silent length: the server takes the client's value at the
            handshake (or refuses a client whose value differs from the one it was started with), and a part that
            steps past `max_steps` warns once that its learning rate is 0.
        dp_gradient (`bool`): the optional `--add_DP_gradient`: per-sample clip of `g_B` then Gaussian noise with the
            client's `σ` before it is sent.
        dp_grad_clip (`float`): per-sample L2 bound of `g_B` (0.04 in the official code).
        seed (`int`): seed of the client's noise generator and of the data order.
        global_clip (`bool`): clip the gradient norm of all three parts together (`max_grad_norm` over A, B and C, as
            a centralised optimiser clips the whole model) instead of each part by itself (the official code's
            per-part clip). The parties then exchange their squared gradient norms (one float each way per step); with
            `s = 0` the split run then equals centralised training with the same clip.
    """

    learning_rate: float = 1e-3
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-5
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0
    max_steps: int | None = None
    dp_gradient: bool = False
    dp_grad_clip: float = 0.04
    seed: int = 0
    global_clip: bool = False

    def __post_init__(self):
        from .configuration_fl_llama import _check_int, _check_real

        name = type(self).__name__
        _check_real(name, "learning_rate", self.learning_rate, 0.0, low_open=True)
        _check_real(name, "adam_beta1", self.adam_beta1, 0.0, 1.0)
        _check_real(name, "adam_beta2", self.adam_beta2, 0.0, 1.0)
        _check_real(name, "adam_epsilon", self.adam_epsilon, 0.0, low_open=True)
        _check_real(name, "weight_decay", self.weight_decay, 0.0)
        if self.max_grad_norm is not None:
            _check_real(name, "max_grad_norm", self.max_grad_norm, 0.0, low_open=True)
        if self.max_steps is not None and (
            isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1
        ):
            raise ValueError(
                f"{name}.max_steps must be >= 1 (an integer; None keeps the learning rate constant), "
                f"got {self.max_steps!r}"
            )
        if not isinstance(self.dp_gradient, bool):
            raise TypeError(f"{name}.dp_gradient must be True or False, got {self.dp_gradient!r}")
        _check_real(name, "dp_grad_clip", self.dp_grad_clip, 0.0, low_open=True)
        _check_int(name, "seed", self.seed, 0)
        if not isinstance(self.global_clip, bool):
            raise TypeError(f"{name}.global_clip must be True or False, got {self.global_clip!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class PartOptimizer:
    """AdamW + `LinearLR(1 -> 0 over max_steps)` (constant without `max_steps`) + gradient-norm clip for one part's
    trainable parameters.

    A part with nothing to train (a part left out of `lora_parts` while LoRA is on) gets no AdamW at all — torch
    rejects an empty parameter list — and its `step` only counts, so the schedule position stays in checkpoints.
    """

    def __init__(self, params: Iterable[nn.Parameter], args: FlLlamaTrainingArguments):
        self.params = [p for p in params if p.requires_grad]
        self.args = args
        self.optimizer, self.scheduler, self._epoch, self._warned = None, None, 0, False
        if self.params:
            self.optimizer = torch.optim.AdamW(self.params, lr=args.learning_rate,
                                               betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon,
                                               weight_decay=args.weight_decay)  # fmt: skip
            if args.max_steps is not None:
                self.scheduler = torch.optim.lr_scheduler.LinearLR(self.optimizer, 1.0, 0.0,
                                                                   total_iters=args.max_steps)  # fmt: skip

    @property
    def last_epoch(self) -> int:
        return self._epoch

    def grad_sq_norm(self) -> float:
        """The squared L2 norm of this part's gradients (what a global clip adds up over the parts)."""
        grads = [p.grad for p in self.params if p.grad is not None]
        return float(torch.nn.utils.get_total_norm(grads, norm_type=2.0)) ** 2 if grads else 0.0

    def step(self, clip_coef: float | None = None) -> float:
        """Clips, steps, advances the schedule and zeroes the gradients; returns the pre-clip gradient norm.

        `clip_coef` (a global clip decided over every part, see `FlLlamaTrainingArguments.global_clip`) multiplies
        the gradients instead of this part's own clip."""
        self._epoch += 1
        if self.args.max_steps is not None and self._epoch > self.args.max_steps and not self._warned:
            self._warned = True
            warnings.warn(
                f"step {self._epoch} is past max_steps={self.args.max_steps}: the linear schedule has "
                "brought the learning rate to 0, so this part no longer moves",
                stacklevel=2,
            )
        if self.optimizer is None:
            return 0.0
        grads = [p for p in self.params if p.grad is not None]
        norm = float(torch.nn.utils.get_total_norm([p.grad for p in grads])) if grads else 0.0
        if clip_coef is not None:
            if clip_coef < 1.0:
                torch._foreach_mul_([p.grad for p in grads], clip_coef)
        elif self.args.max_grad_norm is not None and grads:
            torch.nn.utils.clip_grads_with_norm_(grads, self.args.max_grad_norm, torch.tensor(norm))
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.zero_grad()
        return norm

    def zero_grad(self) -> None:
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)

    def state_tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        """The optimiser and schedule state as flat tensors (for safetensors checkpoints, no pickle)."""
        out = {f"{prefix}.scheduler_epoch": torch.tensor(self.last_epoch)}
        for i, p in enumerate(self.params):
            for key, value in (self.optimizer.state.get(p, {}) if self.optimizer else {}).items():
                out[f"{prefix}.{i}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
        return out

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], prefix: str) -> None:
        epoch = int(tensors[f"{prefix}.scheduler_epoch"])
        self._epoch = epoch
        if self.optimizer is None:
            return
        for i, p in enumerate(self.params):
            state = {key.rsplit(".", 1)[1]: v.clone() for key, v in tensors.items() if key.startswith(f"{prefix}.{i}.")}
            if state:
                self.optimizer.state[p] = state
        if self.scheduler is not None:
            self.scheduler.last_epoch = epoch
        factor = 1.0 if self.args.max_steps is None else max(0.0, 1.0 - epoch / self.args.max_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = self.args.learning_rate * factor


def apply_lora(module: nn.Module, layer_prefixes: list[str], rank: int, alpha: float, dropout: float,
               target_modules: list[str]) -> list[nn.Parameter]:  # fmt: skip
    """Injects PEFT LoRA into the attention projections of the given blocks of a part (e.g. `head_layers.0`) and
    returns the LoRA parameters; everything else in those blocks is frozen by the caller."""
    from peft import LoraConfig, inject_adapter_in_model

    if not layer_prefixes:
        return []
    blocks = "|".join(p.replace(".", r"\.") for p in layer_prefixes)
    targets = "|".join(target_modules)
    cfg = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout,
                     target_modules=rf"^({blocks})\.(self_attn|mlp)\.({targets})$")  # fmt: skip
    inject_adapter_in_model(cfg, module)
    return [p for n, p in module.named_parameters()
            if "lora_" in n and any(n.startswith(x + ".") for x in layer_prefixes)]  # fmt: skip


__all__ = ["FlLlamaTrainingArguments", "PartOptimizer", "apply_lora"]
