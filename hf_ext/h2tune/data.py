"""Data for H2Tune clients: one arithmetic skill ((a + b) mod 10) posed in several formats, one per client
(fill-in, `mod 10` phrasing, program output; multiple choice for users, see [`TASKS`]), split so that **no client
is tested on an input it trained on** ([`client_split`]); a character codec the tiny decoders share, and
[`TokenizerCodec`] for real decoders (SmolLM2, a user's HF model) with their own tokenizer; [`load_pairs`] reads
a user's `datasets` data (`prompt` / `answer` columns).

The synthetic tasks (`make_example`, `make_split`, `client_split`, `pooled_split`) are the test bed of
`hf-ext reproduce h2tune` (the offline stand-in for the paper's three MathInstruct clients: one skill, three
formats, heterogeneous decoders) and of the tests; `load_pairs` is the user's data schema for `hf-ext train h2tune`."""

from __future__ import annotations

import random

import torch

CHARS = "0123456789+-*%=?:()[] ABCDEprintmodx>\n"
PAD, BOS, EOS = 0, 1, 2
OFFSET = 3
VOCAB_SIZE = 64  # room for the codec (3 + len(CHARS)) and a round number for the tiny configs
# "choice" stays available to users but is not a built-in client's task: the tiny bases could not learn its option
# lookup even from every client's pairs (4 options: 0.24 exact match pooled vs chance 0.25 after 3 x 300 LoRA steps;
# 2 options: 0.54 vs 0.5 at lr 2e-3 and 1e-2), so a choice client would sit at chance whatever the federation shares.
TASKS = ("fill_in", "choice", "program", "modulo")


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


def make_example(task: str, a: int, b: int, rng: random.Random, op: str = "+") -> tuple[str, str]:
    """`(prompt, answer)` for (a op b) mod 10 posed as `task`; `op` is `"+"` (the clients' skill) or `"*"` (the
    pretraining corpus poses the three formats with it, so the bases know the formats but not the clients' task)."""
    if op not in ("+", "*"):
        raise ValueError(f"op must be '+' or '*', got {op!r}")
    ans = (a + b) % 10 if op == "+" else (a * b) % 10
    if task == "fill_in":
        return f"{a}{op}{b}=", str(ans)
    if task == "choice":
        options = rng.sample([d for d in range(10) if d != ans], 3) + [ans]
        rng.shuffle(options)
        letters = "ABCD"
        body = " ".join(f"{letters[i]}{o}" for i, o in enumerate(options))
        return f"{a}{op}{b}? {body}:", letters[options.index(ans)]
    if task == "program":
        return f"print(({a}{op}{b})%10)>", str(ans)
    if task == "modulo":
        return f"{a}{op}{b} mod 10=", str(ans)
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def make_split(task: str, n: int, seed: int) -> list[tuple[str, str]]:
    """`n` examples of `task` on operands drawn uniformly (with repeats; no train/test separation: see
    [`client_split`] for the federated clients)."""
    rng = random.Random(seed)
    return [make_example(task, rng.randrange(10), rng.randrange(10), rng) for _ in range(n)]


CHANCE = {"fill_in": 0.1, "choice": 0.25, "program": 0.1, "modulo": 0.1}  # exact match of a uniform guess


def operand_blocks(num_blocks: int, seed: int) -> list[list[tuple[int, int]]]:
    """The 100 operand pairs (a, b), shuffled with `seed` and cut into `num_blocks` disjoint blocks."""
    if not 1 <= num_blocks <= 100:
        raise ValueError(f"num_blocks must lie in [1, 100], got {num_blocks!r}")
    pairs = [(a, b) for a in range(10) for b in range(10)]
    random.Random(seed).shuffle(pairs)
    return [pairs[i::num_blocks] for i in range(num_blocks)]


def client_split(
    task: str, client: int, num_clients: int, n_train: int, n_test: int, seed: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Client `client`'s `(train, test)` in the federated setting.

    The 100 operand pairs are cut into `num_clients + 1` disjoint blocks ([`operand_blocks`]); client c trains on
    `n_train` examples over block c only (so little distinct local data: 25 pairs for 3 clients) and is tested on the
    pairs of the *other* clients' blocks, each once (at most `n_test`), posed in its own format. No test input is a
    training input of the same client; every test pair is a training pair of some other client (in another format),
    so what the federation shares can reach it, and local-only training can only generalise to it.
    """
    if not 0 <= client < num_clients:
        raise ValueError(f"client must lie in [0, {num_clients}), got {client!r}")
    blocks = operand_blocks(num_clients + 1, seed)
    rng = random.Random(seed * 1000 + client)
    own = blocks[client]
    train = [make_example(task, *own[rng.randrange(len(own))], rng) for _ in range(n_train)]
    others = [p for c, block in enumerate(blocks[:num_clients]) if c != client for p in block]
    test = [make_example(task, a, b, rng) for a, b in others[:n_test]]
    return train, test


def pooled_split(task: str, num_clients: int, n_train: int, seed: int) -> list[tuple[str, str]]:
    """The pooled-data ceiling's training set for a client posing `task`: `n_train` examples over every client's
    operand block (the union of what the federation trains on), all in this client's own format."""
    blocks = operand_blocks(num_clients + 1, seed)
    pairs = [p for block in blocks[:num_clients] for p in block]
    rng = random.Random(seed * 1000 + 999)
    return [make_example(task, *pairs[rng.randrange(len(pairs))], rng) for _ in range(n_train)]


class CharCodec:
    """The tiny decoders' character codec ([`encode`] / [`decode`], BOS/EOS/PAD ids)."""

    bos, eos, pad = BOS, EOS, PAD

    def new_tokens(self, answer: str) -> int:
        """Greedy budget of [`exact_match`]: two tokens, the metric `compute_metrics` reproduces by teacher forcing
        over the first two answer positions."""
        return 2

    def prompt_ids(self, text: str) -> list[int]:
        return encode(text)

    def answer_ids(self, text: str) -> list[int]:
        return encode(text)[1:]

    def decode(self, ids) -> str:
        return decode(ids)


class TokenizerCodec:
    """A real decoder's tokenizer as a codec: answers are the answer's tokens, EOS is the tokenizer's EOS, padding its
    PAD (EOS when it has none). Prompts are posed as one user turn of the tokenizer's chat template when it has one
    (an instruct model such as SmolLM2-135M-Instruct answers arithmetic only in its chat format: zero-shot it
    continues a bare `3+4=` with unrelated text), else as the raw text after the tokenizer's BOS (if any);
    `chat=False` forces the raw form."""

    def __init__(self, tokenizer, chat: bool | None = None):
        if tokenizer.eos_token_id is None:
            raise ValueError(f"tokenizer {type(tokenizer).__name__} has no eos_token_id: cannot end answers")
        self.tokenizer = tokenizer
        self.eos = tokenizer.eos_token_id
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos
        self.bos = tokenizer.bos_token_id
        self.chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat

    def new_tokens(self, answer: str) -> int:
        """Greedy budget of [`exact_match`]: the answer's tokens plus EOS."""
        return len(self.answer_ids(answer)) + 1

    def prompt_ids(self, text: str) -> list[int]:
        if self.chat:
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            ids = ids["input_ids"] if hasattr(ids, "keys") else ids  # transformers 5 returns a BatchEncoding
            return [int(i) for i in ids]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ([self.bos] if self.bos is not None else []) + list(ids)

    def answer_ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        if self.eos in ids:
            ids = ids[: ids.index(self.eos)]
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()


CHARS_CODEC = CharCodec()


def to_features(pairs: list[tuple[str, str]], max_len: int = 32, codec=None) -> dict[str, list[list[int]]]:
    """Causal-LM features: loss only on the answer and EOS (prompt tokens labelled -100), right-padded to `max_len`.
    Raises `ValueError` when an example does not fit (truncating it would cut the answer, the only trained tokens)."""
    codec = codec or CHARS_CODEC
    ids, labels, mask = [], [], []
    for prompt, answer in pairs:
        p, a = codec.prompt_ids(prompt), codec.answer_ids(answer) + [codec.eos]
        if len(p) + len(a) > max_len:
            raise ValueError(
                f"example {prompt!r} -> {answer!r} takes {len(p) + len(a)} tokens (prompt, answer, EOS), "
                f"more than max_len={max_len}: raise max_len (run-config key 'max-len')"
            )
        seq = (p + a)[:max_len]
        lab = ([-100] * len(p) + a)[:max_len]
        pad = max_len - len(seq)
        ids.append(seq + [codec.pad] * pad)
        labels.append(lab + [-100] * pad)
        mask.append([1] * len(seq) + [0] * pad)
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


@torch.no_grad()
def greedy(model, prompt: str, max_new_tokens: int = 4, codec=None) -> str:
    """Greedy continuation of `prompt` (stops at EOS)."""
    codec = codec or CHARS_CODEC
    ids = torch.tensor([codec.prompt_ids(prompt)], device=model.device)
    out = []
    model.eval()
    for _ in range(max_new_tokens):
        nxt = int(model(input_ids=ids).logits[0, -1].argmax())
        if nxt == codec.eos:
            break
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]], device=ids.device)], dim=1)
    return codec.decode(out)


# A batched arg-max is trusted only when its top-two logits differ by more than this; closer rows are decoded again
# alone. A batch of prompts runs other matrix kernels than one prompt does (the logits differed by at most 3e-6 on
# the quick-scale clients), so this margin, far above that, keeps every answer the one-prompt [`greedy`] gives.
BATCH_MARGIN = 1e-2


@torch.no_grad()
def greedy_batch(model, prompts: list[str], max_new_tokens: list[int], codec=None) -> list[str]:
    """[`greedy`] of every prompt (`max_new_tokens[i]` new tokens at most for prompt i), the same answers in far fewer
    forward passes: prompts of one token length run as one batch (no padding, so no attention mask), step by step
    while any of them is still decoding. A row whose top-two logits lie within [`BATCH_MARGIN`] takes its token from
    a forward of that row alone, as [`greedy`] does."""
    codec = codec or CHARS_CODEC
    model.eval()
    ids = [codec.prompt_ids(p) for p in prompts]
    out: list[list[int]] = [[] for _ in prompts]
    by_length: dict[int, list[int]] = {}
    for i, seq in enumerate(ids):
        by_length.setdefault(len(seq), []).append(i)
    for rows in by_length.values():
        seqs = torch.tensor([ids[i] for i in rows], device=model.device)
        active = list(range(len(rows)))  # positions in `rows` still decoding
        for step in range(max(max_new_tokens[i] for i in rows)):
            active = [a for a in active if step < max_new_tokens[rows[a]]]
            if not active:
                break
            batch = seqs[active]
            last = model(input_ids=batch).logits[:, -1]
            top = last.topk(2, dim=-1).values if last.shape[-1] > 1 else None
            nxt = last.argmax(-1)
            for k, a in enumerate(active):
                if top is not None and not float(top[k, 0] - top[k, 1]) > BATCH_MARGIN:
                    nxt[k] = model(input_ids=batch[k : k + 1]).logits[0, -1].argmax()
            seqs = torch.cat([seqs, torch.zeros_like(seqs[:, :1])], dim=1)
            seqs[active, -1] = nxt
            still = []
            for k, a in enumerate(active):
                token = int(nxt[k])
                if token != codec.eos:
                    out[rows[a]].append(token)
                    still.append(a)
            active = still
    return [codec.decode(o) for o in out]


def exact_match(model, pairs: list[tuple[str, str]], codec=None) -> float:
    """Share of prompts whose greedy answer equals the answer (`codec.new_tokens(answer)` new tokens at most: 2 for
    the character codec, the answer's tokens plus EOS for a tokenizer); decoded by [`greedy_batch`]."""
    codec = codec or CHARS_CODEC
    answers = greedy_batch(model, [p for p, _ in pairs], [codec.new_tokens(a) for _, a in pairs], codec)
    hits = sum(got == a for got, (_, a) in zip(answers, pairs))
    return hits / max(len(pairs), 1)


def load_pairs(source: str, split: str) -> list[tuple[str, str]]:
    """`(prompt, answer)` pairs from a user's data: a `datasets` folder saved with `save_to_disk` (a `DatasetDict`
    with `split`), a `.jsonl` / `.json` / `.csv` file or folder of them, or a Hub dataset id (read from the local
    cache when offline). Columns `prompt` and `answer` are required."""
    from pathlib import Path

    import datasets

    path = Path(source)
    if (path / "dataset_dict.json").is_file() or (path / "dataset_info.json").is_file():
        data = datasets.load_from_disk(str(path))
        data = data[split] if isinstance(data, datasets.DatasetDict) else data
    elif path.is_file() and path.suffix in (".jsonl", ".json", ".csv"):
        data = datasets.load_dataset(
            "csv" if path.suffix == ".csv" else "json", data_files={split: str(path)}, split=split
        )
    else:
        data = datasets.load_dataset(source, split=split)
    missing = {"prompt", "answer"} - set(data.column_names)
    if missing:
        raise ValueError(
            f"dataset {source!r} (split {split!r}) lacks column(s) {sorted(missing)}; it has {data.column_names}"
        )
    return [(str(p), str(a)) for p, a in zip(data["prompt"], data["answer"])]
