"""CodeBC data: the secure-contract corpus, comment handling, OpenZeppelin leakage filter, Blockchain-HumanEval.

Read from `../shared/data/codebc/` relative to the project root (or `$HF_EXT_CODEBC_DATA`):
`secure_contracts/part_*.csv` (header-less `code,label` rows, label `[4]` = no Slither finding),
`blockchain_humaneval/{prompt,clean_code}/` and `released_outputs/codellama/`.

Deliberate fixes of the official preprocessing:
- the official comment stripper deletes **every line containing `*`**, so `c = a * b;` vanished from the training
  code; [`strip_comments`] is a small lexer that removes only real `//` and `/* */` comments (strings respected);
- Blockchain-HumanEval's references are OpenZeppelin 5.x files, so every contract that mentions OpenZeppelin or
  declares a contract/library/interface named like one of the 41 tasks is dropped from every training set
  ([`is_leaky`]).
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hf_ext.core import paths
from hf_ext.core.user_data import Column, DataSchema, UserDataError, load_user_data

DATA_ENV = paths.data_env_var("codebc")


def data_dir() -> Path:
    """The CodeBC data folder (`$HF_EXT_CODEBC_DATA`, `$HF_EXT_DATA/codebc` or the checkout's shared data)."""
    return paths.data_dir("codebc")


def default_references_dir() -> Path:
    return data_dir() / "blockchain_humaneval" / "clean_code"


def released_outputs_dir(model: str = "codellama") -> Path:
    return data_dir() / "released_outputs" / model


def _need(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(
            f"CodeBC data {path} is missing; put the shared data at {data_dir()} or set ${DATA_ENV}"
        )
    return path


_LEXEMES = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)


def strip_comments(code: str) -> tuple[str, list[str]]:
    """Removes `//` and `/* */` comments (not inside string literals) and blank lines.

    Returns `(code, comments)`: the comment-free code with trailing spaces and empty lines removed (the style of the
    Blockchain-HumanEval references), and the comment texts, one stripped line each (the TI instruction).
    Lines with `*` that are code (`c = a * b;`) are kept — the official stripper's bug is not reproduced.
    """
    comments: list[str] = []

    def repl(m: re.Match) -> str:
        tok = m.group(0)
        if tok.startswith("//"):
            comments.append(tok[2:].lstrip("/ ").strip())
            return ""
        if tok.startswith("/*"):
            comments.extend(
                line.strip().lstrip("*").strip()
                for line in (tok[2:-2] if tok.endswith("*/") and len(tok) > 3 else tok[2:]).splitlines()
            )
            return " "
        return tok  # a string literal: kept verbatim, even if it contains // or /*

    stripped = _LEXEMES.sub(repl, code)
    lines = [ln.rstrip() for ln in stripped.splitlines()]
    return "\n".join(ln for ln in lines if ln.strip()), [c for c in comments if c]


def humaneval_tasks() -> list[str]:
    """The 41 Blockchain-HumanEval task names (`Address`, ..., `draft-IERC6093`)."""
    folder = _need(data_dir() / "blockchain_humaneval" / "prompt")
    return sorted(p.stem for p in folder.glob("*.txt"))


def humaneval_prompt(task: str) -> str:
    return _need(data_dir() / "blockchain_humaneval" / "prompt" / f"{task}.txt").read_text().strip()


def humaneval_reference(task: str) -> str:
    return _need(default_references_dir() / f"{task}_clean.sol").read_text()


@lru_cache(maxsize=1)
def _leak_pattern() -> re.Pattern:
    names = {t.replace("draft-", "") for t in humaneval_tasks()}
    alt = "|".join(sorted(map(re.escape, names)))
    return re.compile(rf"\b(?:contract|library|interface)\s+(?:{alt})\b|openzeppelin", re.IGNORECASE)


def _windows(code: str, width: int = 2, min_len: int = 25) -> set[str]:
    lines = [ln.strip() for ln in code.splitlines() if len(ln.strip()) > min_len]
    return {"\n".join(lines[i : i + width]) for i in range(len(lines) - width + 1)}


@lru_cache(maxsize=1)
def _reference_windows() -> frozenset[str]:
    return frozenset().union(*(_windows(humaneval_reference(t)) for t in humaneval_tasks()))


def is_leaky(code: str) -> bool:
    """True for OpenZeppelin code, a contract that declares one of the 41 Blockchain-HumanEval names, or one that
    shares any 2 consecutive non-trivial lines with a Blockchain-HumanEval reference (e.g. copies of Compound's
    Timelock, the `CompTimelock` reference)."""
    if _leak_pattern().search(code) is not None:
        return True
    return not _reference_windows().isdisjoint(_windows(strip_comments(code)[0]))


@dataclass
class Contract:
    """One corpus contract: `code` is comment-free, `comments` the extracted comment lines, `raw` the original;
    `source` / `licence` name the package of a contract read from npm ([`~hf_ext.codebc.external`])."""

    code: str
    comments: list[str]
    raw: str
    label: str = "[4]"
    source: str | None = None  # where it came from when not the shipped corpus (`package@version:path`)
    licence: str | None = None  # that source's licence

    @property
    def pragma(self) -> str | None:
        m = re.search(r"pragma\s+solidity\s*([^;]*);", self.code)
        return m.group(1).strip() if m else None

    @property
    def is_08(self) -> bool:
        """Pragma satisfiable by the installed solc-js 0.8.37."""
        return bool(self.pragma and re.match(r"^(\^|>=|~)?\s*0\.8\.", self.pragma))


def load_secure_contracts(limit: int | None = None) -> list[Contract]:
    """The secure corpus after the official filters (single `pragma`) and the leakage filter, in file order."""
    return list(_load_secure(limit, str(data_dir())))


@lru_cache(maxsize=4)
def _load_secure(limit: int | None, _folder: str) -> tuple[Contract, ...]:
    folder = _need(data_dir() / "secure_contracts")
    csv.field_size_limit(sys.maxsize)
    out: list[Contract] = []
    for part in sorted(folder.glob("part_*.csv"), key=lambda p: int(p.stem.split("_")[1])):
        with part.open(newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                if len(row) < 2 or row[1].strip() != "[4]":
                    continue
                raw = row[0]
                if len(re.findall(r"pragma\s+solidity", raw)) != 1 or is_leaky(raw):
                    continue  # multi-file flattenings (official filter) and OpenZeppelin leakage (ours)
                code, comments = strip_comments(raw)
                out.append(Contract(code, comments, raw))
                if limit is not None and len(out) >= limit:
                    return tuple(out)
    return tuple(out)


# ---- stage datasets: the training examples of each stage (the user's data schema: `input_ids` + `labels`) --------


def encode_pair(tokenizer, prompt: str, answer: str, max_length: int, loss_on_prompt: bool = False) -> dict:
    """Token ids and labels of `prompt + answer`; labels are -100 on the prompt unless `loss_on_prompt`.

    Too-long examples lose the start of the prompt (the authors truncate on the left), never the answer.
    """
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be an integer >= 1, got {max_length!r}")
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    a = tokenizer(answer, add_special_tokens=False)["input_ids"]
    a = a[:max_length]
    p = p[max(0, len(p) - (max_length - len(a))) :] if len(p) + len(a) > max_length else p
    ids = p + a
    labels = ids[:] if loss_on_prompt else [-100] * len(p) + a
    return {"input_ids": ids, "labels": labels}


def ci_dataset(tokenizer, codes: Sequence[str], max_length: int, samples_per_contract: int = 5):
    """Code-infilling examples (5 FIM splits per secure contract, seeds 0..4), plain CLM loss."""
    from datasets import Dataset

    from .tags import ci_text, prompt_style

    rows, style = [], prompt_style(tokenizer)
    for code in codes:
        for k in range(samples_per_contract):
            text = ci_text(code, seed=k, style=style)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"][:max_length]
            rows.append({"input_ids": ids, "labels": ids[:]})
    return Dataset.from_list(rows)


def vd_dataset(tokenizer, codes: Sequence[str], tags: Sequence[str], max_length: int):
    """Vulnerability detection as generation: loss on `\\n{tag}\\n[/Tag]\\n` only."""
    from datasets import Dataset

    from .tags import prompt_style, vd_example

    style = prompt_style(tokenizer)
    return Dataset.from_list(
        [encode_pair(tokenizer, *vd_example(c, t, style), max_length) for c, t in zip(codes, tags)]
    )


def ti_dataset(
    tokenizer, codes: Sequence[str], comments: Sequence[list[str] | str], tags: Sequence[str | None], max_length: int
):
    """Tag-guided instruction tuning: loss on the response (tag, code, tag)."""
    from datasets import Dataset

    from .tags import prompt_style, ti_example

    style = prompt_style(tokenizer)
    return Dataset.from_list(
        [encode_pair(tokenizer, *ti_example(c, m, t, style), max_length) for c, m, t in zip(codes, comments, tags)]
    )


def clm_dataset(tokenizer, texts: Sequence[str], block_size: int):
    """Concatenate `text </s>` and cut into `block_size` blocks (causal-LM pretraining)."""
    from datasets import Dataset

    stream: list[int] = []
    for t in texts:
        stream += tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    blocks = [stream[i : i + block_size] for i in range(0, len(stream) - block_size + 1, block_size)]
    return Dataset.from_dict({"input_ids": blocks, "labels": [b[:] for b in blocks]})


# ---- the user's own contracts (`hf-ext train codebc --data SOURCE`) -----------------------------------------------

SCHEMA = DataSchema(
    (
        Column(
            "code", "str", "one Solidity source file (comments are stripped for training and become the TI request)"
        ),
        Column(
            "tag",
            "str",
            "the security tag, `correct` or `bug` (VD target, TI tag); empty: labelled by `--label_untagged`",
            required=False,
        ),
        Column(
            "instruction",
            "str",
            "the TI request for this contract (default: its solidity version line and its comments)",
            required=False,
        ),
    ),
    description="one row per contract; a folder of `.sol` files is read as one row per file",
)


def _sol_folder(folder: Path):
    """A folder of `.sol` files (searched recursively) as a `DatasetDict` with `code`, `tag`, `path`: a file under
    a `correct/` or `bug/` sub-folder gets that tag, any other file none."""
    from datasets import Dataset, DatasetDict

    from .tags import SECURITY_TAGS

    rows = []
    for path in sorted(p for p in folder.rglob("*.sol") if p.is_file()):
        rel = path.relative_to(folder)
        try:
            code = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as err:
            raise UserDataError(f"{path}: cannot read this Solidity file ({err})") from None
        tag = next((part for part in rel.parts[:-1] if part in SECURITY_TAGS), None)
        rows.append({"code": code, "tag": tag, "path": rel.as_posix()})
    return DatasetDict({"train": Dataset.from_list(rows)})


def load_contracts(source: str | Path):
    """The user's contracts as a `datasets.DatasetDict` with `code`, `tag` and `instruction` columns (`None` where not
    given), checked against [`SCHEMA`].

    `source` is a folder of `.sol` files (recursively; files under `correct/` or `bug/` sub-folders get that tag), or
    any source of [`~hf_ext.core.user_data.load_user_data`] with a `code` column (CSV / JSONL / Parquet, a folder of
    `train.*` / `test.*` files, a Hub id). Raises [`~hf_ext.core.user_data.UserDataError`] naming the column for a
    missing or ill-typed column, an empty `code`, or a tag other than `correct` / `bug`.
    """
    from .tags import SECURITY_TAGS

    path = Path(source).expanduser()
    if path.is_dir() and any(p.is_file() for p in path.rglob("*.sol")):
        data = _sol_folder(path)
    else:
        data = load_user_data(source, schema=SCHEMA)
    for name in ("tag", "instruction"):
        for split in list(data):
            if name not in data[split].column_names:
                data[split] = data[split].add_column(name, [None] * len(data[split]))
    problems = []
    for split, table in data.items():
        empty = [i for i, code in enumerate(table["code"]) if code is None or not code.strip()]
        if empty:
            problems.append(f"column 'code' is empty in split {split!r}, rows {empty[:10]}")
        bad = sorted({t for t in table["tag"] if t not in (None, "") and t.strip() not in SECURITY_TAGS})
        if bad:
            problems.append(f"column 'tag' must be one of {SECURITY_TAGS} or empty, got {bad[:5]} in split {split!r}")
        if len(table) == 0:
            problems.append(f"split {split!r} has no contract")
    if problems:
        raise UserDataError(f"data {str(source)!r}: " + "; ".join(problems))
    return data


def write_example_contracts(folder: str | Path) -> Path:
    """Writes a tiny folder in the documented layout for the docs' example and the tests: 12 small 0.8 contracts,
    four of them under `bug/` (an unchecked `call` and a `tx.origin` check), the rest under `correct/`."""
    folder = Path(folder)
    for k in range(8):
        (folder / "correct").mkdir(parents=True, exist_ok=True)
        (folder / "correct" / f"Counter{k}.sol").write_text(
            f"// SPDX-License-Identifier: MIT\npragma solidity ^0.8.20;\n\n// A counter that only goes up by {k + 1}.\n"
            f"contract Counter{k} {{\n    uint256 public count;\n\n    // Adds {k + 1} to the count.\n"
            f"    function increment() external {{\n        count += {k + 1};\n    }}\n}}\n"
        )
    for k in range(4):
        (folder / "bug").mkdir(parents=True, exist_ok=True)
        (folder / "bug" / f"Wallet{k}.sol").write_text(
            f"// SPDX-License-Identifier: MIT\npragma solidity ^0.8.20;\n\n// A wallet anyone can drain.\n"
            f"contract Wallet{k} {{\n    address public owner = msg.sender;\n\n    // Sends everything to `to`.\n"
            f"    function drain(address payable to) external {{\n        require(tx.origin == owner);\n"
            f'        to.call{{value: address(this).balance}}("");\n    }}\n}}\n'
        )
    return folder
