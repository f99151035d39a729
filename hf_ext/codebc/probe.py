"""CodeBC's two claims measured **without compilation**, by the model's own likelihoods on held-out contracts.

A "probe" is a set of held-out secure contracts and, for each, a copy with one SWC pattern injected
([`~hf_ext.codebc.inject.inject`]): the same host on both sides, so a pair differs only by the injected function.
Neither the hosts nor their copies are seen in pretraining, CI, VD or TI ([`~hf_ext.codebc.pipeline.build_examples`]).

- **Tag steering** ([`tag_delta`]): `Δ = log p(code | bug tag) − log p(code | correct tag)`, the log-likelihood of the
  contract's code block in the TI response format after a forced `bug` vs a forced `correct` tag block (same prompt,
  same scored tokens). If the tag steers, the `bug` tag makes injected code relatively more likely than secure
  code: Δ ranks the injected copies above the secure hosts (AUROC > 0.5).
- **Vulnerability detection** ([`vd_log_odds`]): `log p(bug answer) − log p(correct answer)` after the VD prompt
  (which ends in `[Tag]`); AUROC of injected vs secure.

Both are read as an AUROC with a 95 % percentile-bootstrap interval over **host contracts** (a resampled host
brings its secure and injected versions, [`bootstrap_auroc`]); two stages are compared on the same resamples
(a paired difference, `hf_ext.core.reporting.PairedDifference` with method `bootstrap`), so a
`VerdictRule` decides on it. No generation and no compiler: these measurements do not depend on whether the
model can yet write code that compiles.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from hf_ext.core.reporting import PairedDifference

from .tags import TAG_CLOSE, prompt_style, tag_block, ti_instruction, vd_example


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve of `scores` for binary `labels` (1 = positive): the probability that a random
    positive scores above a random negative, ties counted one half (Mann–Whitney). NaN without both classes."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    n_pos = sum(1 for y in labels if y)
    n_neg = len(labels) - n_pos
    if not n_pos or not n_neg:
        return math.nan
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum, i = 0.0, 0
    while i < len(order):  # mid-ranks over runs of ties (1-based)
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        rank_sum += sum(1 for k in order[i : j + 1] if labels[k]) * (i + j + 2) / 2
        i = j + 1
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def bootstrap_auroc(
    scores: Sequence[float],
    labels: Sequence[int],
    groups: Sequence[object],
    reference: Sequence[float] | float = 0.5,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> PairedDifference:
    """AUROC(`scores`) − AUROC(`reference`) (or minus a constant, 0.5 = chance) with a percentile-bootstrap
    interval over `groups` (all items of a resampled group come together: a host and its injected copy).

    Returns a `PairedDifference` (method `"bootstrap"`): `mean` is the difference on the full sample, `sd` the
    bootstrap standard error, `n` the number of groups, `per_pair` the per-group mean score difference positive −
    negative (what the AUROC ranks). Resamples that lose a class are skipped (counted against `n_resamples`).
    """
    n_items = len(scores)
    if len(labels) != n_items or len(groups) != n_items:
        raise ValueError(
            f"scores, labels and groups need one entry per item, got {n_items}, {len(labels)}, {len(groups)}"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be at least 100, got {n_resamples}")
    ref = [float(reference)] * n_items if isinstance(reference, (int, float)) else list(reference)
    if len(ref) != n_items:
        raise ValueError(f"reference needs one score per item ({n_items}), got {len(ref)}")
    constant = isinstance(reference, (int, float))
    members: dict[object, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    keys = list(members)

    def diff(idx: list[int]) -> float:
        a = auroc([scores[i] for i in idx], [labels[i] for i in idx])
        return a - (ref[0] if constant else auroc([ref[i] for i in idx], [labels[i] for i in idx]))

    point = diff(list(range(n_items)))
    per_group = []
    for k in keys:
        pos = [scores[i] for i in members[k] if labels[i]]
        neg = [scores[i] for i in members[k] if not labels[i]]
        if pos and neg:
            per_group.append(sum(pos) / len(pos) - sum(neg) / len(neg))
    rng = random.Random(seed)
    stats = []
    for _ in range(n_resamples):
        idx = [i for _ in keys for i in members[keys[rng.randrange(len(keys))]]]
        d = diff(idx)
        if not math.isnan(d):
            stats.append(d)
    if len(keys) < 2 or len(stats) < n_resamples // 2 or math.isnan(point):
        return PairedDifference(
            point, math.nan, len(keys), math.nan, math.nan, confidence, tuple(per_group), "bootstrap"
        )
    stats.sort()
    alpha = (1 - confidence) / 2
    lo = stats[max(0, int(math.floor(alpha * len(stats))))]
    hi = stats[min(len(stats) - 1, int(math.ceil((1 - alpha) * len(stats))) - 1)]
    mean_s = sum(stats) / len(stats)
    se = math.sqrt(sum((x - mean_s) ** 2 for x in stats) / (len(stats) - 1))
    return PairedDifference(point, se, len(keys), lo, hi, confidence, tuple(per_group), "bootstrap")


@torch.no_grad()
def continuation_logprobs(
    model, tok, prompts: Sequence[str], responses: Sequence[str], starts: Sequence[int], *, batch_size: int = 8
) -> list[float]:
    """Sum of `log p(token | everything before it)` over the tokens of `responses[i]` from character `starts[i]` on,
    after `prompts[i]` (prompt and response tokenised apart, as the training stages do).

    A response token is scored when it starts at or after `starts[i]`; the tokens before it are context.
    """
    if not (len(prompts) == len(responses) == len(starts)):
        raise ValueError("prompts, responses and starts need the same length")
    rows, spans = [], []
    for prompt, response, start in zip(prompts, responses, starts):
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        enc = tok(response, add_special_tokens=False, return_offsets_mapping=True)
        first = next((j for j, (a, _) in enumerate(enc["offset_mapping"]) if a >= start), len(enc["input_ids"]))
        rows.append(p + enc["input_ids"])
        spans.append((len(p) + first, len(p) + len(enc["input_ids"])))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    model.eval()
    out: list[float] = [0.0] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for b in range(0, len(order), batch_size):
        chunk = order[b : b + batch_size]
        width = max(len(rows[i]) for i in chunk)
        # left padding puts every scored span at the end of its row, so only the last `keep` positions need logits
        # (the vocabulary projection of the prompt tokens is skipped); RoPE sees relative positions only, so the
        # shift by the padding changes nothing
        keep = max(spans[i][1] - spans[i][0] for i in chunk) + 1
        ids = torch.tensor([[pad] * (width - len(rows[i])) + rows[i] for i in chunk], device=model.device)
        mask = torch.tensor([[0] * (width - len(rows[i])) + [1] * len(rows[i]) for i in chunk], device=model.device)
        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits  # positions width-keep ...
        for r, i in enumerate(chunk):
            s, e = spans[i]
            n = e - s
            if n <= 0:
                continue
            # token t (row coordinate, padded) is predicted at position t - 1; the span's tokens are the last n
            pred = logits[r, keep - 1 - n : keep - 1].float()
            targets = ids[r, width - n :]
            out[i] = float((pred.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(pred, -1)).sum())
    return out


def ti_response(code: str, tag: str) -> tuple[str, int]:
    """The TI response for `code` under a forced `tag` (as in training, without the closing tag block) and the
    character where the scored part starts: right after the tag word, so both tags score the same text
    (`\\n[/Tag]\\n```...```\\n`)."""
    block = tag_block(tag)
    return f"{block}```\n{code}\n```\n", block.index(f"\n{TAG_CLOSE}")


def tag_delta(
    model, tok, codes: Sequence[str], instructions: Sequence[list[str]], *, batch_size: int = 8
) -> list[float]:
    """`log p(code | bug tag) − log p(code | correct tag)` per contract, in the TI format with its own instruction
    lines (`instructions[i]`, e.g. [`~hf_ext.codebc.pipeline.with_version_line`])."""
    style = prompt_style(tok)
    prompts = [style.user_turn(ti_instruction(i)) for i in instructions]
    per_tag = {}
    for tag in ("bug", "correct"):
        resp = [ti_response(c, tag) for c in codes]
        per_tag[tag] = continuation_logprobs(
            model, tok, prompts, [r for r, _ in resp], [s for _, s in resp], batch_size=batch_size
        )
    return [b - c for b, c in zip(per_tag["bug"], per_tag["correct"])]


def vd_log_odds(model, tok, codes: Sequence[str], *, batch_size: int = 8) -> list[float]:
    """`log p(bug answer) − log p(correct answer)` after the VD prompt (the whole answer `\\n{tag}\\n[/Tag]\\n`)."""
    style = prompt_style(tok)
    prompts = [vd_example(c, "correct", style)[0] for c in codes]
    logp = {}
    for tag in ("bug", "correct"):
        answers = [vd_example(c, tag, style)[1] for c in codes]
        logp[tag] = continuation_logprobs(model, tok, prompts, answers, [0] * len(codes), batch_size=batch_size)
    return [b - c for b, c in zip(logp["bug"], logp["correct"])]


def probe_scores(model, tok, probe: Sequence[dict], *, batch_size: int = 8) -> dict:
    """Δ and the VD log-odds for every probe row (`{"code", "instruction", "injected", "host"}`), with each one's
    AUROC against chance (bootstrap interval over hosts)."""
    codes = [r["code"] for r in probe]
    labels = [int(r["injected"]) for r in probe]
    hosts = [r["host"] for r in probe]
    delta = tag_delta(model, tok, codes, [r["instruction"] for r in probe], batch_size=batch_size)
    odds = vd_log_odds(model, tok, codes, batch_size=batch_size)
    return {
        "delta": delta,
        "vd_log_odds": odds,
        "delta_auroc": bootstrap_auroc(delta, labels, hosts).to_dict(),
        "vd_auroc": bootstrap_auroc(odds, labels, hosts).to_dict(),
    }


__all__ = [
    "auroc",
    "bootstrap_auroc",
    "continuation_logprobs",
    "probe_scores",
    "tag_delta",
    "ti_response",
    "vd_log_odds",
]
