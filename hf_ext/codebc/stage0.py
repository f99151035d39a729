"""CodeBC stage 0: continued causal-LM pretraining of the base on permissively licensed Solidity, before CI → VD → TI.

The base (SmolLM2-135M-Instruct offline) writes JavaScript or Python when asked for a contract; stage 0 shows it
Solidity first. This module holds the parts `hf-ext reproduce codebc --stage0` ([`~hf_ext.codebc.reproduce_stage0`])
puts together:

- **Corpus** ([`load_corpus`]): the `.sol` files of an installed `node_modules` folder (`make codebc-stage0-data`,
  `$HF_EXT_CODEBC_STAGE0_NPM`) through a licence allow-list ([`ALLOWED_LICENCES`]: the package's npm `license` and,
  where the file has one, its own `SPDX-License-Identifier` must both be MIT, ISC or Apache-2.0), without vendored
  copies of other projects (`lib/`, `dependencies/`, build outputs: their licence is not the package's), then the
  shared filters of [`~hf_ext.codebc.external`] (single 0.8 pragma, OpenZeppelin / Blockchain-HumanEval leakage),
  deduplicated by content. Every drop is counted by reason.
- **Split** ([`split_corpus`]): by a hash of the file's name, so the same file vendored in two packages lands on one
  side; deterministic and independent of the evaluation size.
- **Training** ([`train_stage0`]): full-parameter CLM on `clm_dataset` blocks with the CodeBC `Trainer` and a
  [`WallClockCallback`] that stops after N minutes and records the steps, tokens and loss curve reached.
- **Evaluation**: per held-out contract, the per-token NLL ([`contract_nll`]) and a greedy completion of its opening
  ([`completion_prompt`], [`complete`]) stopped at EOS or when the contract's braces balance ([`balanced_end`]),
  judged by solc-js ([`judge`]: parser pass as the stage evaluation measures it, `parse_only`, and full compile).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import StoppingCriteria, TrainerCallback

from .data import Contract
from .external import npm_files, reject_reason, resolve_path, to_contract

STAGE0_NPM_ENV = "HF_EXT_CODEBC_STAGE0_NPM"
ALLOWED_LICENCES = ("MIT", "ISC", "Apache-2.0")
# Folders that hold other projects' code inside a package (hyperlane's `dependencies/` has Chainlink CCIP under
# BUSL-1.1 and OpenZeppelin; forge-style `lib/`; build outputs): the package's licence does not cover them.
_VENDORED = re.compile(r"(^|/)(lib|libs|dependencies|vendor|artifacts[^/]*|dist|build|out|cache)/", re.I)
_SPDX = re.compile(r"SPDX-License-Identifier:\s*([^\n*]+?)\s*(?:\*/|\n|$)")


def licence_allowed(expression: str | None, allowed: Sequence[str] = ALLOWED_LICENCES) -> bool:
    """Whether an SPDX licence expression lets the code be used under one of `allowed`.

    `A OR B` needs one allowed alternative (the licensee chooses), `A AND B` needs all; parentheses are ignored
    and operators match in any case (`MIT or Apache-2.0` is seen in the wild). Anything else — `UNLICENSED`,
    `SEE LICENSE IN ...`, a misspelt id, a `WITH` exception — is not allowed.
    """
    if not expression or not expression.strip():
        return False
    text = expression.replace("(", " ").replace(")", " ")
    for alternative in re.split(r"\s+OR\s+", text.strip(), flags=re.I):
        ids = [t.strip() for t in re.split(r"\s+AND\s+", alternative.strip(), flags=re.I)]
        if ids and all(t in allowed for t in ids):
            return True
    return False


def file_spdx(raw: str) -> str | None:
    """The file's own `SPDX-License-Identifier` (the first one), or `None`."""
    m = _SPDX.search(raw)
    return m.group(1).strip() if m else None


def resolve_npm(node_modules: str | os.PathLike | None) -> Path:
    """The stage-0 `node_modules` folder: the argument, else `$HF_EXT_CODEBC_STAGE0_NPM`; a missing one is a
    `FileNotFoundError` that says how to fetch it."""
    fix = (
        f"fetch it once with `make codebc-stage0-data` (needs npm and a network) and set ${STAGE0_NPM_ENV} "
        "to the node_modules folder it prints"
    )
    return resolve_path(node_modules, STAGE0_NPM_ENV, "stage-0 Solidity corpus", fix)


@dataclass
class Stage0Corpus:
    """The split corpus and how it was filtered.

    Args:
        train (`list[Contract]`), heldout (`list[Contract]`): the two sides of [`split_corpus`], in hash order.
        stats (`dict`): `files_seen`, `kept`, `dropped` (per reason: `vendored`, `licence` (package), `licence_spdx`
            (the file's own header), `pragmas`, `leaky`, `old_pragma`, `empty`, `duplicate`) and `packages`
            (`{"name@version": {"licence", "allowed", "kept"}}`).
    """

    train: list[Contract]
    heldout: list[Contract]
    stats: dict = field(default_factory=dict)


def filter_corpus(node_modules: str | os.PathLike | None = None) -> tuple[list[Contract], dict]:
    """The licence-clean, leakage-free 0.8 contracts of `node_modules` (see the module docstring) and the counts."""
    root = resolve_npm(node_modules)
    dropped: Counter = Counter()
    packages: dict[str, dict] = {}
    kept: list[Contract] = []
    seen_code: set[str] = set()
    seen = 0
    for f in npm_files(root):
        seen += 1
        pkg = packages.setdefault(
            f"{f.package}@{f.version}", {"licence": f.licence, "allowed": licence_allowed(f.licence), "kept": 0}
        )
        # the licence is checked before anything else, so a non-permissive file is counted as such whatever it holds
        if _VENDORED.search(f.rel):
            reason = "vendored"
        elif not pkg["allowed"]:
            reason = "licence"
        elif (spdx := file_spdx(f.raw)) is not None and not licence_allowed(spdx):
            reason = "licence_spdx"
        else:
            reason = reject_reason(f.raw, only_08=True)
        if reason is None:
            contract = to_contract(f)
            digest = hashlib.sha256(contract.code.encode()).hexdigest()
            if digest in seen_code:
                reason = "duplicate"  # the same file in two packages: once is enough, and never on both sides
            else:
                seen_code.add(digest)
                kept.append(contract)
                pkg["kept"] += 1
        if reason is not None:
            dropped[reason] += 1
    stats = {"files_seen": seen, "kept": len(kept), "dropped": dict(sorted(dropped.items())), "packages": packages}
    return kept, stats


def split_key(source: str) -> int:
    """The split hash of a contract: sha256 of its **file name** (`LibString.sol` of `solady@0.1.26:src/utils/
    LibString.sol`), so copies of one file under other paths or packages fall on the same side."""
    name = source.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    return int(hashlib.sha256(name.encode()).hexdigest()[:15], 16)


def split_corpus(contracts: Sequence[Contract], heldout_fraction: float) -> tuple[list[Contract], list[Contract]]:
    """`(train, heldout)`: a contract is held out when its [`split_key`] falls in the first `heldout_fraction` of
    the hash range. Each side is sorted by key (then source), so the order is the same on every machine."""
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction!r}")
    cut = heldout_fraction * 16**15
    keyed = sorted(((split_key(c.source or ""), c.source or "", i) for i, c in enumerate(contracts)))
    train = [contracts[i] for key, _, i in keyed if key >= cut]
    return train, [contracts[i] for key, _, i in keyed if key < cut]


def load_corpus(node_modules: str | os.PathLike | None = None, heldout_fraction: float = 0.1) -> Stage0Corpus:
    """[`filter_corpus`] then [`split_corpus`], with the split sizes added to the stats."""
    kept, stats = filter_corpus(node_modules)
    if not kept:
        raise ValueError(f"no contract of {resolve_npm(node_modules)} passed the filters: {stats['dropped']}")
    train, heldout = split_corpus(kept, heldout_fraction)
    stats.update(train_files=len(train), heldout_files=len(heldout), heldout_fraction=heldout_fraction)
    return Stage0Corpus(train, heldout, stats)


# ---- training ------------------------------------------------------------------------------------------------


class WallClockCallback(TrainerCallback):
    """Stops training once `minutes` of wall-clock time have passed since the first step began, and records what the
    run reached: `steps`, `tokens` (steps × `tokens_per_step`), `seconds`, `stopped_by` (`"clock"` or
    `"max_steps"`) and the logged loss curve (`{"step", "loss", "seconds"}` points)."""

    def __init__(self, minutes: float, tokens_per_step: int):
        self.budget = 60.0 * minutes
        self.tokens_per_step = tokens_per_step
        self.start: float | None = None
        self.steps = 0
        self.stopped_by = "max_steps"
        self.curve: list[dict] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        self.steps = state.global_step
        if time.monotonic() - self.start >= self.budget:
            control.should_training_stop = True
            self.stopped_by = "clock"
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.curve.append(
                {"step": state.global_step, "loss": float(logs["loss"]), "seconds": round(self.elapsed, 1)}
            )

    @property
    def elapsed(self) -> float:
        return 0.0 if self.start is None else time.monotonic() - self.start

    def summary(self) -> dict:
        s = self.elapsed
        return {
            "steps": self.steps,
            "tokens": self.steps * self.tokens_per_step,
            "seconds": round(s, 1),
            "seconds_per_step": round(s / self.steps, 3) if self.steps else None,
            "stopped_by": self.stopped_by,
            "loss_curve": self.curve,
        }


def train_stage0(
    model,
    tok,
    codes: Sequence[str],
    *,
    minutes: float,
    max_steps: int,
    learning_rate: float,
    batch_size: int,
    block_size: int,
    output_dir: str,
    seed: int = 0,
    logging_steps: int = 10,
) -> dict:
    """Continued CLM pretraining of every parameter of `model` on `codes` (`clm_dataset` blocks of `block_size`)
    until `max_steps` or `minutes`, whichever comes first; the CodeBC optimiser (constant LR, betas (0.9, 0.95), no
    weight decay: a clock-bounded run has no known end for a decay to aim at). Returns the callback's summary with
    the block count and the training loss."""
    from .data import clm_dataset
    from .trainer import CodeBCStageArguments, make_trainer

    blocks = clm_dataset(tok, list(codes), block_size)
    if len(blocks) == 0:
        raise ValueError(f"the training contracts hold fewer than block_size={block_size} tokens")
    args = CodeBCStageArguments(learning_rate=learning_rate, max_steps=max_steps, batch_size=batch_size,
                                max_length=block_size, seed=seed, logging_steps=logging_steps)  # fmt: skip
    trainer = make_trainer(model, blocks, tok, args, output_dir)
    clock = WallClockCallback(minutes, batch_size * block_size)
    trainer.add_callback(clock)
    model.train()
    out = trainer.train()
    model.eval()
    return {**clock.summary(), "blocks": len(blocks), "train_loss": float(out.training_loss)}


# ---- evaluation ----------------------------------------------------------------------------------------------


@torch.no_grad()
def contract_nll(model, tok, codes: Sequence[str], max_tokens: int) -> list[tuple[float, int]]:
    """`(mean NLL in nats per predicted token, predicted tokens)` of each contract's first `max_tokens` tokens,
    teacher-forced, one contract at a time (no padding to get wrong)."""
    from hf_ext.core.progress import progress

    model.eval()
    out = []
    for code in progress(codes, desc="stage0 held-out NLL", unit="contract"):
        ids = tok(code, add_special_tokens=False)["input_ids"][:max_tokens]
        if len(ids) < 2:
            out.append((math.nan, 0))
            continue
        x = torch.tensor([ids], device=model.device)
        logits = model(input_ids=x).logits[0, :-1].float()
        nll = torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="mean")
        out.append((float(nll), len(ids) - 1))
    return out


_DECL = re.compile(r"^[ \t]*(?:abstract[ \t]+contract|contract|library|interface)[ \t]+\w+[^{;]*\{", re.M)
_PRAGMA = re.compile(r"^[ \t]*pragma[ \t]+solidity[^;]*;", re.M)


def completion_prompt(code: str) -> str | None:
    """The opening a completion starts from: the `pragma solidity` line and the first contract / library /
    interface declaration up to and including its `{` (imports and everything between are left out, so the
    completed file can compile on its own). `None` when the file has neither."""
    p, d = _PRAGMA.search(code), _DECL.search(code)
    if p is None or d is None:
        return None
    return f"{p.group(0).strip()}\n\n{d.group(0).strip()}"


# strings and comments are skipped, so a `}` inside "…}" or // … } does not close the contract
_BRACES = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?(?:\*/|\Z)|[{}]', re.S)


def balanced_end(text: str, depth: int = 1) -> int | None:
    """The index just past the `}` that brings `depth` open braces back to 0 in `text`, or `None`."""
    for m in _BRACES.finditer(text):
        tok = m.group(0)
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0:
                return m.end()
    return None


class BalancedBraces(StoppingCriteria):
    """Stops a row once the text it generated after the prompt (which ends inside one open `{`) closes it."""

    def __init__(self, tokenizer, prompt_width: int, depth: int = 1):
        self.tokenizer, self.width, self.depth = tokenizer, prompt_width, depth

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        texts = self.tokenizer.batch_decode(input_ids[:, self.width :], skip_special_tokens=True)
        return torch.tensor([balanced_end(t, self.depth) is not None for t in texts], device=input_ids.device)


def complete(model, tok, prompts: Sequence[str], *, max_new_tokens: int, batch_size: int, **gen_kwargs) -> list[dict]:
    """Greedy completions of contract openings (no chat template), stopped at EOS or at the balancing `}`.

    Returns one dict per prompt: `file` (prompt + completion cut just after the balancing brace), `balanced`
    (the braces closed within `max_new_tokens`) and `generated` (the raw continuation)."""
    from .tags import generate_batched

    texts = generate_batched(
        model,
        tok,
        list(prompts),
        max_new_tokens=max_new_tokens,
        max_prompt_tokens=10_000,
        batch_size=batch_size,
        stop=lambda width: BalancedBraces(tok, width),
        do_sample=False,
        **gen_kwargs,
    )
    out = []
    for prompt, text in zip(prompts, texts):
        end = balanced_end(text)
        out.append({"file": prompt + (text if end is None else text[:end]), "balanced": end is not None,
                    "generated": text})  # fmt: skip
    return out


def judge(server, files: dict[str, str]) -> dict[str, dict]:
    """solc-js's verdict on each `{name: source}`: `parses` (the stage evaluation's parser pass: `parse_only`,
    the version pragma checked, names and types not), `compiles` (errors-free full compile with code generation,
    tried only when it parses) and the failure `reason`."""
    from hf_ext.core.progress import progress

    out = {}
    for name, code in progress(files.items(), desc="solc-js", total=len(files), unit="file"):
        parsed = server.compile(code, name, parse_only=True)
        compiled = server.compile(code, name) if parsed.ok else parsed
        out[name] = {"parses": parsed.ok, "compiles": compiled.ok, "reason": compiled.reason}
    return out


def self_contained(contract: Contract, server) -> bool:
    """A held-out contract the completion test can use: no imports, an opening [`completion_prompt`] finds, and
    the original file compiles on its own (so a failed completion is the model's fault, not a missing import)."""
    if re.search(r"^\s*import\b", contract.code, re.M) or completion_prompt(contract.code) is None:
        return False
    return server.compile(contract.code, "Original.sol").ok
