"""The user's text corpus ([`SCHEMA`], [`load_corpus`]); MultiRC (SuperGLUE) as yes/no cloze prompts, a byte-level
BPE tokenizer trained on the corpus, and batching.

**Your own corpus** (`hf-ext train fl_llama --data SOURCE`): one document per row of a `text` column, read with
[`load_corpus`] from a JSONL / JSON / CSV / TSV / Parquet file, a folder with `train.*` / `validation.*` / `test.*`
files, a Hub dataset id, or a plain `.txt` file with **one document per line** (blank lines are skipped; a document
with line breaks of its own belongs in JSONL).

The paper's MultiRC template (Table 5 of the appendix) is `[passage]. Question: q? Is it [answer a]? [M].` with the
mask filled by `yes`/`no`. The data is read from `../shared/data/multirc` (the JSONL files shipped in the authors'
repository); with a network the loader also accepts `datasets.load_dataset("super_glue", "multirc")`.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from hf_ext.core.paths import data_dir
from hf_ext.core.user_data import Column, DataSchema, UserDataError, load_user_data

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]

TEXT_COLUMN = "text"
SCHEMA = DataSchema(
    (Column(TEXT_COLUMN, "str", "one document of the client's private corpus (the causal-LM training text)"),),
    description="one row per document; a `.txt` file holds one document per line",
)


def load_corpus(source: str | Path):
    """The user's corpus as a `datasets.DatasetDict` with a `text` column, checked against [`SCHEMA`].

    A `.txt` file is read with `load_dataset("text")`, one document per non-blank line; every other source goes
    through [`~hf_ext.core.user_data.load_user_data`]. Empty documents are dropped (nothing to predict). Raises
    [`~hf_ext.core.user_data.UserDataError`] naming the missing or ill-typed column, or when no document is left.
    """
    path = Path(source).expanduser()
    if path.is_file() and path.suffix.lower() == ".txt":
        from datasets import load_dataset

        try:
            data = load_dataset("text", data_files={"train": str(path)}, keep_linebreaks=False)
        except Exception as err:  # noqa: BLE001 - an unreadable file (bad encoding ...): one line naming it
            raise UserDataError(f"cannot read data {str(source)!r}: {type(err).__name__}: {err}") from None
    else:
        data = load_user_data(source, schema=SCHEMA)
    SCHEMA.check(data, source=str(source))
    data = data.filter(lambda row: row[TEXT_COLUMN] is not None and row[TEXT_COLUMN].strip() != "")
    if any(len(split) == 0 for split in data.values()):
        empty = [name for name, split in data.items() if len(split) == 0]
        raise UserDataError(f"data {str(source)!r}: no non-empty {TEXT_COLUMN!r} in split(s) {empty}")
    return data


def write_example_corpus(path: str | Path, documents: int = 40) -> Path:
    """Writes a tiny corpus in the documented format (JSONL, one `{"text": ...}` per line) for the docs' example
    and the tests: short sentences about federated split learning, `documents` of them."""
    subjects = ["The client", "The server", "A hospital", "A bank", "Each party", "The federation"]
    verbs = ["keeps", "sends", "trains", "protects", "encrypts", "averages"]
    objects = ["its private tokens", "the hidden states", "the first blocks", "the noisy activations",
               "the gradients", "the language model head"]  # fmt: skip
    rng = random.Random(0)
    lines = []
    for i in range(documents):
        sentences = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}." for _ in range(2 + i % 3)]
        lines.append(json.dumps({TEXT_COLUMN: " ".join(sentences)}))
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class ClozeExample:
    """One (passage, question, answer option) triple of MultiRC, with its 0/1 label and passage id."""

    passage_id: int
    passage: str
    question: str
    answer: str
    label: int

    def prompt(self, max_passage_words: int | None = None) -> str:
        words = self.passage.split()
        passage = " ".join(words[:max_passage_words]) if max_passage_words else self.passage
        return f"{passage.rstrip('. ')}. Question: {self.question.rstrip('?')}? Is it {self.answer}?"

    @property
    def target(self) -> str:
        return " yes" if self.label == 1 else " no"


def load_multirc(split: str = "train", source: str | Path | None = None,
                 limit: int | None = None) -> list[ClozeExample]:  # fmt: skip
    """MultiRC answer options as [`ClozeExample`]s.

    Args:
        split (`str`): `"train"`, `"val"` (alias `"validation"`) or `"test"`.
        source (`str` or `Path`, *optional*): a folder with `<split>.jsonl` (defaults to `$HF_EXT_MULTIRC_DATA`,
            `$HF_EXT_DATA/multirc` or the checkout's `../shared/data/multirc`),
            or `"super_glue"` to read `load_dataset("super_glue", "multirc")` (needs a network or a local cache).
        limit (`int`, *optional*): keep the first `limit` passages.
    """
    split = {"validation": "val"}.get(split, split)
    if split not in ("train", "val", "test"):
        raise ValueError(f"MultiRC split must be 'train', 'val' or 'test', got {split!r}")
    if str(source) == "super_glue":
        return _from_hub(split, limit)
    path = data_dir("multirc", source) / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"MultiRC file {path} not found (see ../shared/data/README.md), or pass "
                                "source='super_glue' with a network")  # fmt: skip
    out = []
    with path.open() as fh:
        for n, line in enumerate(fh):
            if limit is not None and n >= limit:
                break
            row = json.loads(line)
            text = row["passage"]["text"]
            for q in row["passage"]["questions"]:
                for ans in q["answers"]:
                    label = int(ans.get("label", 0))
                    out.append(ClozeExample(int(row["idx"]), text, q["question"], ans["text"], label))
    return out


def _from_hub(split: str, limit: int | None) -> list[ClozeExample]:
    from datasets import load_dataset

    ds = load_dataset("super_glue", "multirc", split={"val": "validation"}.get(split, split))
    out, seen = [], set()
    for row in ds:
        pid = int(row["idx"]["paragraph"])
        seen.add(pid)
        if limit is not None and len(seen) > limit:
            break
        out.append(ClozeExample(pid, row["paragraph"], row["question"], row["answer"], int(row["label"])))
    return out


def train_tokenizer(texts: list[str], vocab_size: int = 1000, required_words: tuple[str, ...] = (" yes", " no")):
    """A byte-level BPE (`tokenizers`) trained on `texts`, wrapped as a left-padding `PreTrainedTokenizerFast`.

    `required_words` (the cloze answers) are added to the training stream often enough that BPE merges each into a
    single token, so the answer is one prediction.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(list(texts) + [w for w in required_words for _ in range(2000)], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", padding_side="left")  # fmt: skip


def corpus(examples: list[ClozeExample], max_passage_words: int | None = None) -> list[str]:
    return [e.prompt(max_passage_words) + e.target for e in examples]


def encode_cloze(tokenizer, examples: list[ClozeExample], max_length: int = 96,
                 max_passage_words: int | None = 60) -> dict[str, torch.Tensor]:  # fmt: skip
    """Left-padded `input_ids`, `attention_mask`, `labels` (`-100` except the answer token) and `label` (0/1).

    The prompt is truncated from the left (the question and answer option are at its end) so that prompt + target
    fits `max_length`.
    """
    return _encode_prompts(
        tokenizer, [e.prompt(max_passage_words) for e in examples], [e.label for e in examples], max_length
    )


def _encode_prompts(tokenizer, prompts: list[str], answers: list[int], max_length: int) -> dict[str, torch.Tensor]:
    yes, no = answer_token_ids(tokenizer)
    rows, masks, labels = [], [], []
    # One batched call: a fast tokenizer gives each text the same ids as a call of its own, and the per-call
    # overhead of `PreTrainedTokenizerFast.__call__` (~7 ms) made encoding a few thousand prompts take ~18 s.
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"] if prompts else []
    for ids_of_text, label in zip(encoded, answers):
        prompt = ids_of_text[-(max_length - 1) :]
        ids = prompt + [yes if label == 1 else no]
        pad = max_length - len(ids)
        rows.append([tokenizer.pad_token_id] * pad + ids)
        masks.append([0] * pad + [1] * len(ids))
        labels.append([-100] * (max_length - 1) + [ids[-1]])
    return {"input_ids": torch.tensor(rows), "attention_mask": torch.tensor(masks), "labels": torch.tensor(labels),
            "label": torch.tensor(answers)}  # fmt: skip


_SHORT = frozenset("the a an of to in and or is it was be for on at by with as that this what who how why".split())


def _words(text: str) -> set[str]:
    return {w.strip(".,;:!?\"'()").lower() for w in text.split()} - _SHORT - {""}


def question_window(example: ClozeExample, tokenizer, budget: int) -> tuple[str, bool]:
    """The cloze prompt of `example` within `budget` tokens: the whole passage when it fits (second value `True`),
    else a question-focused window, the passage sentences sharing most words with the question and the answer
    option, kept in passage order, as many as fit (`False`).

    Cutting the passage at a fixed length loses the evidence (the median MultiRC prompt is ~356 SmolLM2 tokens);
    MultiRC questions are written about one to a few sentences, which word overlap finds.
    """
    full = example.prompt()
    count = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    if count(full) <= budget:
        return full, True
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", example.passage.strip()) if s]
    keys = _words(example.question) | _words(example.answer)
    tail = count(ClozeExample(0, "", example.question, example.answer, 0).prompt())
    ranked = sorted(range(len(sentences)), key=lambda i: (-len(_words(sentences[i]) & keys), i))
    chosen, used = [], tail
    for i in ranked:
        n = count(sentences[i]) + 1
        if used + n <= budget:
            chosen.append(i)
            used += n
    passage = " ".join(sentences[i] for i in sorted(chosen))
    return ClozeExample(example.passage_id, passage, example.question, example.answer, example.label).prompt(), False


def encode_cloze_window(tokenizer, examples: list[ClozeExample], max_length: int = 512) -> dict[str, torch.Tensor]:
    """[`encode_cloze`] with [`question_window`] prompts (`max_length - 1` tokens, then the answer); `fits` marks
    the examples whose whole passage fitted."""
    prompts, fits = zip(*(question_window(e, tokenizer, max_length - 1) for e in examples))
    windowed = [ClozeExample(e.passage_id, p, "", "", e.label) for e, p in zip(examples, prompts)]
    enc = _encode_prompts(tokenizer, [w.passage for w in windowed], [e.label for e in examples], max_length)
    enc["fits"] = torch.tensor(fits)
    return enc


def answer_token_ids(tokenizer) -> tuple[int, int]:
    """Token ids of `" yes"` and `" no"`; each must be one token (the BPE is trained on a corpus that has them)."""
    ids = [tokenizer(w, add_special_tokens=False)["input_ids"] for w in (" yes", " no")]
    if any(len(i) != 1 for i in ids):
        raise ValueError(f"' yes' / ' no' must be single tokens of the tokenizer, got {ids}")
    return ids[0][0], ids[1][0]


def partition_by_passage(examples: list[ClozeExample], num_clients: int) -> list[list[ClozeExample]]:
    """Client m holds the passages with `passage_id % num_clients == m` (no passage is shared)."""
    return [[e for e in examples if e.passage_id % num_clients == m] for m in range(num_clients)]


def iter_batches(data: dict[str, torch.Tensor], batch_size: int, seed: int = 0, steps: int | None = None):
    """Shuffled mini-batches (reshuffled every epoch), `steps` of them (default: one epoch)."""
    n = len(data["input_ids"])
    rng = random.Random(seed)
    order: list[int] = []
    total = steps if steps is not None else max(1, n // batch_size)
    for _ in range(total):
        if len(order) < batch_size:
            perm = list(range(n))
            rng.shuffle(perm)
            order += perm
        idx, order = order[:batch_size], order[batch_size:]
        yield {k: v[idx] for k, v in data.items()}


__all__ = [
    "SCHEMA",
    "ClozeExample",
    "answer_token_ids",
    "corpus",
    "encode_cloze",
    "encode_cloze_window",
    "iter_batches",
    "load_corpus",
    "load_multirc",
    "partition_by_passage",
    "question_window",
    "train_tokenizer",
    "write_example_corpus",
]
