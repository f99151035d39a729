"""Communication and compute cost of H2Tune, as measured in one run.

1. Bytes each client sends per round against the hidden size d: H2Tune sends G_c (L_max × 7 × R × R floats), which
   does not depend on d; HetLoRA sends its LoRA factors, which grow with d.
2. Server aggregation time (unweighted mean with validation) for 3 and 30 clients.
3. Train step (forward + backward + AdamW step + H2Tune's post-step write-back) of the H2Tune adapter against plain
   LoRA of the same rank and dropout (0.05, the paper's default and the reproduce baseline's) on the same tiny Llama,
   for both H2Tune steps in one interleaved run: the first-round ("joint") step, one forward, target ≤ 1.3×; and the
   two-pass alternating step of rounds ≥ 1 (`hf_ext.h2tune.trainer.two_pass_loss`: shared pass with A, B frozen,
   then task-specific pass with T, S frozen and a KL to the first pass's logits, one backward, one optimiser step),
   which does two forwards and so costs about twice a LoRA step. Medians, each printed as a ratio to plain LoRA.

    python benchmarks/h2tune_cost.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hf_ext.h2tune import H2TuneConfig
from hf_ext.h2tune.aggregation import aggregate_mean
from hf_ext.h2tune.baselines import lora_factors
from hf_ext.h2tune.model import MODULE_SLOTS, sync_middle
from hf_ext.h2tune.presets import tiny_base, tiny_base_config

L_MAX, R = 4, 16


def payload_bytes(hidden: int, rank: int = 8) -> tuple[int, int]:
    """(H2Tune bytes, HetLoRA bytes) one client with width `hidden` sends per round."""
    from peft import LoraConfig, get_peft_model

    base = tiny_base(tiny_base_config("llama", L_MAX, hidden))
    lora = get_peft_model(base, LoraConfig(r=rank, target_modules="all-linear"))
    het = sum(4 * (a.numel() + b.numel()) for a, b in lora_factors(lora).values())
    return 4 * L_MAX * len(MODULE_SLOTS) * R * R, het


def aggregation_seconds(num_clients: int, repeats: int) -> float:
    shape = (L_MAX, len(MODULE_SLOTS), R, R)
    updates = {str(i): torch.randn(shape) for i in range(num_clients)}
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        aggregate_mean(updates, shape)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def step_ratio(repeats: int, hidden: int = 128, rank: int = 8, make_base=None, ids=None) -> tuple[float, float, float]:
    """Median train-step times of the H2Tune adapter's first-round step and its two-pass step over plain LoRA (same
    rank and dropout), interleaved in one run; the base is the tiny Llama of width `hidden` unless `make_base` builds
    another (a fresh copy per adapter). Returns `(first-round ratio, two-pass ratio, LoRA seconds)`."""
    from peft import LoraConfig, get_peft_model

    from hf_ext.h2tune.trainer import previous_t, two_pass_loss

    make_base = make_base or (lambda: tiny_base(tiny_base_config("llama", L_MAX, hidden)))
    ids = torch.randint(3, 64, (8, 32)) if ids is None else ids
    models = {
        "lora": get_peft_model(
            make_base(), LoraConfig(r=rank, lora_alpha=16, lora_dropout=0.05, target_modules="all-linear")
        ),
        "h2tune": get_peft_model(make_base(), H2TuneConfig(r=rank, global_rank=R)),
        "h2tune_two_pass": get_peft_model(make_base(), H2TuneConfig(r=rank, global_rank=R)),
    }
    prev = previous_t(models["h2tune_two_pass"])  # T at the end of the "previous round"
    opts = {k: torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-3) for k, m in models.items()}
    times = {k: [] for k in models}
    warmup = min(3, max(1, repeats // 3))
    for i in range(repeats + warmup):
        for k, m in models.items():
            t = time.perf_counter()
            if k == "h2tune_two_pass":
                loss, _ = two_pass_loss(m, {"input_ids": ids, "labels": ids}, prev)
            else:
                loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            opts[k].step()
            opts[k].zero_grad()
            if k != "lora":
                sync_middle(m)
            if i >= warmup:
                times[k].append(time.perf_counter() - t)
    lora = statistics.median(times["lora"])
    return statistics.median(times["h2tune"]) / lora, statistics.median(times["h2tune_two_pass"]) / lora, lora


def smollm2_step_ratio(repeats: int, batch: int = 8, seq: int = 128, rank: int = 8) -> tuple[float, float, float]:
    """The same ratio on SmolLM2-135M-Instruct (30 layers, width 576; offline through `hf_ext.core.pretrained`),
    at the issue's measured shape: r 8, R 16, batch 8, 128 tokens."""
    from hf_ext.core.pretrained import load_smollm2

    ids = torch.randint(0, 49152, (batch, seq))
    return step_ratio(repeats, rank=rank, make_base=lambda: load_smollm2()[0].train(), ids=ids)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument(
        "--smollm2",
        type=int,
        default=0,
        metavar="N",
        help="also time N interleaved SmolLM2-135M steps per adapter (batch 8, 128 tokens; ~10 s each on "
        "2 CPU cores), 0 to skip",
    )
    args = p.parse_args(argv)
    out: dict = {"payload": {}}
    print("hidden d | H2Tune bytes/round | HetLoRA bytes/round")
    for d in (32, 64, 128, 256):
        h2, het = payload_bytes(d)
        out["payload"][d] = {"h2tune": h2, "hetlora": het}
        print(f"{d:>8} | {h2:>18,} | {het:>19,}")
    for n in (3, 30):
        s = aggregation_seconds(n, args.repeats)
        out[f"aggregation_s_{n}"] = s
        print(f"aggregation, {n:>2} clients: {1e3 * s:.2f} ms")
    for hidden in (128, 512):  # the TriLoRA overhead is per module (T, S), so it shrinks relative to wider layers
        ratio, two_pass, lora = step_ratio(args.repeats, hidden=hidden)
        out[f"step_ratio_d{hidden}"] = ratio
        out[f"two_pass_step_ratio_d{hidden}"] = two_pass
        print(
            f"train step / LoRA, hidden {hidden}: H2Tune first round {ratio:.2f}× (target ≤ 1.3×), H2Tune two-pass "
            f"(rounds ≥ 1) {two_pass:.2f}× (LoRA {1e3 * lora:.1f} ms)"
        )
    if args.smollm2:
        ratio, two_pass, lora = smollm2_step_ratio(args.smollm2)
        out["step_ratio_smollm2"] = ratio
        out["two_pass_step_ratio_smollm2"] = two_pass
        print(
            f"train step / LoRA, SmolLM2-135M (r 8, R 16, batch 8, 128 tokens): H2Tune first round {ratio:.2f}×, "
            f"two-pass {two_pass:.2f}× (LoRA {lora:.2f} s)"
        )
    import os

    out["load_average"] = list(os.getloadavg())
    return out


if __name__ == "__main__":
    main()
