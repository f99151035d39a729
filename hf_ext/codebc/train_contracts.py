"""CodeBC on the user's contracts and causal LM: the rows each stage trains on (comment-free code, its TI request, its
security tag), the base with CodeBC's FIM tokens, and the held-out metrics that `hf-ext train codebc --data` records
and `hf-ext evaluate codebc` re-measures and pairs with a baseline.

Held-out metrics, per test contract (so two models pair contract by contract):

- **test loss**: the tag-guided instruction-tuning (TI) loss, next-token negative log-likelihood (nats) of the
  response `[Tag] tag [/Tag] code [Tag] tag [/Tag]` given the request, teacher-forced; the split's value is the
  token-weighted mean;
- **test VD accuracy**: the greedy verdict after the VD prompt (`correct` / `bug`) equals the contract's tag;
- **test compile rate** (when `max_new_tokens > 0` and solc-js is installed, `hf-ext setup codebc`): the contract
  generated for the TI request with the `correct` tag forced compiles with solc-js 0.8.37.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import torch

LABELLERS = ("auto", "slither", "correct")
DEFAULT_LORA_TARGETS = "q_proj,v_proj"


def resolve_labeller(label_untagged: str) -> str:
    """`"slither"` or `"correct"`: `auto` is Slither when solc-js and Slither are usable here, else `correct`."""
    if label_untagged not in LABELLERS:
        raise ValueError(f"--label_untagged must be one of {LABELLERS}, got {label_untagged!r}")
    if label_untagged != "auto":
        return label_untagged
    from .solidity import toolchain_problem

    return "slither" if toolchain_problem() is None else "correct"


def prepare_rows(table, labeller: str, cache_file: Path | None = None) -> list[dict]:
    """One dict per contract: `code` (comment-free, what the stages train on), `instruction` (the TI request: the
    row's own, else the version line and the comments, as the reproduction builds it), `tag` (the row's own, else
    Slither's verdict with `labeller="slither"`, else `correct`) and `tag_source`."""
    from .data import Contract, strip_comments
    from .pipeline import label_contracts, training_tag, with_version_line

    rows = []
    for raw, tag, instruction in zip(table["code"], table["tag"], table["instruction"]):
        code, comments = strip_comments(raw)
        request = instruction.strip() if instruction else with_version_line(Contract(code, comments, raw))
        tag = tag.strip() if tag else None
        rows.append({"code": code, "instruction": request, "tag": tag, "tag_source": "data" if tag else None})
    untagged = [r for r in rows if r["tag"] is None]
    if untagged and labeller == "slither":
        from hf_ext.core.paths import work_dir

        cache = cache_file or work_dir("codebc") / "cache" / "slither_labels.json"
        for row, label in zip(untagged, label_contracts([r["code"] for r in untagged], cache)):
            row["tag"], row["tag_source"] = training_tag(label, None), "slither" if label["ok"] else "default"
    for row in untagged:
        if row["tag"] is None:
            row["tag"], row["tag_source"] = "correct", "default"
    return rows


def load_base(model_name_or_path: str):
    """`(model, tokenizer, trainable_token_ids)`: any causal LM (Hub id or folder) in float32 with its tokenizer; a
    tokenizer without a pad token pads with EOS, and CodeBC's FIM markers become atomic tokens whose embedding rows
    train with the adapter ([`~hf_ext.codebc.tokenizer.add_fim_tokens`])."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .tokenizer import add_fim_tokens

    try:
        model = AutoModelForCausalLM.from_pretrained(model_name_or_path, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(model_name_or_path)
    except (OSError, ValueError) as err:
        raise ValueError(
            f"--model_name_or_path {model_name_or_path!r}: cannot load a causal LM and its tokenizer ({err})"
        ) from None
    if tok.pad_token_id is None:
        if tok.eos_token is None:
            raise ValueError(f"the tokenizer of {model_name_or_path!r} has neither a pad nor an EOS token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model, tok, add_fim_tokens(model, tok)


def lora_targets(model, spec: str) -> list[str]:
    """The `--lora_targets` module names, checked against `model`: a name no module of the model ends with is a
    `ValueError` listing the model's linear layer names (a GPT-2 has `c_attn`, not `q_proj`)."""
    names = [t.strip() for t in spec.split(",") if t.strip()]
    if not names:
        raise ValueError("--lora_targets must name at least one module (e.g. q_proj,v_proj)")
    leaves = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if type(m).__name__ in ("Linear", "Conv1D")}
    missing = [n for n in names if n not in leaves]
    if missing:
        raise ValueError(
            f"--lora_targets {','.join(missing)}: no such linear layer in this model; it has {sorted(leaves)}"
        )
    return names


def stage_datasets(stage: str, tok, rows: list[dict], max_length: int):
    from .data import ci_dataset, ti_dataset, vd_dataset

    codes = [r["code"] for r in rows]
    if stage == "CI":
        return ci_dataset(tok, codes, max_length)
    if stage == "VD":
        return vd_dataset(tok, codes, [r["tag"] for r in rows], max_length)
    return ti_dataset(tok, codes, [r["instruction"] for r in rows], [r["tag"] for r in rows], max_length)


@torch.no_grad()
def response_nll(model, tok, rows: list[dict], max_length: int, batch_size: int = 8) -> list[tuple[float, int]]:
    """`(summed NLL in nats, response tokens)` of each row's TI example (the loss the TI stage trains)."""
    from .data import ti_dataset
    from .trainer import PadCollator

    data = ti_dataset(tok, [r["code"] for r in rows], [r["instruction"] for r in rows], [r["tag"] for r in rows],
                      max_length)  # fmt: skip
    collate = PadCollator(tok.pad_token_id)
    model.eval()
    out = []
    device = model.device
    for i in range(0, len(data), batch_size):
        batch = collate([data[j] for j in range(i, min(i + batch_size, len(data)))])
        logits = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device))
        targets = batch["labels"][:, 1:].to(device)
        nll = torch.nn.functional.cross_entropy(
            logits.logits[:, :-1].float().transpose(1, 2), targets, ignore_index=-100, reduction="none"
        )
        valid = targets != -100
        out += [(float(nll[r][valid[r]].sum()), int(valid[r].sum())) for r in range(len(targets))]
    return out


def vd_verdicts(model, tok, rows: list[dict], max_length: int, batch_size: int = 8) -> list[str]:
    """The greedy VD verdict on each row's contract (`correct`, `bug`, or the word written instead)."""
    from .evaluation import parse_verdict
    from .tags import generate_batched, prompt_style, vd_example

    style = prompt_style(tok)
    prompts = [vd_example(r["code"], r["tag"], style)[0] for r in rows]
    texts = generate_batched(model, tok, prompts, max_new_tokens=4, max_prompt_tokens=max_length,
                             batch_size=batch_size, do_sample=False)  # fmt: skip
    return [parse_verdict(t) for t in texts]


def compiled(model, tok, rows: list[dict], max_new_tokens: int, max_length: int, batch_size: int = 8):
    """Whether the contract generated for each row's request (greedy, `correct` forced) compiles; `None` when
    solc-js is not installed (`hf-ext setup codebc`)."""
    from .solidity import SolcServer, toolchain_problem
    from .tags import generate_with_tag, ti_instruction

    if max_new_tokens <= 0 or toolchain_problem() is not None:
        return None
    gens = generate_with_tag(model, tok, [ti_instruction(r["instruction"]) for r in rows], "correct",
                             max_new_tokens=max_new_tokens, max_prompt_tokens=max_length,
                             batch_size=batch_size)  # fmt: skip
    with SolcServer() as solc:
        return [bool(g["code"].strip()) and solc.compile(g["code"]).ok for g in gens]


def heldout_metrics(model, tok, rows: list[dict], *, max_length: int, max_new_tokens: int, batch_size: int = 8) -> dict:
    """The held-out metrics of the module docstring, with the per-contract values (`per_contract`) for pairing."""
    nll = response_nll(model, tok, rows, max_length, batch_size)
    tokens = sum(n for _, n in nll)
    loss = sum(s for s, _ in nll) / tokens if tokens else float("nan")
    verdicts = vd_verdicts(model, tok, rows, max_length, batch_size)
    hits = [float(v == r["tag"]) for v, r in zip(verdicts, rows)]
    compile_ok = compiled(model, tok, rows, max_new_tokens, max_length, batch_size)
    return {
        "loss": loss,
        "perplexity": math.exp(min(loss, 700.0)) if math.isfinite(loss) else float("nan"),
        "vd_accuracy": sum(hits) / len(hits),
        "compile_rate": None if compile_ok is None else sum(compile_ok) / len(compile_ok),
        "contracts": len(rows),
        "tokens": tokens,
        "per_contract": {
            "loss": [s / n if n else None for s, n in nll],
            "vd_correct": hits,
            "verdict": verdicts,
            "compiled": None if compile_ok is None else [float(c) for c in compile_ok],
        },
    }


def record_metrics(result: dict, dataset: str) -> list[dict]:
    """The record's / evaluation's metric entries of [`heldout_metrics`] (compile rate only when measured)."""
    from hf_ext.core.records import metric

    out = [
        metric("test loss", "loss", result["loss"], dataset=dataset, higher_is_better=False),
        metric("test VD accuracy", "accuracy", result["vd_accuracy"], dataset=dataset, higher_is_better=True),
    ]
    if result["compile_rate"] is not None:
        out.append(metric("test compile rate", "compile_rate", result["compile_rate"], dataset=dataset,
                          higher_is_better=True))  # fmt: skip
    return out


def contract_splits(source: str, *, test_split: float, seed: int):
    """The contracts read and checked ([`~hf_ext.codebc.data.load_contracts`]) and split: the user's own `test`
    split where present, else a seeded one (train and evaluate call this alike, so they see the same contracts)."""
    from hf_ext.core.user_data import split_data

    from .data import load_contracts

    data = load_contracts(source)
    return data, split_data(data, validation=0.0, test=test_split, seed=seed)


SPLIT_KEYS = ("test_split", "seed", "labeller", "max_length", "max_new_tokens", "eval_batch_size")


def hub_id_or_none(name: str) -> str | None:
    """`name` when it is a Hub id (what a card's `base_model` may name), `None` for a local folder."""
    if Path(name).expanduser().exists():
        return None
    parts = name.split("/")
    return name if len(parts) == 2 and all(parts) else None


def train_on_contracts(args, argv: list[str]) -> Path:
    """`hf-ext train codebc --data ...`: CI → VD → TI with one LoRA adapter on the user's base and contracts, then
    the held-out metrics; saves base + `adapter/` + tokenizer + `training_record.json` into `args.output_dir`."""
    import shlex

    from hf_ext.core.records import save_training_record
    from hf_ext.core.user_data import dataset_entry

    from . import SPEC
    from .adapter import add_adapter, save_codebc
    from .trainer import CodeBCStageArguments, train_stage

    # the data (columns, tags) and the split fail here, before the model is loaded
    data, splits = contract_splits(args.data, test_split=args.test_split, seed=args.seed)
    labeller = resolve_labeller(args.label_untagged)
    out = Path(args.output_dir)
    rows = {name: prepare_rows(table, labeller) for name, table in splits.items()}
    model, tok, trainable = load_base(args.model_name_or_path)
    targets = lora_targets(model, args.lora_targets)
    max_length = args.max_length or 512
    stage_args = CodeBCStageArguments(
        learning_rate=args.learning_rate or 5e-4,
        max_steps=args.steps,
        batch_size=args.batch_size or 2,
        max_length=max_length,
        seed=args.seed,
        trainable_token_ids=trainable or None,
        logging_steps=max(1, args.steps // 5),
        lora_targets=targets,
    )
    model = add_adapter(model, stage_args)
    losses, scratch = {}, out.parent / f".{out.name}-trainer"
    for stage in args.stage_list:
        ds = stage_datasets(stage, tok, rows["train"], max_length)
        losses[stage] = train_stage(model, ds, tok, stage_args, str(scratch))
        print(f"{stage}: mean training loss {losses[stage]:.4f} over {args.steps} steps", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)  # Trainer's output_dir (nothing saved: save_strategy="no")
    test = heldout_metrics(model, tok, rows["test"], max_length=max_length, max_new_tokens=args.max_new_tokens,
                           batch_size=args.eval_batch_size)  # fmt: skip
    save_codebc(model, out, tok, SPEC)
    entry = dataset_entry(args.data, data, description="Solidity contracts, one per row (or per .sol file)")
    sources = {}
    for row in rows["train"] + rows["test"]:
        sources[row["tag_source"]] = sources.get(row["tag_source"], 0) + 1
    save_training_record(
        out,
        method=SPEC.name,
        command="hf-ext train codebc" + (" " + shlex.join(argv) if argv else ""),
        base_model=hub_id_or_none(args.model_name_or_path),
        datasets=[entry],
        metrics=record_metrics(test, entry["name"]),
        config={
            "model_name_or_path": args.model_name_or_path,
            "stages": args.stage_list,
            "steps": args.steps,
            "learning_rate": stage_args.learning_rate,
            "batch_size": stage_args.batch_size,
            "lora_r": stage_args.lora_r,
            "lora_alpha": stage_args.lora_alpha,
            "lora_targets": targets,
            "test_split": args.test_split,
            "seed": args.seed,
            "labeller": labeller,
            "max_length": max_length,
            "max_new_tokens": args.max_new_tokens,
            "eval_batch_size": args.eval_batch_size,
            "split_rows": {k: len(v) for k, v in rows.items()},
            "tag_sources": sources,
            "test_tags": {t: sum(r["tag"] == t for r in rows["test"]) for t in ("correct", "bug")},
            "stage_training_loss": losses,
            "test_perplexity": test["perplexity"],
            "test_verdicts": test["per_contract"]["verdict"],
        },
        notes=(
            f"CodeBC stages {' -> '.join(args.stage_list)} ({args.steps} steps each) with one LoRA adapter; "
            f"{len(rows['test'])} held-out contracts"
            + ("" if test["compile_rate"] is not None else "; compile rate not measured (no solc-js or no generation)")
        ),
    )
    compile_text = "n/a" if test["compile_rate"] is None else f"{test['compile_rate']:.3f}"
    print(f"test loss {test['loss']:.4f}  VD accuracy {test['vd_accuracy']:.3f}  compile rate {compile_text}  -> {out}")
    return out


__all__ = [
    "LABELLERS",
    "SPLIT_KEYS",
    "contract_splits",
    "train_on_contracts",
    "heldout_metrics",
    "load_base",
    "lora_targets",
    "prepare_rows",
    "record_metrics",
    "resolve_labeller",
    "stage_datasets",
]
