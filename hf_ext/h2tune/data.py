"""Synthetic data for the offline H2Tune reproduction: a character codec the tiny decoders share, and one arithmetic
skill ((a + b) mod 10) posed three ways, one per client: fill-in, multiple choice and program output."""

from __future__ import annotations

import random

import torch

CHARS = "0123456789+-*%=?:()[] ABCDEprintmodx>\n"
PAD, BOS, EOS = 0, 1, 2
OFFSET = 3
VOCAB_SIZE = 64  # room for the codec (3 + len(CHARS)) and a round number for the tiny configs
TASKS = ("fill_in", "choice", "program")


def encode(text: str) -> list[int]:
    """Character ids with BOS; raises `ValueError` naming unsupported characters."""
    bad = sorted({c for c in text if c not in CHARS})
    if bad:
        raise ValueError(f"unsupported character(s) {''.join(bad)!r}; use digits and {CHARS[10:].strip()!r}")
    return [BOS] + [OFFSET + CHARS.index(c) for c in text]


def decode(ids) -> str:
    out = []
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i >= OFFSET and i - OFFSET < len(CHARS):
            out.append(CHARS[i - OFFSET])
    return "".join(out)


def make_example(task: str, a: int, b: int, rng: random.Random) -> tuple[str, str]:
    """`(prompt, answer)` for (a + b) mod 10 posed as `task`."""
    ans = (a + b) % 10
    if task == "fill_in":
        return f"{a}+{b}=", str(ans)
    if task == "choice":
        options = rng.sample([d for d in range(10) if d != ans], 3) + [ans]
        rng.shuffle(options)
        letters = "ABCD"
        body = " ".join(f"{letters[i]}{o}" for i, o in enumerate(options))
        return f"{a}+{b}? {body}:", letters[options.index(ans)]
    if task == "program":
        return f"print(({a}+{b})%10)>", str(ans)
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def make_split(task: str, n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [make_example(task, rng.randrange(10), rng.randrange(10), rng) for _ in range(n)]


def to_features(pairs: list[tuple[str, str]], max_len: int = 32) -> dict[str, list[list[int]]]:
    """Causal-LM features: loss only on the answer and EOS (prompt tokens labelled -100), right-padded."""
    ids, labels = [], []
    for prompt, answer in pairs:
        p, a = encode(prompt), encode(answer)[1:] + [EOS]
        seq = (p + a)[:max_len]
        lab = ([-100] * len(p) + a)[:max_len]
        pad = max_len - len(seq)
        ids.append(seq + [PAD] * pad)
        labels.append(lab + [-100] * pad)
    return {"input_ids": ids, "labels": labels, "attention_mask": [[1] * (max_len - r.count(PAD)) + [0] *
                                                                    r.count(PAD) for r in ids]}


@torch.no_grad()
def greedy(model, prompt: str, max_new_tokens: int = 4) -> str:
    """Greedy continuation of `prompt` (stops at EOS)."""
    ids = torch.tensor([encode(prompt)])
    out = []
    model.eval()
    for _ in range(max_new_tokens):
        nxt = int(model(input_ids=ids).logits[0, -1].argmax())
        if nxt == EOS:
            break
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return decode(out)


def exact_match(model, pairs: list[tuple[str, str]]) -> float:
    return sum(greedy(model, p, 2) == a for p, a in pairs) / max(len(pairs), 1)
