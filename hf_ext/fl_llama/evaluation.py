"""Evaluation of a split model on yes/no cloze prompts (accuracy, yes-rate, answer loss, ROC AUC of the margin) and
the hidden-state scale the noise is chosen relative to (mean |h_A|)."""

from __future__ import annotations

import torch

from .modeling_fl_llama import FlLlamaClientModel, causal_mask_4d, position_ids_from_mask
from .split_model import FlLlamaSplitForCausalLM


@torch.no_grad()
def evaluate(split: FlLlamaSplitForCausalLM, data: dict[str, torch.Tensor], yes_id: int, no_id: int,
             batch_size: int = 32, logits_to_keep: int = 0, per_item: bool = False) -> dict:  # fmt: skip
    """Yes/no accuracy (is the `yes` logit above the `no` logit at the answer position), the share of `yes`
    predictions (1.0 or 0.0 means a constant predictor), the mean answer loss, and the ROC AUC of the margin
    `logit(yes) − logit(no)` against the label — threshold-free, so it still ranks examples when every prediction
    falls on one side (0.5 = chance). `per_item=True` adds `"margins"`: the margin of every prompt, in order (what a
    paired comparison over the same prompts resamples)."""
    split.client.eval()
    correct, yes_count, loss_sum, n = 0, 0, 0.0, len(data["input_ids"])
    margins = []
    for i in range(0, n, batch_size):
        sl = slice(i, i + batch_size)
        out = split(
            data["input_ids"][sl], data["attention_mask"][sl], data["labels"][sl], logits_to_keep=logits_to_keep
        )
        margin = out.logits[:, -2, yes_id] - out.logits[:, -2, no_id]
        pred = (margin > 0).long()
        margins.append(margin.float())
        correct += int((pred == data["label"][sl]).sum())
        yes_count += int(pred.sum())
        loss_sum += float(out.loss) * len(pred)
    auc = margin_auc(torch.cat(margins), data["label"][:n])
    out = {"accuracy": correct / n, "yes_rate": yes_count / n, "loss": loss_sum / n, "auc": auc}
    if per_item:
        out["margins"] = torch.cat(margins).tolist()
    return out


def margin_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC by the Mann-Whitney U statistic (ties count one half); NaN when only one class is present."""
    pos, neg = scores[labels.bool()], scores[~labels.bool()]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).float() + 0.5 * (diff == 0).float()).mean())


@torch.no_grad()
def mean_abs_hidden(client: FlLlamaClientModel, data: dict[str, torch.Tensor], num_input_blocks: int) -> float:
    """mean |h_A| over real tokens at depth `a` (the scale the noise is chosen relative to)."""
    a0 = client.config.num_input_blocks
    client.config.num_input_blocks = num_input_blocks
    try:
        mask = data["attention_mask"].bool()
        h = client.head(data["input_ids"], causal_mask_4d(mask, mask.shape[1]), position_ids_from_mask(mask))
        return float(h.abs()[mask].mean())
    finally:
        client.config.num_input_blocks = a0


__all__ = ["evaluate", "margin_auc", "mean_abs_hidden"]
