"""Equal tuning of every arm of `hf-ext reproduce tba` on a tuning split (issue 41): the same number of
configurations for TBA, PGD and MI-FGSM, each scored on images rendered from a seed no test, training or held-out
batch uses, the best one (highest white-box MPJPE of victim A) kept for the test images; and the per-step wall time
of the chosen TBA and PGD on the same split, which sets the steps of the wall-time-matched PGD arm.

The grids (4 configurations per arm; step sizes are multiples of `eps / steps`):

- PGD: step size 0.5, 1, 2.5 (its default) or 5;
- MI-FGSM: step size 1 (its default) or 2.5, decay 0.5 or 1 (its default);
- TBA: generator step β 0.02 or 0.5 (its default), fusion weights (VAE, ControlNet) (0.5, 0.5) (its default) or
  (0.8, 0.2); its residual keeps PGD's default step (the DHNG's timestep is fixed by its training band and not
  tuned).
"""

from __future__ import annotations

import time

import torch

from .attacks import AdversarialObjective, mifgsm, pgd
from .data import render_batch
from .dhng import TbaAttackConfig, tba_attack
from .metrics import body_errors

TUNE_SEED = 30_000  # test renders use 10_000 + seed, the victims' held-out set 20_000, training 0 and 1
GRIDS = {
    "pgd": [{"alpha_mult": m} for m in (0.5, 1.0, 2.5, 5.0)],
    "mifgsm": [{"alpha_mult": m, "decay": d} for m in (1.0, 2.5) for d in (0.5, 1.0)],
    "tba": [{"beta": b, "w_vae": w, "w_controlnet": round(1 - w, 6)} for b in (0.02, 0.5) for w in (0.5, 0.8)],
}
DEFAULTS = {
    "pgd": {"alpha_mult": 2.5},
    "mifgsm": {"alpha_mult": 1.0, "decay": 1.0},
    "tba": {"beta": TbaAttackConfig.beta, "w_vae": TbaAttackConfig.w_vae, "w_controlnet": TbaAttackConfig.w_controlnet},
}


def attack_runners(images, eps: float, steps: int, dhng, seed: int, chosen: dict) -> dict:
    """`{arm: run(objective) -> adversarial images}` for PGD, MI-FGSM and TBA at the settings `chosen[arm]` (a
    grid entry)."""
    gen = lambda: torch.Generator().manual_seed(seed)  # noqa: E731
    p, m, t = chosen["pgd"], chosen["mifgsm"], chosen["tba"]
    tba_cfg = TbaAttackConfig(eps=eps, steps=steps, seed=seed, **t)
    return {
        "pgd": lambda o: pgd(o, images, eps, steps, alpha=min(1.0, p["alpha_mult"] * eps / steps), generator=gen()),
        "mifgsm": lambda o: mifgsm(
            o, images, eps, steps, alpha=min(1.0, m["alpha_mult"] * eps / steps), decay=m["decay"]
        ),  # fmt: skip
        "tba": lambda o: tba_attack(o, dhng, images, tba_cfg),
    }


def tune(body, victim, dhng, eps: float, steps: int, num_tune: int, loss_cfg) -> dict:
    """Scores every grid entry of every arm on `num_tune` tuning renders (white-box MPJPE of `victim`, mm, against
    the ground truth, as the test), keeps the best per arm and times the chosen PGD and TBA per step.

    Returns `{"split", "grid": {arm: [{"config", "mpjpe_mm", "time_s"}]}, "chosen": {arm: config},
    "step_time_s": {"pgd", "tba"}}`."""
    images, gt = render_batch(body, num_tune, seed=TUNE_SEED, image_size=dhng.config.image_size)
    grid: dict[str, list[dict]] = {arm: [] for arm in GRIDS}
    for arm, configs in GRIDS.items():
        for config in configs:
            chosen = {**DEFAULTS, arm: config}
            objective = AdversarialObjective(victim, body, images, eps, loss_cfg, reference_params=gt)
            start = time.perf_counter()
            adv = attack_runners(images, eps, steps, dhng, 0, chosen)[arm](objective)
            elapsed = time.perf_counter() - start
            with torch.no_grad():
                pred = victim(pixel_values=adv).params
            score = float(body_errors(body, pred, gt)["mpjpe"].mean())
            grid[arm].append({"config": config, "mpjpe_mm": score, "time_s": elapsed})
    chosen = {arm: max(rows, key=lambda r: r["mpjpe_mm"])["config"] for arm, rows in grid.items()}
    step_time = {}
    for arm in ("pgd", "tba"):
        row = next(r for r in grid[arm] if r["config"] == chosen[arm])
        step_time[arm] = row["time_s"] / steps
    split = {"seed": TUNE_SEED, "num_images": num_tune, "criterion": "white-box MPJPE of victim A (mm), highest"}
    return {"split": split, "grid": grid, "chosen": chosen, "step_time_s": step_time}


def time_matched_steps(tuning: dict, steps: int) -> int:
    """PGD steps that cost TBA's wall time for `steps` steps, from the per-step times measured on the tuning split
    (never fewer than `steps`)."""
    t = tuning["step_time_s"]
    return max(steps, round(steps * t["tba"] / max(t["pgd"], 1e-9)))


__all__ = ["DEFAULTS", "GRIDS", "TUNE_SEED", "attack_runners", "time_matched_steps", "tune"]
