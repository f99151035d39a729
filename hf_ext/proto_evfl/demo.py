"""The Proto-EVFL Space: choose the unaligned pools' imbalance ratio and the class that is never labelled, train
vanilla VFL and Proto-EVFL for a few seconds (the Flower protocol, in-process), and compare their per-class test
accuracy; the fused test features and the global prototypes are shown in 2-D."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hf_ext.core.demo import readable_errors

NO_UNSEEN = "none"


def _validate(imbalance_ratio, unseen_class, rounds, seed) -> tuple[float, int | None, int, int]:
    try:
        ratio, rounds, seed = float(imbalance_ratio), int(rounds), int(seed)
    except (TypeError, ValueError):
        raise ValueError("imbalance ratio, rounds and seed must be numbers") from None
    if not 1.0 <= ratio <= 100.0:
        raise ValueError(f"imbalance ratio must be between 1 and 100, got {ratio:g}")
    if not 2 <= rounds <= 80:
        raise ValueError(f"rounds must be between 2 and 80, got {rounds}")
    if seed < 0:
        raise ValueError(f"seed must be 0 or a positive whole number, got {seed}")
    if unseen_class in (None, "", NO_UNSEEN):
        return ratio, None, rounds, seed
    try:
        unseen = int(unseen_class)
    except (TypeError, ValueError):
        raise ValueError(f"unseen class must be a digit 0-9 or {NO_UNSEEN!r}, got {unseen_class!r}") from None
    if not 0 <= unseen <= 9:
        raise ValueError(f"unseen class must be a digit 0-9, got {unseen}")
    return ratio, unseen, rounds, seed


def compare(imbalance_ratio: float = 50.0, unseen_class: str | int | None = 3, rounds: int = 30, seed: int = 0,
            progress=None):
    """Trains vanilla VFL and Proto-EVFL on the same vertical digits split.

    Returns `(summary rows, per-class accuracy figure, 2-D prototype figure)`; raises `ValueError` with a readable
    message on bad input.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .reproduce import run_settings
    from .training import run_federation

    ratio, unseen, rounds, seed = _validate(imbalance_ratio, unseen_class, rounds, seed)
    setting = "zero_shot" if unseen is not None else "long_tail"
    step = progress if progress is not None else (lambda *a, **k: None)
    results = {}
    for i, (label, variant) in enumerate((("vanilla VFL", "vanilla_vfl"), ("Proto-EVFL", "proto_evfl"))):
        step(0.05 + 0.45 * i, desc=f"training {label} ({rounds} rounds over the Flower protocol)")
        settings = run_settings(variant, setting, seed, ratio, rounds)
        if unseen is not None:  # the user's class, not reproduce's `seed mod 10`
            settings = replace(settings, data=replace(settings.data, unseen_class=unseen))
        results[label] = run_federation(settings)
    rows = []
    for key, name in (("accuracy", "accuracy"), ("macro_f1", "macro-F1"), ("unseen_accuracy", "unseen-class acc")):
        if key in results["Proto-EVFL"].metrics:
            rows.append([name] + [round(100 * r.metrics[key], 1) for r in results.values()])
    classes = np.arange(10)
    fig_acc, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
    for offset, (label, r) in zip((-0.2, 0.2), results.items()):
        ax.bar(classes + offset, [100 * r.metrics[f"acc_class_{c}"] for c in classes], width=0.4, label=label)
    if unseen is not None:
        ax.axvspan(unseen - 0.5, unseen + 0.5, color="grey", alpha=0.2, label="unseen class")
    ax.set(xticks=classes, xlabel="class", ylabel="test accuracy (%)", ylim=(0, 105))
    ax.legend(loc="lower right", fontsize=8)
    fig_proto = _prototype_figure(results["Proto-EVFL"], unseen, plt)
    return rows, fig_acc, fig_proto


def _prototype_figure(result, unseen, plt):
    """PCA of the fused test features `h` (coloured by true class) with the global prototypes `P` (stars, scaled to
    the features' mean norm)."""
    fused, labels = result.predictions["fused"], result.predictions["labels"]
    protos = result.predictions["global_prototypes"]
    unit = fused / np.linalg.norm(fused, axis=1, keepdims=True).clip(1e-12)
    mean = unit.mean(0)
    _, _, vt = np.linalg.svd(unit - mean, full_matrices=False)
    points, stars = (unit - mean) @ vt[:2].T, (protos - mean) @ vt[:2].T
    fig, ax = plt.subplots(figsize=(5, 4.2), constrained_layout=True)
    cmap = plt.get_cmap("tab10")
    for c in range(protos.shape[0]):
        ax.scatter(*points[labels == c].T, s=8, color=cmap(c), alpha=0.5)
        ax.scatter(*stars[c], marker="*", s=260 if c == unseen else 160, color=cmap(c), edgecolor="black")
        ax.annotate(str(c), stars[c], xytext=(4, 4), textcoords="offset points", fontweight="bold")
    title = "Proto-EVFL fused test features and global prototypes (PCA)"
    ax.set_title(title + (f"\nunseen class {unseen}: its prototype is projected from the parties'" if unseen is not
                          None else ""), fontsize=9)  # fmt: skip
    ax.set_xticks([])
    ax.set_yticks([])
    return fig


def reading(rows: list[list]) -> str:
    """One honest line on `compare`'s rows (`[metric, vanilla VFL, Proto-EVFL]`, in %): the differences, and that
    one seed is not the README's paired comparison."""
    parts = [f"{name} {pro - van:+.1f} points" for name, van, pro in rows]
    better = sum(pro > van for _, van, pro in rows)
    verdict = {0: "not better than", len(rows): "better than"}.get(better, "mixed against")
    return (f"**Reading:** on this seed Proto-EVFL is {verdict} vanilla VFL ({', '.join(parts)}); one seed and "
            "a few rounds on digits, so differences of a few points are within the README's seed spread.")


def build_demo():
    """The Gradio Blocks of the Proto-EVFL Space."""
    import gradio as gr

    def handler(imbalance_ratio, unseen_class, rounds, seed, progress=gr.Progress()):
        rows, per_class, prototypes = compare(imbalance_ratio, unseen_class, rounds, seed, progress=progress)
        return rows, reading(rows), per_class, prototypes

    handler.__name__ = "compare"
    run = readable_errors(handler)  # bad input: a readable message in the page, not a stack trace

    with gr.Blocks(title="Proto-EVFL: vertical FL with dual prototypes") as demo:
        gr.Markdown(
            "# Proto-EVFL — vertical federated learning with dual prototypes\n"
            "[arXiv 2507.22488](https://arxiv.org/abs/2507.22488) · hf_ext. Two parties hold the left and right "
            "halves of sklearn's digits: 10 aligned labelled samples per class and long-tailed unaligned pools "
            "whose dominant classes differ by party. Pick the imbalance ratio and a class that is never labelled, "
            "then train vanilla VFL and Proto-EVFL over the Flower protocol (in-process, a few seconds each)."
        )
        with gr.Row():
            ratio = gr.Slider(1, 100, value=50, step=1, label="imbalance ratio of the unaligned pools")
            unseen = gr.Dropdown([NO_UNSEEN] + [str(c) for c in range(10)], value="3", label="unseen class")
            rounds = gr.Slider(2, 80, value=30, step=1, label="rounds")
            seed = gr.Number(value=0, precision=0, label="seed")
        gr.Examples(examples=[[50, "3", 30, 0], [1, NO_UNSEEN, 30, 0], [100, "3", 30, 0]],
                    inputs=[ratio, unseen, rounds, seed],
                    label="examples: the default, balanced pools with every class seen, strong imbalance")
        button = gr.Button("Train vanilla VFL and Proto-EVFL", variant="primary")
        table = gr.Dataframe(headers=["test metric (%, ↑ higher is better)", "vanilla VFL", "Proto-EVFL"],
                             label="test metrics", elem_id="proto-evfl-metrics")
        verdict = gr.Markdown(elem_id="proto-evfl-reading")
        with gr.Row():
            per_class = gr.Plot(label="per-class test accuracy", elem_id="proto-evfl-per-class")
            prototypes = gr.Plot(label="prototypes in 2-D", elem_id="proto-evfl-prototypes")
        button.click(run, [ratio, unseen, rounds, seed], [table, verdict, per_class, prototypes],
                     api_name="compare")
    return demo


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py): imbalance ratio 50,
    class 3 never labelled, 10 rounds, press the button, then the metric table and both figures must show."""
    from playwright.sync_api import expect

    from hf_ext.core import browser as b

    b.set_slider(page, "imbalance ratio of the unaligned pools", 50)
    expect(page.get_by_label("unseen class", exact=True)).to_have_value("3")
    b.set_slider(page, "rounds", 10)
    b.set_number(page, "seed", 0)
    b.press(page, "Train vanilla VFL and Proto-EVFL")
    b.expect_cell(page, "proto-evfl-metrics", "accuracy")
    for metric in ("accuracy", "macro-F1", "unseen-class acc"):
        cells = b.row_cells(page, "proto-evfl-metrics", metric)
        assert len(cells) == 3 and all(0.0 <= float(v) <= 100.0 for v in cells[1:]), cells
    assert float(b.row_cells(page, "proto-evfl-metrics", "accuracy")[2]) > 20.0  # well above chance (10 %)
    b.expect_image(page, "proto-evfl-per-class")
    b.expect_image(page, "proto-evfl-prototypes")
    expect(page.locator("#proto-evfl-reading")).to_contain_text("Reading: on this seed Proto-EVFL is")


def browser_check_bad_input(page) -> None:
    """A negative seed typed into the seed box: the page says what a seed must be, not a stack trace."""
    from hf_ext.core import browser as b

    b.set_slider(page, "rounds", 10)
    b.set_number(page, "seed", -1)
    b.press(page, "Train vanilla VFL and Proto-EVFL")
    b.expect_readable_error(page, "seed must be 0 or a positive whole number, got -1")


__all__ = ["browser_check", "browser_check_bad_input", "build_demo", "compare", "reading"]
