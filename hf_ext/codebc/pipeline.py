"""The CodeBC pipeline at toy scale: corpus → tokenizer + tiny LLaMA (CLM) → Slither-labelled VD/TI data →
CI → VD → TI with one LoRA adapter → generation on Blockchain-HumanEval with a forced tag → scoring.

Everything expensive is cached under `runs/codebc/cache/` (keyed by the settings): the tokenizer + pretrained base,
and Slither's verdict per contract (keyed by a hash of the source).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .data import Contract, humaneval_prompt, humaneval_reference, humaneval_tasks, load_secure_contracts
from .inject import PATTERNS, inject, injected_patterns
from .scoring import score_sources
from .solidity import SolcServer, analyze_many
from .tags import generate_with_tag

LOG = logging.getLogger(__name__)


BASES = ("tiny", "smollm2")


@dataclass
class ScaleConfig:
    """Sizes of one run (the base, the data, the steps, the evaluation).

    `base="tiny"` pretrains a tiny LLaMA on the corpus (the tests and the quick run); `base="smollm2"` starts from
    SmolLM2-135M-Instruct ([`~hf_ext.core.pretrained.load_smollm2`]) with the FIM tokens added (the tiny-model
    fields `vocab_size` ... `pretrain_lr` are then unused). `tasks` < 41 evaluates a fixed spread of the
    Blockchain-HumanEval tasks ([`task_subset`]); `vd_real` > 0 also measures VD on that many labelled detector-test
    contracts of the Slither sdist ([`~hf_ext.codebc.external.load_slither_labelled`]).
    """

    base: str = "tiny"
    vocab_size: int = 2048
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    block_size: int = 128
    pretrain_steps: int = 200
    pretrain_lr: float = 3e-3
    max_chars: int = 900  # contracts used for VD/TI are at most this long (whole, never cut)
    n_secure: int = 32  # secure contracts for VD/TI (each also gets CI samples)
    n_injected_per_pattern: int = 2
    stage_steps: int = 40
    stage_lr: float = 1e-2
    stage_batch: int = 8
    max_length: int = 384  # tokens of prompt + answer in the stages (longer prompts are cut on the left)
    samples: int = 1  # generations per Blockchain-HumanEval task
    max_new_tokens: int = 128
    max_prompt_tokens: int = 384
    temperature: float = 0.8
    seed: int = 0
    tasks: int = 41
    vd_real: int = 0
    n_probe: int = 24  # held-out host contracts of the likelihood probe (each secure + one injected copy)
    gen_batch: int = 8  # prompts per generate() call (the GPU scale batches more)

    def __post_init__(self):
        """Every size is an integer >= 1 (steps >= 0), rates and the temperature finite and > 0; checked before any
        work, so a bad `--stage-steps` or `--samples` fails here naming the flag's field."""
        for name in (
            "vocab_size",
            "hidden_size",
            "layers",
            "heads",
            "block_size",
            "max_chars",
            "n_secure",
            "stage_batch",
            "max_length",
            "samples",
            "max_new_tokens",
            "max_prompt_tokens",
            "gen_batch",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ScaleConfig.{name} must be an integer >= 1, got {value!r}")
        for name in ("pretrain_steps", "stage_steps", "n_injected_per_pattern", "seed", "n_probe"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"ScaleConfig.{name} must be an integer >= 0, got {value!r}")
        if self.stage_steps == 0:
            raise ValueError("ScaleConfig.stage_steps must be >= 1 (0 would train no adapter)")
        for name in ("pretrain_lr", "stage_lr", "temperature"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"ScaleConfig.{name} must be a finite number > 0, got {value!r}")
        if self.base not in BASES:
            raise ValueError(f"ScaleConfig.base must be one of {BASES}, got {self.base!r}")
        if isinstance(self.tasks, bool) or not isinstance(self.tasks, int) or not 1 <= self.tasks <= 41:
            raise ValueError(f"ScaleConfig.tasks must be an integer in [1, 41], got {self.tasks!r}")
        if isinstance(self.vd_real, bool) or not isinstance(self.vd_real, int) or self.vd_real < 0:
            raise ValueError(f"ScaleConfig.vd_real must be an integer >= 0, got {self.vd_real!r}")
        if self.hidden_size % self.heads:
            raise ValueError(f"ScaleConfig.hidden_size={self.hidden_size} must be divisible by heads={self.heads}")

    def key(self, *fields: str) -> str:
        d = asdict(self)
        blob = json.dumps({f: d[f] for f in fields} if fields else d, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def with_version_line(contract: Contract) -> list[str]:
    """TI instruction lines: the Blockchain-HumanEval-style version line, then the contract's comments.

    Deviation ([INF]): the official TI instruction is the comments alone; the version line mirrors the
    Blockchain-HumanEval prompt ("Programming with solidity ^ version number 0.8.20") so the pragma the model writes
    can follow the instruction — without it a corpus of mostly 0.4-0.6 code cannot target the 0.8 compiler.
    """
    version = (contract.pragma or "").replace(" ", "")
    return [f"Programming with solidity {version}"] + contract.comments[:12]


def label_contracts(codes: list[str], cache_file: Path, workers: int | None = None) -> list[dict]:
    """Slither's verdict on each contract (`vulnerable`, `checks`, `ok`), cached by the hash of the source; the
    uncached ones are analysed over `workers` processes (default: the available cores)."""
    cache = json.loads(cache_file.read_text()) if cache_file.is_file() else {}
    hashes = [hashlib.sha256(code.encode()).hexdigest() for code in codes]
    # only solc-js 0.8.37 is installed: older code cannot be analysed (its dataset label is kept)
    todo = {h: code for h, code in zip(hashes, codes) if h not in cache and _is_08_source(code)}
    if todo:
        for h, a in analyze_many(todo, workers).items():  # Slither over the available cores
            cache[h] = {"ok": a.ok, "vulnerable": a.vulnerable, "checks": sorted(a.checks), "reason": a.reason}
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache))
        tmp.replace(cache_file)
    old = {"ok": False, "vulnerable": False, "checks": [], "reason": "version_pragma"}
    return [cache.get(h, old) for h in hashes]


def _is_08_source(code: str) -> bool:
    return re.search(r"pragma\s+solidity\s*(\^|>=|~)?\s*0\.8\.", code) is not None


def training_tag(label: dict, pattern: str | None) -> str:
    """The security tag a VD/TI training contract gets: Slither's verdict (the paper labels with Slither), `"bug"`
    when it found a High/Medium issue, else `"correct"`; a contract Slither cannot analyse (pre-0.8 pragma, compile
    error) keeps its dataset label: secure corpus -> `"correct"`, injected (`pattern` set) -> `"bug"`."""
    if label["ok"]:
        return "bug" if label["vulnerable"] else "correct"
    return "correct" if pattern is None else "bug"


def build_examples(scale: ScaleConfig, cache_dir: Path, corpus: list[Contract] | None = None) -> dict:
    """Secure contracts for CI, and Slither-labelled secure + injected contracts for VD and TI (train/test split).

    Only whole contracts of at most `max_chars` characters are used; injection needs a 0.8 contract that compiles.
    """
    corpus = corpus if corpus is not None else load_secure_contracts()
    rng = random.Random(scale.seed)
    short = [c for c in corpus if len(c.code) <= scale.max_chars]
    rng.shuffle(short)
    with SolcServer() as solc:
        hosts = [
            c
            for c in corpus
            if c.is_08
            and len(c.code) <= scale.max_chars - 400
            and re.search(r"^(?:abstract\s+)?contract\s", c.code, re.M)
            and solc.compile(c.code).ok
        ]
        injected = []
        for p_i, pattern in enumerate(PATTERNS):
            for k in range(scale.n_injected_per_pattern):
                host = hosts[(p_i * scale.n_injected_per_pattern + k) % len(hosts)]
                code = inject(host.code, pattern, seed=k)
                if solc.compile(code).ok:
                    injected.append((Contract(code, host.comments, host.raw), pattern, host.code))
        secure = short[: scale.n_secure]
        used = {c.code for c in secure} | {host for _, _, host in injected}
    probe = build_probe(scale, corpus, used)
    items = [(c, None, c.code) for c in secure] + injected
    labels = label_contracts([c.code for c, _, _ in items], cache_dir / "slither_labels.json")
    rows = []
    for (c, pattern, host), lab in zip(items, labels):
        tag = training_tag(lab, pattern)
        rows.append(
            {
                "contract": c,
                "pattern": pattern,
                "tag": tag,
                "slither_ok": lab["ok"],
                "slither_checks": lab["checks"],
                "host": host,
            }
        )
    train, test = split_by_host(rows, rng)
    heldout = heldout_codes(test) | {r["code"] for r in probe}  # a probe host is its own secure row
    agreement = {p: [r["tag"] == "bug" for r in rows if r["pattern"] == p and r["slither_ok"]] for p in PATTERNS}
    return {
        # CI (and the base model's pretraining, see `pretraining_texts`) never see a held-out contract or its host
        "ci_codes": [c.code for c in short[scale.n_secure :] + secure if c.code not in heldout],
        "train": train,
        "test": test,
        "heldout_codes": sorted(heldout),
        "probe": probe,
        "slither_agreement": {p: [sum(v), len(v)] for p, v in agreement.items()},
        "secure_flagged": [
            sum(1 for r in rows if r["pattern"] is None and r["tag"] == "bug"),
            sum(1 for r in rows if r["pattern"] is None and r["slither_ok"]),
        ],
    }


PROBE_PATTERNS = tuple(p for p in PATTERNS if p != "unchecked_arithmetic")  # Slither has no detector for it


def build_probe(scale: ScaleConfig, corpus: list[Contract], used: set[str]) -> list[dict]:
    """The likelihood probe of [`~hf_ext.codebc.probe`]: `scale.n_probe` secure contracts of at most `max_chars`
    characters not used by VD/TI (`used`), each with one injected copy (the Slither-detectable patterns in turn;
    `unchecked_arithmetic` is left out because training labels it `correct`, Slither having no detector).

    Nothing is compiled: the probe reads likelihoods, so hosts of every Solidity version qualify (the 0.8 ones
    alone are too few: 16 of the 828 corpus contracts under 900 characters). Rows
    `{"code", "instruction", "injected", "host", "pattern"}`, a host's two rows together; the label is the injection,
    not Slither. Drawn with its own seeded generator, so the VD/TI split is the same with or without it.
    """
    rng = random.Random(f"probe-{scale.seed}")
    pool = [
        c
        for c in corpus
        if len(c.code) <= scale.max_chars
        and c.code not in used
        and re.search(r"^(?:abstract\s+)?contract\s", c.code, re.M)
    ]
    pool = list({c.code: c for c in pool}.values())  # one row per distinct source
    rng.shuffle(pool)
    rows: list[dict] = []
    for c in pool:
        if len(rows) >= 2 * scale.n_probe:
            break
        pattern = PROBE_PATTERNS[(len(rows) // 2) % len(PROBE_PATTERNS)]
        try:
            code = inject(c.code, pattern, seed=len(rows) // 2)
        except ValueError:  # no contract body to insert into
            continue
        instruction = with_version_line(c)
        host = hashlib.sha256(c.code.encode()).hexdigest()[:12]
        rows.append({"code": c.code, "instruction": instruction, "injected": False, "host": host, "pattern": None})
        rows.append({"code": code, "instruction": instruction, "injected": True, "host": host, "pattern": pattern})
    return rows


def split_by_host(rows: list[dict], rng: random.Random, test_share: float = 0.1) -> tuple[list[dict], list[dict]]:
    """Train / held-out split of VD-TI rows by host contract: a secure contract and every injected copy of it land
    on the same side, so no test contract has a near-identical twin in training. About `test_share` of the rows
    (at least 2) are held out."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["host"], []).append(row)
    keys = list(groups)
    rng.shuffle(keys)
    target, test_keys, n = max(2, int(len(rows) * test_share)), set(), 0
    for key in keys:
        if n >= target:
            break
        test_keys.add(key)
        n += len(groups[key])
    train = [r for k in keys if k not in test_keys for r in groups[k]]
    test = [r for k in keys if k in test_keys for r in groups[k]]
    rng.shuffle(train)
    return train, test


def heldout_codes(test: list[dict]) -> set[str]:
    """Every source text a held-out row depends on: the contract itself and its host."""
    return {r["contract"].code for r in test} | {r["host"] for r in test}


def pretraining_texts(corpus: list[Contract], heldout: set[str] | list[str]) -> list[str]:
    """The causal-LM pretraining corpus: every secure contract except the held-out ones (and their hosts)."""
    heldout = set(heldout)
    return [c.code for c in corpus if c.code not in heldout]


def build_base(scale: ScaleConfig, cache_dir: Path, texts: list[str]):
    """Tokenizer + tiny LLaMA pretrained by causal LM on `texts` (cached by the scale's model/pretrain fields)."""
    from .configuration_codebc import CodeBCConfig
    from .data import clm_dataset
    from .modeling_codebc import CodeBCForCausalLM
    from .tokenizer import TOKENIZER_VERSION, codebc_token_ids, load_tokenizer, train_tokenizer
    from .trainer import CodeBCStageArguments, train_stage

    key = (
        scale.key("vocab_size", "hidden_size", "layers", "heads", "block_size", "pretrain_steps", "pretrain_lr", "seed")
        + f"-t{TOKENIZER_VERSION}-"
        + hashlib.sha256("".join(texts).encode()).hexdigest()[:8]
    )
    folder = cache_dir / f"base-{key}"
    if (folder / "model.safetensors").is_file():
        return CodeBCForCausalLM.from_pretrained(folder), load_tokenizer(folder)
    tok = train_tokenizer(texts, vocab_size=scale.vocab_size)
    config = CodeBCConfig(
        vocab_size=len(tok),
        hidden_size=scale.hidden_size,
        intermediate_size=int(2.75 * scale.hidden_size),
        num_hidden_layers=scale.layers,
        num_attention_heads=scale.heads,
        num_key_value_heads=scale.heads,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tag_token_ids=codebc_token_ids(tok),
        tie_word_embeddings=True,
    )
    torch.manual_seed(scale.seed)
    model = CodeBCForCausalLM(config)
    args = CodeBCStageArguments(
        learning_rate=scale.pretrain_lr, max_steps=scale.pretrain_steps, batch_size=16, seed=scale.seed
    )
    loss = train_stage(model, clm_dataset(tok, texts, scale.block_size), tok, args, str(cache_dir / "tmp"))
    LOG.info("pretraining loss %.3f", loss)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model, tok


def load_base(scale: ScaleConfig, cache_dir: Path, texts: list[str]):
    """`(model, tokenizer, trainable_token_ids)` of the run's base: the tiny LLaMA of [`build_base`] (every CodeBC
    token is new, so all of them train with the adapter), or SmolLM2-135M-Instruct with `<PRE> <SUF> <MID> <EOT>`
    added as atomic special tokens (only those rows are new; `[Tag]`, `correct`, `bug` stay its own tokens)."""
    if scale.base == "smollm2":
        from hf_ext.core.pretrained import load_smollm2

        from .tokenizer import add_fim_tokens

        model, tok = load_smollm2()  # plain fp32 weights: Trainer trains them as they are
        return model, tok, add_fim_tokens(model, tok)
    from .tokenizer import codebc_token_ids

    model, tok = build_base(scale, cache_dir, texts)
    return model, tok, sorted(codebc_token_ids(tok).values())


def task_subset(n: int, tasks: list[str] | None = None) -> list[str]:
    """`n` of the Blockchain-HumanEval tasks, evenly spread over the sorted list (all of them when `n` >= 41)."""
    tasks = tasks or humaneval_tasks()
    if n >= len(tasks):
        return list(tasks)
    return [tasks[round(i * (len(tasks) - 1) / max(1, n - 1))] for i in range(n)] if n > 1 else [tasks[0]]


def generate_humaneval(
    model, tok, security_tag: str | None, scale: ScaleConfig, tasks: list[str] | None = None
) -> dict[str, str]:
    """`{"<Task>.txt_<k>.sol": code}` for every task and sample, the tag forced at the start of each response."""
    tasks = tasks or task_subset(scale.tasks)
    out = {}
    for k in range(scale.samples):
        greedy = scale.samples == 1
        gens = generate_with_tag(
            model,
            tok,
            [humaneval_prompt(t) for t in tasks],
            security_tag,
            max_new_tokens=scale.max_new_tokens,
            do_sample=not greedy,
            temperature=scale.temperature,
            seed=scale.seed * 100 + k,
            max_prompt_tokens=scale.max_prompt_tokens,
            batch_size=scale.gen_batch,
        )
        for t, g in zip(tasks, gens):
            out[f"{t}.txt_{k}.sol"] = g["code"]
    return out


def score_generations(
    gens: dict[str, str], analyse: bool, server: SolcServer | None = None, text_metrics: bool = True
) -> dict:
    """Scores generated files against the Blockchain-HumanEval references; adds the injected-pattern rate."""
    refs = {n: humaneval_reference(n.split(".txt_")[0]) for n in gens}
    s = score_sources(gens, refs, analyse=analyse, server=server, text_metrics=text_metrics)
    hits = [n for n, code in gens.items() if injected_patterns(code)]
    s["injected_pattern_files"] = len(hits)
    s["injected_pattern_rate"] = len(hits) / len(gens) if gens else None
    s["mean_chars"] = sum(len(c) for c in gens.values()) / max(1, len(gens))
    return s


__all__ = [
    "ScaleConfig",
    "build_base",
    "build_examples",
    "build_probe",
    "generate_humaneval",
    "heldout_codes",
    "load_base",
    "pretraining_texts",
    "score_generations",
    "split_by_host",
    "task_subset",
    "training_tag",
    "label_contracts",
    "with_version_line",
]
