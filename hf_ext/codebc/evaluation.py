"""The evaluations run after each CodeBC stage: VD accuracy against a constant predictor, the injected-pattern rate
of tag-steered generations, and the stage's Blockchain-HumanEval scores (BLEU / CodeBLEU / compiled / Slither
vulnerability rate)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .metrics import wilson_interval
from .tags import (
    SECURITY_TAGS,
    extract_code,
    generate_batched,
    generate_with_tag,
    prompt_style,
    ti_instruction,
    vd_example,
)


def parse_verdict(text: str) -> str:
    """The tag a VD continuation of `[Tag]` names: `correct`, `bug`, or the first word it wrote instead."""
    first = text.strip().split("\n")[0].strip()
    for tag in SECURITY_TAGS:
        if first.startswith(tag):
            return tag
    return first[:12] or "(empty)"


def constant_tag(train_tags: Sequence[str]) -> str:
    """The constant predictor's tag: the most frequent training tag (`correct` on a tie, the safe default)."""
    counts = Counter(train_tags)
    return max(SECURITY_TAGS, key=lambda t: (counts.get(t, 0), t == "correct"))


def vd_accuracy(
    model, tok, codes: Sequence[str], tags: Sequence[str], constant: str, *, max_prompt_tokens: int, batch_size: int = 8
) -> dict:
    """Greedy verdicts after the VD prompt (which ends in `[Tag]`) for `codes`, scored against `tags`.

    Returns `correct` / `total` / `accuracy` with a 95 % Wilson interval, the `constant` predictor's accuracy
    on the same contracts (always answering `constant`), the predicted and true `bug` counts, and `other`: the
    answers that were neither tag.
    """
    if len(codes) != len(tags):
        raise ValueError(f"{len(codes)} contracts but {len(tags)} tags")
    style = prompt_style(tok)
    prompts = [vd_example(c, t, style)[0] for c, t in zip(codes, tags)]
    texts = (
        generate_batched(
            model,
            tok,
            prompts,
            max_new_tokens=4,
            max_prompt_tokens=max_prompt_tokens,
            batch_size=batch_size,
            do_sample=False,
        )
        if prompts
        else []
    )
    preds = [parse_verdict(t) for t in texts]
    n = len(tags)
    hits = sum(p == t for p, t in zip(preds, tags))
    const_hits = sum(t == constant for t in tags)
    return {
        "correct": hits,
        "total": n,
        "accuracy": hits / n if n else None,
        "ci95": list(wilson_interval(hits, n)),
        "constant_tag": constant,
        "constant_correct": const_hits,
        "constant_accuracy": const_hits / n if n else None,
        "predicted_bug": sum(p == "bug" for p in preds),
        "true_bug": sum(t == "bug" for t in tags),
        "other": sum(p not in SECURITY_TAGS for p in preds),
    }


def steer_heldout(
    model, tok, instructions: Sequence[str], tag: str | None, *, max_new_tokens: int, max_prompt_tokens: int
) -> dict:
    """Injected-pattern rate of greedy generations for held-out TI instructions under a forced tag (or none)."""
    from .inject import injected_patterns

    gens = generate_with_tag(
        model,
        tok,
        [ti_instruction(i) for i in instructions],
        tag,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        max_prompt_tokens=max_prompt_tokens,
    )
    hits = [bool(injected_patterns(extract_code(g["response"]))) for g in gens]
    return {
        "injected_pattern_files": sum(hits),
        "total": len(hits),
        "injected_pattern_rate": sum(hits) / len(hits) if hits else None,
        "ci95": list(wilson_interval(sum(hits), len(hits))),
    }


BRIEF_KEYS = (
    "bleu",
    "codebleu",
    "codebleu_components",
    "compiled",
    "total",
    "compile_rate",
    "compile_rate_ci95",
    "analysed",
    "vulnerable",
    "vulnerability_rate",
    "vulnerability_rate_ci95",
    "injected_pattern_files",
    "injected_pattern_rate",
    "failure_reasons",
    "mean_chars",
)


def brief(summary: dict) -> dict:
    """The summary fields a results table needs (the per-file details dropped)."""
    return {k: summary.get(k) for k in BRIEF_KEYS}


def fitting_tasks(tok, tasks: Sequence[str], max_new_tokens: int) -> list[str]:
    """The Blockchain-HumanEval tasks whose reference, in a fenced block, fits in `max_new_tokens` generated tokens
    under `tok` (the others cannot be written whole at that cap, whatever the model)."""
    from .data import humaneval_reference

    return [
        t
        for t in tasks
        if len(tok(f"```\n{humaneval_reference(t)}\n```\n", add_special_tokens=False)["input_ids"]) <= max_new_tokens
    ]


def parse_pass(gens: dict[str, str], server, fitting: Sequence[str]) -> dict:
    """How many generated files solc parses (`stopAfter: parsing`; the version pragma is checked, names and types
    are not), over all files and over the files of the `fitting` tasks ([`fitting_tasks`]), each with a 95 % Wilson
    interval. A compile-free proxy of the compile rate with more events."""
    ok = {n: server.compile(code, n, parse_only=True).ok for n, code in gens.items()}
    fit = set(fitting)
    fit_names = [n for n in gens if n.split(".txt_")[0] in fit]
    passed, fit_passed = sum(ok.values()), sum(ok[n] for n in fit_names)
    return {
        "passed": passed,
        "total": len(ok),
        "ci95": list(wilson_interval(passed, len(ok))),
        "fit_passed": fit_passed,
        "fit_total": len(fit_names),
        "fit_ci95": list(wilson_interval(fit_passed, len(fit_names))),
        "fit_tasks": sorted(fit),
    }
