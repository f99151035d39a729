"""The TBA Space: pick a rendered example (with ground truth) or upload an image, choose ε, the attack and its number
of steps, and see the perturbation and the victim's predicted skeleton before and after the attack.

The Space loads the victim and the noise generator from the two model repos its README links (`models:`, in that
order, or `$HF_EXT_MODEL_REPO="victim,dhng"`) with `from_pretrained`. When they cannot be loaded it uses the artifacts
of `TBA_ARTIFACTS=<folder>` (e.g. one `hf-ext reproduce tba` wrote), else trains a small victim and generator once
(about a minute on two CPU cores) into the user cache (`hf_ext.core.paths.cache_dir("tba", "demo-artifacts-2")`), and
says so on the page; it reads nothing from `runs/`.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np
import torch

from hf_ext.core.demo import load_linked, readable_errors, space_model_repos

ATTACKS = ("TBA", "PGD", "MI-FGSM", "FGSM")
EXAMPLES = tuple(f"example {i}" for i in range(6))
UPLOAD = "uploaded image"
SHIFT = "prediction shift (MPJPE, mm; ↑ stronger attack)"
LINF = "L-inf of the perturbation (x/255; ≤ eps)"


def _artifact_folder() -> Path:
    env = os.environ.get("TBA_ARTIFACTS")
    if env:
        return Path(env)
    from hf_ext.core.paths import cache_dir

    from .train import TbaTrainingArguments, train_all

    # a Space reads nothing from runs/: a small victim and generator are trained once into the user cache
    # "-2": the DHNG gained a UNet (issue 21), so a generator cached before it no longer loads (CheckpointError)
    folder = cache_dir("tba", "demo-artifacts-2")
    if not (folder / "training.json").is_file():
        # 250 renders: the first visitor waits ~1 min on 2 cores instead of ~1.5 (the victim's ridge heads and the
        # 0.25-epoch generator need no more to show an attack; linked model repos replace them in a real Space)
        train_all(TbaTrainingArguments(num_train=250, victim_epochs=6, vae_epochs=0.25, denoiser_epochs=0.25), folder)
    return folder


@functools.lru_cache(maxsize=1)
def _models():
    """`(victim, dhng, body, examples, ground truth, source note)`, cached for the Space's lifetime."""
    from transformers import AutoModel

    import hf_ext.tba  # noqa: F401  (registers the Auto classes)

    from .body import build_body
    from .data import render_batch

    def linked(_):
        repos = space_model_repos("tba")
        if len(repos) < 2:
            raise ValueError("the Space links the victim and the noise generator as two model repos")
        return AutoModel.from_pretrained(repos[0]), AutoModel.from_pretrained(repos[1])

    def in_code():
        meta = json.loads((_artifact_folder() / "training.json").read_text())
        return AutoModel.from_pretrained(meta["paths"]["victim_a"]), AutoModel.from_pretrained(meta["paths"]["dhng"])

    (victim, dhng), source = load_linked(
        "tba",
        linked,
        in_code,
        "a small victim and generator trained in code on the first request (user cache)"
        if not os.environ.get("TBA_ARTIFACTS")
        else "the artifacts in $TBA_ARTIFACTS",
    )
    if not source.startswith("**Note:**"):
        repos = space_model_repos("tba")
        source = f"models: victim `{repos[0]}`, noise generator `{repos[1]}` (loaded with `from_pretrained`)"
    victim, dhng = (m.eval().requires_grad_(False) for m in (victim, dhng))
    body = build_body(victim.config.body_model)
    images, gt = render_batch(body, len(EXAMPLES), seed=424242, image_size=victim.config.image_size)
    return victim, dhng, body, images, gt, source


def load_models():
    """`(victim, dhng, body, examples, ground truth)`: the linked model repos' victim and noise generator (the
    Space README's `models:`, in that order), else a small pair trained in code into the user cache."""
    return _models()[:5]


def _validate(eps_255, steps, seed) -> tuple[float, int, int]:
    try:
        eps_255, steps, seed = float(eps_255), int(steps), int(seed)
    except (TypeError, ValueError):
        raise ValueError("eps, steps and seed must be numbers") from None
    if not eps_255 > 0:
        raise ValueError(f"eps (the L-infinity budget) must be > 0, got {eps_255:g}/255")
    if eps_255 > 64:
        raise ValueError(f"eps must be at most 64/255 here, got {eps_255:g}/255")
    if not 1 <= steps <= 50:
        raise ValueError(f"steps must be between 1 and 50, got {steps}")
    if seed < 0:
        raise ValueError(f"seed must be 0 or a positive whole number, got {seed}")
    return eps_255 / 255, steps, seed


def _uploaded(image, size: int) -> torch.Tensor:
    from PIL import Image

    if image is None:
        raise ValueError("choose an example or upload an image first")
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, -1)
    if arr.ndim != 3 or arr.shape[-1] not in (3, 4):
        raise ValueError(f"the image must be RGB, got an array of shape {arr.shape}")
    pil = Image.fromarray(arr[..., :3].astype(np.uint8)).resize((size, size), Image.BILINEAR)
    return torch.from_numpy(np.asarray(pil).astype(np.float32) / 255).permute(2, 0, 1)[None]


def run_attack(source: str = EXAMPLES[0], image=None, eps_255: float = 8, attack: str = "TBA", steps: int = 10,
               seed: int = 0):  # fmt: skip
    """Attacks one image; returns `(clean view, perturbation, adversarial view, table rows)`. Raises `ValueError`
    with a readable message on bad input."""
    from .attacks import AdversarialObjective, fgsm, mifgsm, pgd
    from .dhng import TbaAttackConfig, tba_attack
    from .metrics import body_errors, mpjpe
    from .viz import perturbation_image, skeleton_view, to_pil

    eps, steps, seed = _validate(eps_255, steps, seed)
    if attack not in ATTACKS:
        raise ValueError(f"attack must be one of {ATTACKS}, got {attack!r}")
    victim, dhng, body, examples, truths = load_models()
    if source == UPLOAD:
        x, gt = _uploaded(image, victim.config.image_size), None
    elif source in EXAMPLES:
        i = EXAMPLES.index(source)
        x, gt = examples[i : i + 1], truths[i : i + 1]
    else:
        raise ValueError(f"source must be one of {EXAMPLES + (UPLOAD,)}, got {source!r}")
    objective = AdversarialObjective(victim, body, x, eps, reference_params=gt)
    gen = torch.Generator().manual_seed(seed)
    # Without ground truth the loss is flat at x (reference = clean prediction): FGSM / MI-FGSM start at random.
    random = gt is None
    if attack == "TBA":
        adv = tba_attack(objective, dhng, x, TbaAttackConfig(eps=eps, steps=steps, seed=seed))
    elif attack == "PGD":
        adv = pgd(objective, x, eps, steps, generator=gen)
    elif attack == "MI-FGSM":
        adv = mifgsm(objective, x, eps, steps, random_start=random, generator=gen)
    else:
        adv = fgsm(objective, x, eps, random_start=random, generator=gen)
    with torch.no_grad():
        p_clean, p_adv = victim(pixel_values=x).params, victim(pixel_values=adv).params
        j_clean, _ = body(p_clean)
        j_adv, _ = body(p_adv)
        rows = [[SHIFT, round(float(1000 * mpjpe(j_adv, j_clean, body.root_joints)[0]), 1)],
                [LINF, round(float((adv - x).abs().max()) * 255, 2)],
                ["victim gradient evaluations (↓ cheaper attack)", objective.grad_evals]]  # fmt: skip
        if gt is not None:
            clean_err, adv_err = body_errors(body, p_clean, gt), body_errors(body, p_adv, gt)
            for m, name in (("mpjpe", "MPJPE"), ("pa_mpjpe", "PA-MPJPE"), ("pve", "PVE")):
                rows.append([f"{name} vs truth, clean -> adversarial (mm, ↑ = attack hurt more)",
                             f"{float(clean_err[m][0]):.1f} -> {float(adv_err[m][0]):.1f}"])  # fmt: skip
    clean_view = skeleton_view(x[0], p_clean[0], body, scale=5)
    adv_view = skeleton_view(adv[0], p_adv[0], body, scale=5, color=(0, 255, 255))
    return clean_view, to_pil(perturbation_image(adv[0], x[0], eps), 5), adv_view, rows


def reading(rows: list[list], attack: str, eps_255: float) -> str:
    """One honest line on one attack: how far it moved the prediction within the budget, and what that is worth."""
    values = dict((r[0], r[1]) for r in rows)
    return (
        f"**Reading:** {attack} moved the predicted joints by {values[SHIFT]} mm (MPJPE against the clean "
        f"prediction) with an L-inf of {values[LINF]}/255 ≤ {float(eps_255):g}/255; run PGD or MI-FGSM on the "
        "same image and budget to compare. The victims here are small regressors that learn pose only "
        "roughly (README: a null result), so a shift says little about a production estimator."
    )


MODELS_NOTE = (
    "Models: the victim and the noise generator of the linked model repos (the README's `models:`, in that "
    "order) when they load; else a small pair trained in code on the first request (about a minute on two "
    "CPU cores) and kept in the user cache."
)


def build_demo():
    """The Gradio Blocks of the TBA Space."""
    import gradio as gr

    def handler(source, image, eps_255, attack, steps, seed, progress=gr.Progress()):
        progress(0.05, desc="loading the victim and the generator (trained once on the first request)")
        load_models()
        progress(0.5, desc=f"running {attack}")
        *views, rows = run_attack(source, image, eps_255, attack, steps, seed)
        return (*views, rows, reading(rows, attack, eps_255) + "\n\n" + _models()[5])

    handler.__name__ = "run_attack"
    run = readable_errors(handler)  # bad input: a readable message in the page, not a stack trace

    with gr.Blocks(title="TBA: adversarial attack on human pose and shape estimation") as demo:
        gr.Markdown(
            "# TBA — adversarial noise from a VAE + ControlNet generator against a pose-and-shape regressor\n"
            "[arXiv 2504.17457](https://arxiv.org/abs/2504.17457) · hf_ext. The victim is a small ViT regressor of "
            "body-model parameters trained on rendered bodies. Pick a rendered example (its ground truth is known) "
            "or upload an image (resized to 64x64), choose the L-infinity budget and the attack, and compare the "
            "predicted skeleton before (yellow) and after (cyan). The perturbation is shown scaled from [-eps, eps] "
            "to [0, 1]."
        )
        with gr.Row():
            source = gr.Dropdown(list(EXAMPLES) + [UPLOAD], value=EXAMPLES[0], label="image source")
            upload = gr.Image(type="numpy", label="upload (used with 'uploaded image')", height=160)
        with gr.Row():
            eps = gr.Number(value=8, label="eps (x/255)")
            attack = gr.Radio(list(ATTACKS), value="TBA", label="attack")
            steps = gr.Slider(1, 50, value=10, step=1, label="steps")
            seed = gr.Number(value=0, precision=0, label="seed")
        gr.Examples(
            examples=[
                [EXAMPLES[0], None, 8, "TBA", 10, 0],
                [EXAMPLES[0], None, 8, "PGD", 10, 0],
                [EXAMPLES[1], None, 4, "FGSM", 1, 0],
            ],
            inputs=[source, upload, eps, attack, steps, seed],
            label="examples: TBA against PGD on the same image and budget, a one-step FGSM",
        )
        button = gr.Button("Attack", variant="primary")
        with gr.Row():
            clean = gr.Image(label="clean + predicted skeleton", elem_id="tba-clean", type="pil")
            delta = gr.Image(label="perturbation", elem_id="tba-delta", type="pil")
            adv = gr.Image(label="adversarial + predicted skeleton", elem_id="tba-adv", type="pil")
        table = gr.Dataframe(headers=["quantity", "value"], label="effect of the attack", elem_id="tba-metrics")
        verdict = gr.Markdown(elem_id="tba-reading")
        gr.Markdown(MODELS_NOTE, elem_id="tba-model")
        button.click(
            run, [source, upload, eps, attack, steps, seed], [clean, delta, adv, table, verdict], api_name="attack"
        )
    return demo


__all__ = ["build_demo", "load_models", "reading", "run_attack"]
