"""CodeBC's text metrics, exactly as the authors' evaluation scripts define them.

- **BLEU**: NLTK `sentence_bleu` on tokens `re.findall(r"\\S+|\\s", text)` (every whitespace character is a token),
  weights (¼, ¼, ¼, ¼), `SmoothingFunction().method1`, averaged over samples.
- **CodeBLEU**: `codebleu.calc_codebleu([[ref]], [pred], lang="javascript", weights=(¼, ¼, ¼, ¼))` per sample
  (JavaScript's tree-sitter grammar as a Solidity proxy), averaged over samples.

`codebleu` 0.7.0's data-flow match iterates over Python `set`s of strings, so its score depends on the interpreter's
hash seed (about ±0.02 CodeBLEU points on the released outputs). [`codebleu_scores`] therefore runs it in a child
interpreter with `PYTHONHASHSEED=0` (`codebleu_worker.py`, run as a script so the child imports neither hf_ext nor
torch), which makes every score reproducible run to run.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

_TOKEN = re.compile(r"\S+|\s")

LOG = logging.getLogger(__name__)


def bleu_tokens(text: str) -> list[str]:
    """The official tokenisation: maximal non-space runs, and each whitespace character on its own."""
    return _TOKEN.findall(text)


def bleu(reference: str, prediction: str) -> float:
    """Sentence BLEU in [0, 1] with the official tokenisation, uniform 4-gram weights and smoothing method 1."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return float(
        sentence_bleu(
            [bleu_tokens(reference)],
            bleu_tokens(prediction),
            weights=(0.25, 0.25, 0.25, 0.25),
            smoothing_function=SmoothingFunction().method1,
        )
    )


CODEBLEU_WORKER = Path(__file__).with_name("codebleu_worker.py")


def _codebleu_worker(pairs: list[list[str]], hash_seed: int) -> tuple[list[dict] | None, str]:
    """One child interpreter over `pairs`: `(scores, "")`, or `(None, why)` when it crashes or prints garbage."""
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    proc = subprocess.run(
        [sys.executable, str(CODEBLEU_WORKER)],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        return None, proc.stderr.strip()[-500:] or f"exit status {proc.returncode}"
    try:
        return json.loads(proc.stdout), ""
    except json.JSONDecodeError:
        return None, f"unreadable worker output {proc.stdout[:100]!r}"


def codebleu_scores(references: Sequence[str], predictions: Sequence[str], hash_seed: int = 0) -> list[dict | None]:
    """Per-sample CodeBLEU dicts (`codebleu`, `ngram_match_score`, `weighted_ngram_match_score`,
    `syntax_match_score`, `dataflow_match_score`), computed in a child interpreter with a fixed hash seed.

    One file that crashes the parser must not sink a scoring run: if the worker over all samples fails, each
    sample is scored in its own worker and a sample whose worker fails gets `None` (logged with the reason).

    Args:
        references (`Sequence[str]`): reference contracts.
        predictions (`Sequence[str]`): generated contracts, same length.
        hash_seed (`int`, defaults to 0): `PYTHONHASHSEED` of the child (see the module docstring).
    """
    if len(references) != len(predictions):
        raise ValueError(f"{len(references)} references but {len(predictions)} predictions")
    pairs = [[r, p] for r, p in zip(references, predictions)]
    if not pairs:
        return []
    scores, why = _codebleu_worker(pairs, hash_seed)
    if scores is not None:
        return scores
    LOG.warning("CodeBLEU worker failed on %d samples (%s); scoring them one by one", len(pairs), why)
    out: list[dict | None] = []
    for i, pair in enumerate(pairs):
        one, why = _codebleu_worker([pair], hash_seed)
        if one is None:
            LOG.warning("CodeBLEU failed on sample %d: %s", i, why)
        out.append(one[0] if one else None)
    return out


def wilson_interval(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95 % by default); `(0, 1)` when `total` is 0."""
    if total <= 0:
        return (0.0, 1.0)
    p = successes / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """Mean and normal-approximation 95 % interval of the mean: `(mean, low, high)`."""
    n = len(values)
    if n == 0:
        return (float("nan"),) * 3
    m = sum(values) / n
    if n == 1:
        return (m, m, m)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = z * sd / math.sqrt(n)
    return (m, m - half, m + half)
