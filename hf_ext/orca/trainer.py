"""[`OrcaTrainer`] and its callbacks: ORCA's optimiser groups, the feature-level counterfactual intervention, the
evaluation metrics and early stopping on the ORCA head. The arguments ([`~hf_ext.orca.train.OrcaTrainingArguments`])
and the `hf-ext train orca` script are in `train.py`; the trainer reads ORCA's knobs from any `TrainingArguments`
(the defaults below when a plain one is given)."""

from __future__ import annotations

import contextlib
import random

import numpy as np
import torch
from transformers import Trainer, TrainerCallback

from .data import numpy_columns
from .modeling_orca import OrcaModel

MODEL_COLUMNS = ("input_ids", "click_labels", "dwell_labels")
# Evaluation also reads the true read time (for MAE in seconds) when the dataset has it.
EVAL_COLUMNS = (*MODEL_COLUMNS, "dwell_seconds")
# ORCA's training knobs when the trainer is given a plain `TrainingArguments` (the defaults of OrcaTrainingArguments).
ORCA_TRAINING_DEFAULTS = {"nde_lr_ratio": 1.0, "use_mask_fea": True, "mask_fea_ratio": 0.2}
# Adam's multi-tensor (foreach) implementation, also on the CPU (where torch's default is the per-tensor Python loop):
# the same arithmetic, op for op, on the same kernels (bit-identical steps, pinned by a test), with the per-parameter
# Python overhead of ~40 small tensors gone.
ADAM_FOREACH = True


@contextlib.contextmanager
def _frozen_batchnorm_stats(model: torch.nn.Module, keep: list[torch.nn.Module]):
    """Temporarily sets momentum 0 on every BatchNorm outside `keep`, so a forward pass leaves its running
    statistics as they were."""
    kept = {id(m) for root in keep for m in root.modules()}
    frozen = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and id(m) not in kept]
    saved = [(m.momentum, m.num_batches_tracked.clone() if m.num_batches_tracked is not None else None) for m in frozen]
    for m in frozen:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, (momentum, tracked) in zip(frozen, saved):
            m.momentum = momentum
            if tracked is not None:
                m.num_batches_tracked.copy_(tracked)


class TensorRows(torch.utils.data.Dataset):
    """Columns of a model-features dataset held as tensors, served a batch at a time: the `Trainer`'s loader asks
    for a batch of indices (`__getitems__`) and gets the stacked columns in one indexing, instead of formatting every
    row of an Arrow table and stacking them again. Same indices, same values and dtypes as the default collator
    makes from the rows (`input_ids` int64, `click_labels` float32, `dwell_labels` int64, `dwell_seconds` float32).
    Use with [`stacked_collator`] and `remove_unused_columns=False`.

    Args:
        dataset (`datasets.Dataset`): the model-features dataset ([`~hf_ext.orca.data.to_model_features`]).
        columns (`tuple[str, ...]`): the columns to keep (those missing from `dataset` are skipped).
    """

    def __init__(self, dataset, columns: tuple[str, ...]):
        keep = [c for c in columns if c in dataset.column_names]
        table = numpy_columns(dataset, keep)
        self.columns = {c: torch.as_tensor(table[c]) for c in keep}
        self.length = len(dataset)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {k: v[index] for k, v in self.columns.items()}

    def __getitems__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        return {k: v[idx] for k, v in self.columns.items()}


def stacked_collator(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The collator of [`TensorRows`]: its batches are already stacked."""
    return batch


def counterfactual_nde_step(
    model: OrcaModel, inputs: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer, reduce=None
) -> torch.Tensor:
    """The feature-level counterfactual intervention on one batch: the same loss on the batch with its post-click
    fields blocked, stepping only the NDE tower and head with their own optimiser (through
    [`~OrcaModel.counterfactual_nde_loss`], which has the same gradient for them as the full loss).

    `autograd.grad` leaves any pending main-step `.grad` untouched (restored after the step) and bypasses DDP's
    reducer; `reduce` (e.g. a cross-rank mean) is applied to each gradient instead. BatchNorm running statistics
    outside the NDE branch are frozen for this pass: masked batches must not shift what the backbone and the other
    towers normalise with at inference.

    Args:
        model ([`OrcaModel`]): the unwrapped model.
        inputs (`dict[str, torch.Tensor]`): the batch (`input_ids`, `click_labels`, `dwell_labels`).
        optimizer (`torch.optim.Optimizer`): over `model.nde_parameters()`.
        reduce (`Callable`, *optional*): applied to each NDE gradient before the step.
    """
    params = [p for p in model.nde_parameters() if p.requires_grad]
    masked = dict(inputs, input_ids=model.mask_post_click(inputs["input_ids"]))
    with _frozen_batchnorm_stats(model, keep=model.nde_modules()):
        loss = model.counterfactual_nde_loss(**{k: masked[k] for k in ("input_ids", "click_labels", "dwell_labels")})
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    saved = [p.grad for p in params]
    for p, g in zip(params, grads):
        g = torch.zeros_like(p) if g is None else g
        p.grad = reduce(g) if reduce is not None else g
    optimizer.step()
    for p, g in zip(params, saved):
        p.grad = g
    return loss.detach()


def make_compute_metrics(bin_seconds, moderate_bins: tuple[int, ...] = (2, 3, 4, 5)):
    """A `compute_metrics` for [`OrcaTrainer`]: CTR AUC on all rows; on clicked rows the prediction head's DT
    cross-entropy (`dt_ce`, the early-stopping criterion), macro-F1, MAE in seconds, moderate-bin share and JS
    distance to the true histogram, plus the raw head's CE (`raw_dt_ce`).

    Args:
        bin_seconds (`list[float]`): seconds of each bin (`config.bin_seconds`).
        moderate_bins (`tuple[int, ...]`, defaults to `(2, 3, 4, 5)`): bins counted as "moderate".
    """
    from .metrics import ctr_metrics, dt_metrics

    seconds_of_bin = np.asarray(bin_seconds, dtype=np.float64)
    moderate_bins = tuple(b for b in moderate_bins if b < seconds_of_bin.size)  # fewer bins (e.g. 5 ratings)

    def compute_metrics(eval_pred) -> dict[str, float]:
        click_probs, dt_probs, dt_probs_raw = (np.asarray(a, dtype=np.float64) for a in eval_pred.predictions)
        click, dwell, seconds = (np.asarray(a) for a in eval_pred.label_ids)
        clicked = click > 0.5
        out = {"ctr_auc": ctr_metrics(click, click_probs)["ctr_auc"]}
        if not clicked.any():
            return out
        y = dwell[clicked].astype(np.int64)
        probs = dt_probs[clicked] / dt_probs[clicked].sum(1, keepdims=True)
        raw = dt_probs_raw[clicked] / dt_probs_raw[clicked].sum(1, keepdims=True)
        dt = dt_metrics(
            y, probs, dwell_seconds_true=seconds[clicked], bin_seconds=seconds_of_bin, moderate_bins=moderate_bins
        )
        rows = np.arange(y.size)
        out.update(
            {
                "dt_ce": float(-np.mean(np.log(np.clip(probs[rows, y], 1e-12, None)))),
                "raw_dt_ce": float(-np.mean(np.log(np.clip(raw[rows, y], 1e-12, None)))),
                **{
                    k: dt[k]
                    for k in (
                        "dt_macro_f1",
                        "dt_mae_s",
                        "moderate_share_pred",
                        "moderate_share_true",
                        "moderate_recall",
                        "js_distance",
                    )
                },
            }
        )
        return out

    return compute_metrics


class OrcaEarlyStoppingCallback(TrainerCallback):
    """Early stopping on a validation metric that must go down (default `eval_dt_ce`, the cross-entropy of the
    prediction head, which is the ORCA head for ORCA models), with the best weights kept in memory and restored at
    the end of training, as the released code's early stopper does (patience 1).

    Args:
        patience (`int`, defaults to 1): evaluations without improvement before stopping.
        metric (`str`, defaults to `"eval_dt_ce"`): key of the evaluation metrics.
    """

    def __init__(self, patience: int = 1, metric: str = "eval_dt_ce"):
        self.patience, self.metric = patience, metric
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad_evals = 0
        self._best_state: dict[str, torch.Tensor] | None = None

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        value = (metrics or {}).get(self.metric)
        if value is None:
            raise ValueError(
                f"early stopping needs {self.metric!r} in the evaluation metrics, got {sorted(metrics or {})}"
            )
        if self.best is None or value < self.best:
            self.best, self.best_step, self.bad_evals = float(value), state.global_step, 0
            if model is not None:
                self._best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            self.bad_evals += 1
            if self.bad_evals >= self.patience:
                control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self._best_state is not None and model is not None:
            model.load_state_dict(self._best_state)
        return control


class BestStateCallback(TrainerCallback):
    """Keeps (in memory) the weights at the best value of one validation metric, without stopping training: the
    reproduction scores CTR with the weights at the best validation CTR AUC (CTR judged on its own stopping rule),
    while the run itself stops on the DT criterion.

    Args:
        metric (`str`, defaults to `"eval_ctr_auc"`): key of the evaluation metrics.
        higher_is_better (`bool`, defaults to `True`): direction of `metric`.
    """

    def __init__(self, metric: str = "eval_ctr_auc", higher_is_better: bool = True):
        self.metric, self.sign = metric, 1.0 if higher_is_better else -1.0
        self.best: float | None = None
        self.state: dict[str, torch.Tensor] | None = None

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        value = (metrics or {}).get(self.metric)
        if value is None or not np.isfinite(value):
            return control
        if self.best is None or self.sign * value > self.sign * self.best:
            self.best = float(value)
            if model is not None:
                self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return control


class OrcaTrainer(Trainer):
    """`Trainer` for [`OrcaModel`] (subclassed because the optimisation changes, not just the loss).

    - Adam with weight decay and two parameter groups: the NDE tower/head at `lr · nde_lr_ratio`, the rest at `lr`.
    - The feature-level counterfactual intervention: with probability `mask_fea_ratio` a batch is served a second
      time with its post-click fields blocked, and only the NDE tower and head are updated from it, with their own
      Adam. The draw uses a generator seeded from `args.seed`, identical on every rank, and the NDE gradients are
      averaged across ranks, so data-parallel replicas stay in sync.
    - `evaluate()` returns the ORCA metrics ([`make_compute_metrics`]) unless another `compute_metrics` is given,
      and with an evaluation strategy and `args.early_stopping_patience` an [`OrcaEarlyStoppingCallback`] is added.
    """

    loss_is_scaled_for_ga = False  # the model returns a per-batch mean

    def __init__(self, *args, **kwargs):
        model = kwargs.get("model", args[0] if args else None)
        if kwargs.get("compute_metrics") is None and model is not None:
            kwargs["compute_metrics"] = make_compute_metrics(model.config.bin_seconds)
        super().__init__(*args, **kwargs)
        self._mask_rng = random.Random(self.args.seed)
        self._nde_optimizer = None
        patience = getattr(self.args, "early_stopping_patience", None)
        if patience is not None and self.args.eval_strategy != "no" and self.eval_dataset is not None:
            self.add_callback(OrcaEarlyStoppingCallback(patience=patience))

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """Returns `(loss, (click_probs, dt_probs, dt_probs_raw), (click, dwell_bin, dwell_seconds))`; without
        `dwell_seconds` in the batch the true bin's seconds stand in for it."""
        inputs = self._prepare_inputs(inputs)
        model_inputs = {k: inputs[k] for k in MODEL_COLUMNS if inputs.get(k) is not None}
        with torch.no_grad():
            out = model(**model_inputs)
        loss = out.loss.detach() if out.loss is not None else None
        if prediction_loss_only:
            return loss, None, None
        preds = (out.click_probs, out.dt_logits.float().softmax(-1), out.dt_logits_raw.float().softmax(-1))
        if "click_labels" not in model_inputs or "dwell_labels" not in model_inputs:
            return loss, preds, None
        dwell = model_inputs["dwell_labels"]
        seconds = inputs.get("dwell_seconds")
        if seconds is None:
            bins = self.accelerator.unwrap_model(model).bin_seconds
            seconds = torch.where(dwell >= 0, bins[dwell.clamp_min(0)], torch.zeros_like(bins[:1]))
        return loss, preds, (model_inputs["click_labels"], dwell, seconds.float())

    def _orca_arg(self, name: str):
        # A plain `TrainingArguments` has no ORCA knobs: use the official defaults (see `OrcaTrainingArguments`).
        return getattr(self.args, name, ORCA_TRAINING_DEFAULTS[name])

    def _unwrapped(self) -> OrcaModel:
        return self.accelerator.unwrap_model(self.model)

    def create_optimizer(self, model=None):
        if self.optimizer is not None:
            return self.optimizer
        model = self._unwrapped()
        nde_ids = {id(p) for p in model.nde_parameters()}
        rest = [p for p in model.parameters() if p.requires_grad and id(p) not in nde_ids]
        nde = [p for p in model.nde_parameters() if p.requires_grad]
        groups = [{"params": rest, "lr": self.args.learning_rate}]
        if nde:
            groups.append({"params": nde, "lr": self.args.learning_rate * self._orca_arg("nde_lr_ratio")})
        self.optimizer = torch.optim.Adam(
            groups, lr=self.args.learning_rate, weight_decay=self.args.weight_decay, foreach=ADAM_FOREACH
        )
        return self.optimizer

    def _counterfactual_step(self, inputs: dict[str, torch.Tensor]) -> None:
        model = self._unwrapped()
        params = [p for p in model.nde_parameters() if p.requires_grad]
        if not params or "click_labels" not in inputs:
            return
        if self._nde_optimizer is None:
            self._nde_optimizer = torch.optim.Adam(
                params,
                lr=self.args.learning_rate * self._orca_arg("nde_lr_ratio"),
                weight_decay=self.args.weight_decay,
                foreach=ADAM_FOREACH,
            )
        acc = self.accelerator
        reduce = (lambda g: acc.reduce(g, reduction="mean")) if acc.num_processes > 1 else None
        counterfactual_nde_step(model, inputs, self._nde_optimizer, reduce=reduce)

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        cfg = self._unwrapped().config
        if cfg.use_orca and self._orca_arg("use_mask_fea") and cfg.post_click_fields:
            if self._mask_rng.random() < self._orca_arg("mask_fea_ratio"):
                self._counterfactual_step(inputs)
        return loss


__all__ = [
    "BestStateCallback",
    "EVAL_COLUMNS",
    "MODEL_COLUMNS",
    "OrcaEarlyStoppingCallback",
    "OrcaTrainer",
    "TensorRows",
    "counterfactual_nde_step",
    "make_compute_metrics",
    "stacked_collator",
]
