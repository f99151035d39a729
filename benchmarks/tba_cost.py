"""Cost of one TBA step against one PGD step (both spend exactly one victim gradient evaluation per step), and of
each DHNG branch, on random-init artifacts at the reproduction's sizes (64x64 images, default configs).

Paper: [TBA](https://arxiv.org/abs/2504.17457). TBA's extra cost is the generator forward and backward (VAE decoder
twice, ControlNet once) on top of the victim's; the ratio to PGD says what "same number of victim gradients" costs
in wall time. Single-threaded, best of `--repeats`.

The last lines compare TBA's step with and without the step-invariant work hoisted out of the loop
(`TbaAttackConfig.reuse_clean_work`: the ControlNet's embedding of the clean image and the clean image's SSIM
statistics, computed once per attack instead of at every step), measured in the same run, alternating the two
paths; the adversarial images are checked to be bitwise equal.

Usage: `python benchmarks/tba_cost.py [--batch 16] [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import time

import torch
from timing import best_of

import hf_ext.tba  # noqa: F401
from hf_ext.tba.attacks import AdversarialObjective, pgd
from hf_ext.tba.body import ProceduralBody
from hf_ext.tba.configuration_tba import TbaDhngConfig, TbaVictimConfig
from hf_ext.tba.data import render_batch
from hf_ext.tba.dhng import TbaAttackConfig, tba_attack
from hf_ext.tba.modeling_tba import TbaDhngModel, TbaPoseRegressor


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    body = ProceduralBody()
    x, gt = render_batch(body, a.batch, seed=0)
    victim = TbaPoseRegressor(TbaVictimConfig()).eval().requires_grad_(False)
    eps = 8 / 255

    def objective(reuse: bool = True):
        o = AdversarialObjective(victim, body, x, eps, reference_params=gt)
        o.reuse_clean_work = reuse
        return o

    t_pgd = best_of(lambda: pgd(objective(), x, eps, a.steps), a.repeats) / a.steps
    print(f"batch {a.batch}, {a.steps} steps, 1 thread; seconds per step (one victim gradient each)")
    print(f"{'PGD':<38}{t_pgd:8.3f}  1.0x")
    spec_widths = TbaDhngConfig(
        vae_block_out_channels=[32, 64], controlnet_block_out_channels=[32, 64], vae_mid_attention=True
    )  # the spec's sizes, 2.5x costlier
    runs = [("TBA (default DHNG)", TbaDhngConfig(), {}),
            ("TBA (spec widths 32/64 + attention)", spec_widths, {}),
            ("TBA VAE-only", TbaDhngConfig(), dict(use_controlnet=False)),
            ("TBA ControlNet-only", TbaDhngConfig(), dict(use_vae=False)),
            ("TBA no generator gradient", TbaDhngConfig(), dict(generator_grad=False))]  # fmt: skip
    for name, dcfg, kw in runs:
        dhng = TbaDhngModel(dcfg).eval().requires_grad_(False)
        config = TbaAttackConfig(eps=eps, steps=a.steps, **kw)
        t = best_of(lambda: tba_attack(objective(), dhng, x, config), a.repeats) / a.steps
        print(f"{name:<38}{t:8.3f}  {t / t_pgd:.1f}x")
    dhng = TbaDhngModel(TbaDhngConfig()).eval().requires_grad_(False)
    best = {True: float("inf"), False: float("inf")}
    outs = {}
    for _ in range(a.repeats):  # alternate, so that load drifts hit both paths alike
        for reuse in (False, True):
            config = TbaAttackConfig(eps=eps, steps=a.steps, reuse_clean_work=reuse)
            t0 = time.perf_counter()
            outs[reuse] = tba_attack(objective(reuse), dhng, x, config)
            best[reuse] = min(best[reuse], (time.perf_counter() - t0) / a.steps)
    same = bool(torch.equal(outs[True], outs[False]))
    print(f"\nTBA step, step-invariant work every step (before){best[False]:8.3f}")
    print(f"TBA step, computed once per attack (after)      {best[True]:8.3f}")
    print(f"before / after: {best[False] / best[True]:.3f}x (adversarial images bitwise equal: {same})")


if __name__ == "__main__":
    main()
