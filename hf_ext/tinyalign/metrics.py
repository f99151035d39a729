"""Caption metrics: teacher-forced token accuracy, class-word accuracy of generated captions, corpus BLEU-4."""

from __future__ import annotations

import math
from collections import Counter

import torch

from .data import DIGIT_WORDS


def token_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[int, int]:
    """(correct, total) next-token predictions on positions whose label is not -100 (shifted like the LM loss)."""
    pred = logits[:, :-1].argmax(-1)
    gold = labels[:, 1:]
    mask = gold != -100
    return int(((pred == gold) & mask).sum()), int(mask.sum())


def class_word(caption: str, words=DIGIT_WORDS) -> str | None:
    """The first class word (a digit word by default) in a caption (None if there is none)."""
    for w in caption.split():
        if w in words:
            return w
    return None


def class_word_hits(predictions: list[str], references: list[str], words=DIGIT_WORDS) -> list[int]:
    """Per caption, 1 if the generated caption's class word (from `words`) equals the reference's, else 0 (a caption
    without a class word misses); what a paired per-item comparison reads."""
    return [
        int(class_word(p, words) is not None and class_word(p, words) == class_word(r, words))
        for p, r in zip(predictions, references, strict=True)
    ]


def class_word_accuracy(predictions: list[str], references: list[str], words=DIGIT_WORDS) -> float:
    """Share of generated captions whose class word (from `words`) equals the reference's."""
    hits = class_word_hits(predictions, references, words)
    return sum(hits) / max(len(hits), 1)


def corpus_bleu(predictions: list[str], references: list[str], max_n: int = 4) -> float:
    """Corpus BLEU (Papineni et al. 2002) with one reference per sentence, whitespace tokens, uniform weights and the
    brevity penalty, in [0, 100]. Returns 0 when some n-gram order has no match (no smoothing)."""
    matches, totals = [0] * max_n, [0] * max_n
    hyp_len = ref_len = 0
    for p, r in zip(predictions, references):
        hyp, ref = p.split(), r.split()
        hyp_len += len(hyp)
        ref_len += len(ref)
        for n in range(1, max_n + 1):
            h = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
            g = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
            matches[n - 1] += sum(min(c, g[k]) for k, c in h.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if hyp_len == 0 or min(matches) == 0:
        return 0.0
    log_p = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100.0 * bp * math.exp(log_p)


def steps_to_threshold(losses: list[float], threshold: float, window: int = 5) -> int | None:
    """First step (1-based) at which the running mean of `window` losses is at or below `threshold`."""
    for i in range(len(losses)):
        chunk = losses[max(0, i - window + 1) : i + 1]
        if len(chunk) == window and sum(chunk) / window <= threshold:
            return i + 1
    return None


def majority_hits(captions: list[str], majority_class: str | None, words=DIGIT_WORDS) -> list[int]:
    """Per caption, 1 if its class word is `majority_class`: what the image-blind training-majority reference gets
    right, item by item (its mean is [`constant_references`]' accuracy; paired tests read the items)."""
    return [int(majority_class is not None and class_word(c, words) == majority_class) for c in captions]


def constant_references(train_captions: list[str], test_captions: list[str], words=DIGIT_WORDS) -> dict:
    """What a captioner that ignores the image scores on the test split, with every choice made on the training
    split (never on the test set it is scored on):

    - the **training-majority class**: the most frequent class word of the training captions (ties: the first in
      `words` order), its test class-word accuracy;
    - the **best constant caption**: among the distinct training captions, the one whose corpus BLEU against the
      training captions is highest (ties: the most frequent, then the first in sorted order), its test BLEU and
      class-word accuracy.
    """
    if not train_captions or not test_captions:
        raise ValueError("constant_references needs non-empty train and test captions")
    counts = Counter(class_word(c, words) for c in train_captions)
    counts.pop(None, None)
    order = {w: i for i, w in enumerate(words)}
    majority = min(counts, key=lambda w: (-counts[w], order.get(w, len(order)))) if counts else None
    majority_acc = sum(majority_hits(test_captions, majority, words)) / len(test_captions)
    # corpus BLEU of one constant hypothesis: reference n-gram counts are gathered once, then each candidate is
    # clipped against them (the same arithmetic as `corpus_bleu`, without re-counting the references per candidate)
    ref_grams = [[Counter(tuple(r[i : i + n]) for i in range(len(r) - n + 1)) for n in range(1, 5)] for r in
                 (c.split() for c in train_captions)]  # fmt: skip
    ref_len = sum(len(c.split()) for c in train_captions)
    frequency = Counter(train_captions)

    def train_bleu(candidate: str) -> float:
        hyp = candidate.split()
        hyp_grams = [Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1)) for n in range(1, 5)]
        matches = [sum(sum(min(c, g[n][k]) for k, c in hyp_grams[n].items()) for g in ref_grams) for n in range(4)]
        totals = [max(len(hyp) - n, 0) * len(train_captions) for n in range(4)]
        hyp_len = len(hyp) * len(train_captions)
        if hyp_len == 0 or min(matches) == 0:
            return 0.0
        log_p = sum(math.log(m / t) for m, t in zip(matches, totals)) / 4
        bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
        return 100.0 * bp * math.exp(log_p)

    scored = {c: train_bleu(c) for c in sorted(frequency)}
    best = max(sorted(frequency), key=lambda c: (scored[c], frequency[c]))
    return {
        "majority_class": majority,
        "majority_class_word_accuracy": majority_acc,
        "best_constant_caption": best,
        "best_constant_caption_train_bleu": scored[best],
        "best_constant_caption_test_bleu": corpus_bleu([best] * len(test_captions), test_captions),
        "best_constant_caption_class_word_accuracy": class_word_accuracy(
            [best] * len(test_captions), test_captions, words
        ),
    }
