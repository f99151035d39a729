"""Training ORCA with `Trainer`: the optimiser groups, the feature-level counterfactual intervention, and the
`hf-ext train orca` script (also runs under `accelerate launch --multi_gpu --num_processes 2`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import HfArgumentParser, Trainer, TrainerCallback, TrainingArguments

from .configuration_orca import OrcaConfig
from .modeling_orca import OrcaModel

MODEL_COLUMNS = ("input_ids", "click_labels", "dwell_labels")
# Evaluation also reads the true read time (for MAE in seconds) when the dataset has it.
EVAL_COLUMNS = (*MODEL_COLUMNS, "dwell_seconds")


@dataclass
class OrcaTrainingArguments(TrainingArguments):
    """`TrainingArguments` with the ORCA training knobs and the official defaults (lr 1e-3, weight decay 1e-4,
    batch 512; the loader is shuffled, unlike the released code). The device comes from `TrainingArguments` /
    Accelerate as usual (`use_cpu=True` to force the CPU).

    Args:
        nde_lr_ratio (`float`, defaults to 1.0): learning-rate ratio of the NDE tower and head. The released code
            reads an undeclared `united_lr_ratio`; 1.0 is the documented choice.
        use_mask_fea (`bool`, defaults to `True`): the feature-level counterfactual intervention.
        mask_fea_ratio (`float`, defaults to 0.2): share of batches also served with post-click fields masked.
        early_stopping_patience (`int`, *optional*, defaults to 1): with an evaluation strategy, stop after this
            many evaluations without a lower validation CE of the prediction (ORCA) head and restore the best
            weights, as the released code does (patience 1). `None` turns it off.
    """

    nde_lr_ratio: float = field(default=1.0, metadata={"help": "LR ratio of the NDE tower/head (united_lr_ratio)."})
    use_mask_fea: bool = field(default=True, metadata={"help": "Counterfactual intervention on post-click fields."})
    mask_fea_ratio: float = field(default=0.2, metadata={"help": "Share of batches re-served masked."})
    early_stopping_patience: int | None = field(
        default=1, metadata={"help": "Evaluations without a better ORCA-head validation CE before stopping."}
    )
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    per_device_train_batch_size: int = 512
    per_device_eval_batch_size: int = 2048
    num_train_epochs: float = 3.0
    save_strategy: str = "no"
    dataloader_num_workers: int = 0
    ddp_find_unused_parameters: bool = False
    label_names: list[str] | None = field(default_factory=lambda: ["click_labels", "dwell_labels", "dwell_seconds"])

    def __post_init__(self):
        import os

        # Several processes (torchrun / accelerate launch) and no GPU: data-parallel CPU training (gloo) needs
        # Accelerate's CPU mode; on one process, or with a GPU, the device is left to TrainingArguments/Accelerate.
        if not self.use_cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
            self.use_cpu = True
        super().__post_init__()
        if not 0.0 <= self.mask_fea_ratio <= 1.0:
            raise ValueError(f"mask_fea_ratio must be in [0, 1], got {self.mask_fea_ratio}")
        if self.nde_lr_ratio <= 0:
            raise ValueError(f"nde_lr_ratio must be > 0, got {self.nde_lr_ratio}")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            raise ValueError(f"early_stopping_patience must be >= 1 or None, got {self.early_stopping_patience}")


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
                    for k in ("dt_macro_f1", "dt_mae_s", "moderate_share_pred", "moderate_share_true", "js_distance")
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
            groups.append({"params": nde, "lr": self.args.learning_rate * self.args.nde_lr_ratio})
        self.optimizer = torch.optim.Adam(groups, lr=self.args.learning_rate, weight_decay=self.args.weight_decay)
        return self.optimizer

    def _counterfactual_step(self, inputs: dict[str, torch.Tensor]) -> None:
        model = self._unwrapped()
        params = [p for p in model.nde_parameters() if p.requires_grad]
        if not params or "click_labels" not in inputs:
            return
        if self._nde_optimizer is None:
            self._nde_optimizer = torch.optim.Adam(
                params, lr=self.args.learning_rate * self.args.nde_lr_ratio, weight_decay=self.args.weight_decay
            )
        acc = self.accelerator
        reduce = (lambda g: acc.reduce(g, reduction="mean")) if acc.num_processes > 1 else None
        counterfactual_nde_step(model, inputs, self._nde_optimizer, reduce=reduce)

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        cfg = self._unwrapped().config
        if cfg.use_orca and self.args.use_mask_fea and cfg.post_click_fields:
            if self._mask_rng.random() < self.args.mask_fea_ratio:
                self._counterfactual_step(inputs)
        return loss


# ----------------------------------------------------------------------------------------------------------------
# `hf-ext train orca`
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class OrcaScriptArguments:
    """Data and model choices of `hf-ext train orca`."""

    backbone: str = field(default="mmoe", metadata={"help": "mmoe or ple"})
    use_orca: bool = field(default=True, metadata={"help": "False trains the plain multi-task baseline"})
    shortcut_strength: float = field(default=2.0, metadata={"help": "synthetic clickbait shortcut strength s"})
    num_impressions: int = field(default=50_000, metadata={"help": "synthetic impressions"})
    generator_seed: int = field(default=0, metadata={"help": "seed of the synthetic generator"})
    tenrec_csv: str | None = field(default=None, metadata={"help": "train on a Tenrec QK-article CSV instead"})
    artifact_dir: str | None = field(
        default=None, metadata={"help": "where to save the model (default OUTPUT_DIR/artifact)"}
    )
    sync_report: str | None = field(default=None, metadata={"help": "write per-rank checksums and seen rows (JSON)"})


def make_parser() -> HfArgumentParser:
    return HfArgumentParser((OrcaScriptArguments, OrcaTrainingArguments), prog="hf-ext train orca")


def load_training_data(script: OrcaScriptArguments, seed: int):
    """Returns `(DatasetDict with train/validation/test model features, field names, vocab sizes, post-click)`."""
    from .data import (
        FIELD_NAMES,
        POST_CLICK_FIELDS,
        SyntheticOrcaConfig,
        field_vocab_sizes,
        generate_synthetic,
        to_model_features,
        train_val_test_split,
    )
    from .tenrec import load_tenrec_qk_article

    if script.tenrec_csv:
        ds, names, sizes, post_click = load_tenrec_qk_article(script.tenrec_csv)
    else:
        gen = SyntheticOrcaConfig(
            num_impressions=script.num_impressions,
            shortcut_strength=script.shortcut_strength,
            seed=script.generator_seed,
        )
        ds, names, sizes, post_click = (
            generate_synthetic(gen),
            list(FIELD_NAMES),
            field_vocab_sizes(gen),
            list(POST_CLICK_FIELDS),
        )
    splits = train_val_test_split(to_model_features(ds, names, sizes), seed=seed)
    return splits, names, sizes, post_click


class _RecordingCollator:
    """Collates model columns and remembers which `row_id`s this rank saw (for the data-sharding check)."""

    def __init__(self):
        self.seen: list[int] = []

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        self.seen.extend(int(f["row_id"]) for f in features if "row_id" in f)  # eval batches carry no row_id
        keys = [k for k in EVAL_COLUMNS if k in features[0]]
        return {k: torch.as_tensor(np.stack([np.asarray(f[k]) for f in features])) for k in keys}


def main(argv: list[str] | None = None) -> dict:
    """Trains one ORCA (or baseline) model with `Trainer` and saves it as a Hub artifact."""
    script, args = make_parser().parse_args_into_dataclasses(args=argv)
    splits, names, sizes, post_click = load_training_data(script, seed=args.seed)
    config = OrcaConfig(
        field_names=names,
        field_vocab_sizes=sizes,
        post_click_fields=post_click,
        backbone=script.backbone,
        use_orca=script.use_orca,
    )
    torch.manual_seed(args.seed)
    model = OrcaModel(config)
    train = splits["train"]
    collator = None
    if script.sync_report:
        train = train.add_column("row_id", list(range(len(train))))
        args = dataclasses.replace(args, remove_unused_columns=False)  # keep row_id for the collator
        collator = _RecordingCollator()
    trainer = OrcaTrainer(
        model=model,
        args=args,
        train_dataset=train.select_columns([*MODEL_COLUMNS] + (["row_id"] if collator else [])),
        eval_dataset=splits["validation"].select_columns(list(EVAL_COLUMNS)),
        data_collator=collator,
    )
    result = trainer.train()
    metrics = {"train_loss": result.training_loss, **trainer.evaluate()}
    state = trainer.state
    if script.sync_report:
        _write_sync_report(trainer, collator, Path(script.sync_report))
    if trainer.is_world_process_zero():
        from hf_ext.core.hub import save_artifact

        from . import SPEC

        out = save_artifact(trainer.model, script.artifact_dir or Path(args.output_dir) / "artifact", SPEC)
        metrics["artifact_dir"] = str(out)
        print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in metrics.items()}, indent=1))
    metrics["global_step"] = state.global_step
    return metrics


def _write_sync_report(trainer: OrcaTrainer, collator: _RecordingCollator, path: Path) -> None:
    """All ranks: gather a parameter checksum and the rows each rank trained on; rank 0 writes them as JSON."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    checksum = torch.tensor([float(sum(p.detach().double().sum() for p in model.parameters()))], dtype=torch.float64)
    seen = torch.tensor(collator.seen, dtype=torch.long)
    length = torch.tensor([seen.numel()])
    acc = trainer.accelerator
    checksums = acc.gather(checksum).tolist()
    lengths = acc.gather(length).tolist()
    padded = torch.full((max(lengths),), -1, dtype=torch.long)
    padded[: seen.numel()] = seen
    rows = acc.gather(padded).view(len(lengths), -1).tolist()
    if acc.is_main_process:
        report = {
            "world_size": acc.num_processes,
            "checksums": checksums,
            "rows_per_rank": [[r for r in rank if r >= 0] for rank in rows],
            "global_step": trainer.state.global_step,
            "train_size": len(trainer.train_dataset),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
