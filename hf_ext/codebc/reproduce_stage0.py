"""`hf-ext reproduce codebc --stage0`: does continued pretraining on permissive Solidity teach the base Solidity?

Stage 0 ([`~hf_ext.codebc.stage0`]) trains every parameter of the base (SmolLM2-135M-Instruct offline, or `--base
FOLDER`) by causal LM on the MIT / ISC / Apache-2.0 npm corpus of `make codebc-stage0-data`
(`$HF_EXT_CODEBC_STAGE0_NPM`) for a wall-clock budget (`--minutes`) or `--max_steps`, whichever ends first. The base
and the stage-0 model are then measured on the same held-out contracts (split by file-name hash), paired per
contract:

1. per-token NLL of each held-out contract (its first `--block_size` tokens): the premise;
2. a greedy completion of each self-contained held-out contract's opening (pragma line + first declaration up to
   its `{`, no chat template, `--new_tokens` at most, stopped at EOS or when the braces balance): does solc-js 0.8
   parse the completed file (parser pass), does it compile;
3. with `--humaneval_tasks N`: the parser-pass rate of the untagged instruct prompt on the N shortest
   Blockchain-HumanEval tasks (counts only, no verdict: too few pairs).

The rules ([`RULES`]) are printed before anything loads. Writes `results.json`, `results.md`, the completions under
`completions/` and the stage-0 model under `model/` (safetensors, atomic, checksummed): the base of later stages.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hf_ext.core.paths import work_dir
from hf_ext.core.reporting import Premise, VerdictRule, paired_bootstrap, print_rules

NLL_PREMISE = "stage 0 lowers held-out NLL (paired per contract, 95 % interval below 0)"
RULES = {
    "nll": VerdictRule(
        claim="Stage 0 lowers the held-out NLL",
        metric="mean per-token NLL (nats) of each held-out contract's first block, stage 0 − base, paired per "
        "contract (bootstrap)",
        higher_is_better=False,
    ),
    "parse": VerdictRule(
        claim="Stage 0 raises the parser-pass rate of held-out completions",
        metric="solc-js 0.8 parses the completed held-out contract (0/1), stage 0 − base, paired per contract "
        "(bootstrap)",
        premise=NLL_PREMISE,
    ),
    "compile": VerdictRule(
        claim="Stage 0 raises the compile rate of held-out completions",
        metric="solc-js 0.8 compiles the completed held-out contract (0/1), stage 0 − base, paired per contract "
        "(bootstrap)",
        premise=NLL_PREMISE,
    ),
}


@dataclass
class Stage0Arguments:
    """Knobs of `hf-ext reproduce codebc --stage0` (parsed by `HfArgumentParser`; `--flag_name` or `--flag-name`).

    Args:
        minutes (`float`, defaults to 30): wall-clock training budget; training stops at the first step past it.
        max_steps (`int`, defaults to 100000): optimiser steps at most (the clock usually ends it first).
        learning_rate (`float`, defaults to 5e-5): constant learning rate. Continued pretraining of a 135M model
            with full parameters: 5e-5 is a common fine-tuning rate that moves a pretrained model without wrecking
            what it knows (SmolLM2's own pretraining peaked at ~3e-3 with decay; 1e-4 is the paper's LoRA rate).
        batch_size (`int`, defaults to 2), block_size (`int`, defaults to 512): blocks per step and tokens per block.
        heldout (`int`, defaults to 24): held-out contracts completed (the first self-contained ones in hash order).
        heldout_fraction (`float`, defaults to 0.25): share of the hash range held out (NLL is measured on all of
            it). On the `make codebc-stage0-data` corpus 0.25 holds out 84 of 350 files, 25 of them self-contained
            (no import, compiles alone: the ones a completion is judged on); 0.1 leaves only 9 such files.
        new_tokens (`int`, defaults to 300): tokens generated per completion at most.
        gen_batch (`int`, defaults to 4): completions per `generate()` call.
        humaneval_tasks (`int`, defaults to 5): shortest Blockchain-HumanEval tasks completed with the untagged
            instruct prompt (0: skip).
        base (`str`, *optional*): a causal-LM folder or Hub id; default SmolLM2-135M-Instruct offline.
        npm (`str`, *optional*): the `node_modules` folder; default `$HF_EXT_CODEBC_STAGE0_NPM`.
        out (`str`): output folder (default `<work dir>/codebc/stage0`).
        seed (`int`, defaults to 0), logging_steps (`int`, defaults to 10), device (`str`, defaults to `auto`),
        quiet (`bool`): as elsewhere.
    """

    minutes: float = 30.0
    max_steps: int = 100_000
    learning_rate: float = 5e-5
    batch_size: int = 2
    block_size: int = 512
    heldout: int = 24
    heldout_fraction: float = 0.25
    new_tokens: int = 300
    gen_batch: int = 4
    humaneval_tasks: int = 5
    base: str | None = None
    npm: str | None = None
    out: str = field(default_factory=lambda: str(work_dir("codebc", "stage0")))
    seed: int = 0
    logging_steps: int = 10
    device: str = field(default="auto", metadata={"choices": ["auto", "cpu", "cuda"]})
    quiet: bool = False

    def __post_init__(self):
        from hf_ext.core.validation import check_finite_number, check_positive_int

        check_finite_number("--minutes", self.minutes, low=0.0, low_open=True, high=7 * 24 * 60)
        check_finite_number("--learning_rate", self.learning_rate, low=0.0, low_open=True, high=1.0)
        check_finite_number("--heldout_fraction", self.heldout_fraction, low=0.0, low_open=True, high=0.5)
        for name in ("max_steps", "batch_size", "heldout", "new_tokens", "gen_batch", "logging_steps"):
            check_positive_int(f"--{name}", getattr(self, name))
        check_positive_int("--block_size", self.block_size, minimum=16)
        check_positive_int("--humaneval_tasks", self.humaneval_tasks, minimum=0)
        check_positive_int("--seed", self.seed, minimum=0)


def build_parser():
    from transformers import HfArgumentParser

    return HfArgumentParser(Stage0Arguments, prog="hf-ext reproduce codebc --stage0", description=__doc__)


def _mean(xs) -> float | None:
    return sum(xs) / len(xs) if xs else None


def evaluate(model, tok, heldout, eval_set, server, args: Stage0Arguments, folder: Path, name: str) -> dict:
    """One model's held-out measurements: NLL of every held-out contract, completions of `eval_set` judged by solc-js
    (written to `folder`), and the untagged Blockchain-HumanEval parser pass."""
    from .stage0 import complete, completion_prompt, contract_nll, judge

    t = time.time()
    nll = contract_nll(model, tok, [c.code for c in heldout], args.block_size)
    t_nll, t = time.time() - t, time.time()
    print(f"[stage0] {name}: NLL of {len(heldout)} held-out contracts in {t_nll:.0f} s; completing {len(eval_set)} "
          f"openings ({args.new_tokens} new tokens at most)", flush=True)  # fmt: skip
    prompts = [completion_prompt(c.code) for c in eval_set]
    done = complete(model, tok, prompts, max_new_tokens=args.new_tokens, batch_size=args.gen_batch)
    t_gen = time.time() - t
    names = [f"{i:03d}_{c.source.rsplit('/', 1)[-1]}" for i, c in enumerate(eval_set)]
    verdicts = judge(server, {n: d["file"] for n, d in zip(names, done)})
    folder.mkdir(parents=True, exist_ok=True)
    for n, d in zip(names, done):
        (folder / n).write_text(d["file"], encoding="utf-8")
    out = {
        "nll": [x for x, _ in nll],
        "nll_tokens": [n for _, n in nll],
        "completions": [{"name": n, "balanced": d["balanced"], **verdicts[n]} for n, d in zip(names, done)],
        "seconds_nll_per_contract": round(t_nll / max(1, len(heldout)), 3),
        "seconds_per_completion": round(t_gen / max(1, len(eval_set)), 2),
    }
    print(f"[stage0] {name}: {_count(out, 'parses')} completions parse, {_count(out, 'compiles')} compile "
          f"({out['seconds_per_completion']} s per completion)", flush=True)  # fmt: skip
    if args.humaneval_tasks:
        out["humaneval"] = humaneval_untagged(model, tok, server, args)
        print(f"[stage0] {name}: untagged Blockchain-HumanEval {out['humaneval']['passed']}/{args.humaneval_tasks} "
              "parse", flush=True)  # fmt: skip
    return out


def humaneval_untagged(model, tok, server, args: Stage0Arguments) -> dict:
    """Parser pass of the untagged instruct prompt (the model's chat template) on the shortest tasks."""
    from .data import humaneval_prompt, humaneval_reference, humaneval_tasks
    from .tags import generate_with_tag

    tasks = sorted(humaneval_tasks(), key=lambda t: (len(humaneval_reference(t)), t))[: args.humaneval_tasks]
    gens = generate_with_tag(model, tok, [humaneval_prompt(t) for t in tasks], None,
                             max_new_tokens=args.new_tokens, batch_size=args.gen_batch)  # fmt: skip
    ok = {t: server.compile(g["code"], f"{t}.sol", parse_only=True).ok for t, g in zip(tasks, gens)}
    return {"tasks": tasks, "parses": [ok[t] for t in tasks], "passed": sum(ok.values())}


def decide(base: dict, stage0: dict) -> tuple[list[dict], dict]:
    """The verdicts of [`RULES`] (paired bootstrap over contracts) and the paired differences."""
    pairs = [(b, s) for b, s in zip(base["nll"], stage0["nll"]) if b == b and s == s]  # NaN: too short to score
    diffs = {"nll": paired_bootstrap([s for _, s in pairs], [b for b, _ in pairs])}
    for key, flag in (("parse", "parses"), ("compile", "compiles")):
        diffs[key] = paired_bootstrap([float(c[flag]) for c in stage0["completions"]],
                                      [float(c[flag]) for c in base["completions"]])  # fmt: skip
    nll_verdict = RULES["nll"].decide(diffs["nll"])
    premise = Premise(NLL_PREMISE, nll_verdict.verdict == "confirmed", nll_verdict.reason)
    verdicts = [nll_verdict.to_dict()]
    verdicts += [RULES[k].decide(diffs[k], premise).to_dict() for k in ("parse", "compile")]
    return verdicts, {k: d.to_dict() for k, d in diffs.items()}


def _count(ev: dict, flag: str) -> str:
    c = ev["completions"]
    return f"{sum(x[flag] for x in c)}/{len(c)}"


def report(results: dict) -> tuple[list[dict], str]:
    """The display tables and the headline of a finished run."""
    from hf_ext.core.results_schema import table

    ev, tr, corpus = results["evaluation"], results["training"], results["corpus"]
    rows = []
    for name in ("base", "stage0"):
        e = ev[name]
        he = e.get("humaneval")
        rows.append([name, f"{_mean(e['nll']):.3f}", _count(e, "parses"), _count(e, "compiles"),
                     _count(e, "balanced"), f"{he['passed']}/{len(he['tasks'])}" if he else "n/a"])  # fmt: skip
    tables = [
        table(
            "Held-out contracts: base vs stage 0",
            [
                "model",
                "mean NLL (nats/token)",
                "completions parse",
                "completions compile",
                "braces balanced",
                "HumanEval untagged parse",
            ],  # fmt: skip
            rows,
            note=f"NLL over {len(ev['base']['nll'])} held-out contracts (first {results['arguments']['block_size']} "
            f"tokens each); completions of {len(ev['base']['completions'])} self-contained held-out contracts "
            "(pragma + first declaration, greedy, no chat template), judged by solc-js 0.8.",
        ),
        table(
            "Stage 0 training",
            ["steps", "tokens", "seconds", "s / step", "stopped by", "first loss", "last loss"],
            [
                [
                    tr["steps"],
                    tr["tokens"],
                    tr["seconds"],
                    tr["seconds_per_step"],
                    tr["stopped_by"],
                    tr["loss_curve"][0]["loss"] if tr["loss_curve"] else None,
                    tr["loss_curve"][-1]["loss"] if tr["loss_curve"] else None,
                ]
            ],  # fmt: skip
        ),
        table(
            "Stage 0 corpus (licence allow-list MIT / ISC / Apache-2.0)",
            ["package", "licence", "allowed", "files kept"],
            [[k, v["licence"], "yes" if v["allowed"] else "no", v["kept"]] for k, v in corpus["packages"].items()],
            note=f"{corpus['kept']} of {corpus['files_seen']} files kept ({corpus['train_files']} train / "
            f"{corpus['heldout_files']} held out); dropped: "
            + ", ".join(f"{k} {v}" for k, v in corpus["dropped"].items()),
        ),
    ]
    words = "; ".join(f"{v['claim']} {v['verdict']}" for v in results["verdicts"])
    return tables, f"{words} ({tr['steps']} steps, {tr['tokens']} tokens)"


def save_model(model, tok, out_dir: Path) -> Path:
    """The stage-0 model and tokenizer as one folder (safetensors), swapped into place atomically with checksums."""
    from hf_ext.core.integrity import atomic_write_dir

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)

    return atomic_write_dir(out_dir, write)


def main(argv: list[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    (args,) = build_parser().parse_args_into_dataclasses(args=argv)  # validates every knob, before any work
    from hf_ext.core.devices import set_device, torch_device
    from hf_ext.core.progress import set_quiet

    from .solidity import SolcServer, toolchain_problem

    set_quiet(args.quiet)
    set_device(args.device)
    problem = toolchain_problem()
    if problem:
        raise SystemExit(f"codebc stage 0 needs the Solidity toolchain: {problem}")
    print_rules(RULES)  # the verdict rules, before anything loads
    from .stage0 import load_corpus, self_contained, train_stage0

    t0 = time.time()
    try:
        corpus = load_corpus(args.npm, args.heldout_fraction)
    except FileNotFoundError as err:
        raise SystemExit(f"codebc stage 0: {err}") from None
    s = corpus.stats
    print(f"[stage0] corpus: {s['kept']} files kept of {s['files_seen']} ({s['train_files']} train, "
          f"{s['heldout_files']} held out); dropped {s['dropped']}", flush=True)  # fmt: skip
    from transformers.utils import logging as hf_logging

    from .train_contracts import load_base

    hf_logging.set_verbosity_error()
    if args.base is None:
        from hf_ext.core.pretrained import smollm2_path

        args.base = str(smollm2_path())
    model, tok, _ = load_base(args.base)
    model.to(torch_device())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = SolcServer()
    eval_set = [c for c in corpus.heldout if self_contained(c, server)][: args.heldout]
    if len(eval_set) < 2:
        raise SystemExit(f"codebc stage 0: only {len(eval_set)} self-contained held-out contract(s); raise "
                         "--heldout_fraction")  # fmt: skip
    count = lambda c: len(tok(c.code, add_special_tokens=False)["input_ids"]) + 1  # noqa: E731 - +1: the EOS
    s.update(train_tokens=sum(map(count, corpus.train)), heldout_tokens=sum(map(count, corpus.heldout)),
             completion_contracts=len(eval_set))  # fmt: skip
    print(f"[stage0] {s['train_tokens']} train / {s['heldout_tokens']} held-out tokens; evaluating the base on "
          f"{len(corpus.heldout)} contracts (NLL) and {len(eval_set)} completions", flush=True)  # fmt: skip
    results: dict = {"arguments": dataclasses.asdict(args), "corpus": s, "evaluation": {}}
    results["evaluation"]["base"] = evaluate(model, tok, corpus.heldout, eval_set, server, args,
                                             out / "completions" / "base", "base")  # fmt: skip
    (out / "results.partial.json").write_text(json.dumps(results, indent=1))
    print(f"[stage0] training for up to {args.minutes:g} min / {args.max_steps} steps", flush=True)
    results["training"] = train_stage0(
        model, tok, [c.code for c in corpus.train], minutes=args.minutes, max_steps=args.max_steps,
        learning_rate=args.learning_rate, batch_size=args.batch_size, block_size=args.block_size,
        output_dir=str(out / "tmp"), seed=args.seed, logging_steps=args.logging_steps,
    )  # fmt: skip
    tr = results["training"]
    print(f"[stage0] trained {tr['steps']} steps ({tr['tokens']} tokens) in {tr['seconds']} s; evaluating", flush=True)
    results["evaluation"]["stage0"] = evaluate(model, tok, corpus.heldout, eval_set, server, args,
                                               out / "completions" / "stage0", "stage 0")  # fmt: skip
    server.close()
    save_model(model, tok, out / "model")
    results["verdicts"], results["differences"] = decide(results["evaluation"]["base"],
                                                         results["evaluation"]["stage0"])  # fmt: skip
    return finish(results, argv, out, time.time() - t0)


def finish(results: dict, argv: list[str], out: Path, seconds: float) -> dict:
    """Adds the schema fields, validates and writes `results.json` and `results.md`, prints the verdicts."""
    from hf_ext.core.reporting import RESULTS_SCHEMA_VERSION, environment, reproduce_command, write_results
    from hf_ext.core.results_render import render_section
    from hf_ext.core.results_schema import validate_results

    tables, headline = report(results)
    command = reproduce_command("codebc", ["--stage0", *argv], skip=("--npm",))
    results.update(schema_version=RESULTS_SCHEMA_VERSION, method="codebc", scale="stage0",
                   environment=environment(), command=command, rules=[r.to_dict() for r in RULES.values()],
                   headline=headline, report=tables, seconds=round(seconds, 1))  # fmt: skip
    validate_results(results)
    write_results(out / "results.json", results)
    (out / "results.md").write_text(render_section(results, source=command), encoding="utf-8")
    (out / "results.partial.json").unlink(missing_ok=True)
    for v in results["verdicts"]:
        print(f"{v['claim']}: {v['verdict'].upper()} ({v['reason']})")
    print(f"\nwrote {out / 'results.json'} ({results['seconds']} s)")
    return results
