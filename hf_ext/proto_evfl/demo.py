"""The Proto-EVFL Space.

- **Published model** (the first tab): the federation of the model repo the Space README links (`models:`, or
  `$HF_EXT_MODEL_REPO`): the top model at the root and each party's encoder in `parties/party-<k>/`, loaded with
  `from_pretrained` ([`~hf_ext.proto_evfl.inference.load_federation`]). It scores its own held-out test digits (the
  split of the seed in the repo's training record): each party embeds its half of a digit, the top model
  classifies. When the repo cannot be loaded (offline, no repo yet, a top model without its parties) a short
  federation is trained here in code instead, and the page says so.
- **Train vanilla VFL vs Proto-EVFL here**: choose the unaligned pools' imbalance ratio and the class that is never
  labelled, train both for a few seconds (the Flower protocol, in-process), and compare their per-class test
  accuracy; the fused test features and the global prototypes are shown in 2-D.

Nothing is read from `runs/` or `../shared`: the digits are scikit-learn's bundled copy.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import numpy as np

from hf_ext.core.demo import load_linked, readable_errors, space_model_repo, time_limited

NO_UNSEEN = "none"
ALL_CLASSES = "all"
# The fallback when no model repo can be loaded: the run `hf-ext reproduce proto_evfl` publishes (zero-shot on
# digits, seed 0, so class 0 is never labelled), with fewer rounds.
SMALL_ROUNDS = 30
SMALL_NOTE = (
    f"a Proto-EVFL federation trained here in code (digits, zero-shot with class 0 never labelled, seed 0, "
    f"{SMALL_ROUNDS} rounds over the Flower protocol; once per Space process)"
)
PREDICTION_HEADERS = [
    "test entity (digits row)",
    "true digit",
    "predicted digit",
    "confidence (%, softmax)",
    "gate: left half, party 0 (%)",
    "gate: right half, party 1 (%)",
]


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


def compare(
    imbalance_ratio: float = 50.0, unseen_class: str | int | None = 3, rounds: int = 30, seed: int = 0, progress=None
):
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
    fig_acc = _per_class_figure({label: r.metrics for label, r in results.items()}, unseen, plt)
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
    return (
        f"**Reading:** on this seed Proto-EVFL is {verdict} vanilla VFL ({', '.join(parts)}); one seed and "
        "a few rounds on digits, so differences of a few points are within the README's seed spread."
    )


# ---- the published model ---------------------------------------------------------------------------------------


def _record_config(repo: str) -> dict | None:
    """The `config` of the repo's training record (which split the federation was trained on), or `None`."""
    from hf_ext.core.records import RECORD_FILE, load_training_record

    folder = Path(repo)
    if not folder.is_dir():
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        try:
            folder = Path(hf_hub_download(repo, RECORD_FILE)).parent
        except EntryNotFoundError:  # e.g. a `hf-ext train proto_evfl` artifact pushed with --allow-untrained
            return None
    return (load_training_record(folder) or {}).get("config")


def _load(repo: str):
    from .inference import load_federation

    top, parties = load_federation(repo)  # the top model and parties/party-<k>/, each with from_pretrained
    return top, parties, _record_config(repo)


@functools.lru_cache(maxsize=1)
def small_federation():
    """The fallback: `(top, parties, record config)` of a [`SMALL_ROUNDS`]-round federation trained here (cached
    for the process)."""
    from .reproduce import run_settings
    from .training import run_federation

    result = run_federation(run_settings("proto_evfl", "zero_shot", 0, 50.0, SMALL_ROUNDS))
    config = {"dataset": "digits", "setting": "zero_shot", "seed": 0, "imbalance_ratio": 50.0}
    return result.top_model.eval(), [p.eval() for p in result.party_models], config


def _data_config(top, parties, config: dict | None):
    """The vertical digits split the federation was trained on (its held-out test set is what the page scores);
    `ValueError` when this page cannot draw that split."""
    from .data import VerticalDataConfig, feature_widths
    from .reproduce import DATA_SCALE

    config = config or {}
    if config.get("dataset", "digits") != "digits":
        raise ValueError(f"it was trained on {config['dataset']}, and this Space holds only scikit-learn's digits")
    widths = [p.config.input_dim for p in parties]
    if len(parties) != 2 or widths != feature_widths("digits", 2):
        raise ValueError(
            f"its {len(parties)} parties take feature blocks of widths {widths}, not the two digits "
            f"halves' {feature_widths('digits', 2)}"
        )
    unseen = top.unseen_classes.tolist()
    scale = {k: v for k, v in DATA_SCALE["digits"].items() if k != "ratio"}
    return VerticalDataConfig(dataset="digits", unseen_class=unseen[0] if len(unseen) == 1 else None,
                              imbalance_ratio=float(config.get("imbalance_ratio", 50.0)),
                              seed=int(config.get("seed", 0)), **scale)  # fmt: skip


@functools.lru_cache(maxsize=4)
def _linked(repo: str | None):
    (top, parties, config), note = load_linked("proto_evfl", _load, small_federation, SMALL_NOTE)
    try:
        data = _data_config(top, parties, config)
    except ValueError as err:
        top, parties, config = small_federation()
        note = f"**Note:** the linked model repo `{repo}` loaded, but {err}; showing {SMALL_NOTE} instead."
        data = _data_config(top, parties, config)
    if config is None:
        note += (
            ". It has no training record, so the test split of seed 0 is used; it may hold entities the "
            "federation was trained on."
        )
    return top, parties, data, note


def linked_federation():
    """`(top, parties, data config, note)`: the linked repo's federation (cached per repo), or
    [`small_federation`] with a visible note saying why."""
    return _linked(space_model_repo("proto_evfl"))


def linked_reading(metrics: dict[str, float], unseen: int | None, shown: int, right: int) -> str:
    """One honest line on the published tab: the loaded federation's held-out accuracy, its never-labelled class
    against chance, and how many of the digits shown it gets right."""
    line = (
        f"**Reading:** this federation labels {100 * metrics['accuracy']:.1f} % of its held-out test "
        f"digits correctly (macro-F1 {100 * metrics['macro_f1']:.1f} %)"
    )
    if unseen is not None:
        line += f"; the never-labelled class {unseen}: {100 * metrics['unseen_accuracy']:.1f} % (chance 10 %)"
    return (
        line + f"; {right} of the {shown} digits shown are right. One federation and one seed: the README's "
        "paired comparison over seeds is the measurement to trust."
    )


def predict_linked(digit_class: str | int = ALL_CLASSES, count: int = 12, progress=None):
    """The published federation's predictions on its held-out test digits.

    Returns `(note, metric rows, prediction rows, digits figure, per-class figure, one-line reading)`: the metric
    rows are `[name, %]` over the whole test set, the prediction rows follow [`PREDICTION_HEADERS`] for the first
    `count` test digits of `digit_class` (`"all"` for any). Raises `ValueError` with a readable message on bad input.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .data import build_vertical_split
    from .inference import predict_entities
    from .metrics import classification_metrics

    try:
        count = int(count)
        wanted = None if digit_class in (None, "", ALL_CLASSES) else int(digit_class)
    except (TypeError, ValueError):
        raise ValueError(f"the class must be a digit 0-9 or {ALL_CLASSES!r}, got {digit_class!r}") from None
    if wanted is not None and not 0 <= wanted <= 9:
        raise ValueError(f"the class must be a digit 0-9, got {wanted}")
    if not 1 <= count <= 24:
        raise ValueError(f"digits shown must be between 1 and 24, got {count}")
    step = progress if progress is not None else (lambda *a, **k: None)
    step(0.05, desc="loading the linked federation (the first request may train the in-code fallback)")
    top, parties, data, note = linked_federation()
    step(0.7, desc="each party embeds its half of the test digits; the top model classifies")
    split = build_vertical_split(data)
    labels = split.labels().test_labels
    out = predict_entities(top, parties, [split.party(k).test_features for k in range(len(parties))])
    metrics = classification_metrics(labels, out["predictions"], top.config.num_classes, data.unseen_class)
    rows = [["accuracy", round(100 * metrics["accuracy"], 1)], ["macro-F1", round(100 * metrics["macro_f1"], 1)]]
    if data.unseen_class is not None:
        rows.append([f"unseen-class acc (class {data.unseen_class})", round(100 * metrics["unseen_accuracy"], 1)])
    picked = np.flatnonzero(labels == wanted if wanted is not None else np.ones_like(labels, dtype=bool))[:count]
    predictions = [[int(split.test_ids[i]), int(labels[i]), int(out["predictions"][i]),
                    round(100 * float(out["probabilities"][i].max()), 1)]
                   + [round(100 * float(g), 1) for g in out["gate"][i]] for i in picked]  # fmt: skip
    right = sum(r[1] == r[2] for r in predictions)
    return (
        note,
        rows,
        predictions,
        _digits_figure(split.features[split.test_ids[picked]], predictions, plt),
        _per_class_figure({"this model": metrics}, data.unseen_class, plt),
        linked_reading(metrics, data.unseen_class, len(predictions), right),
    )


def _digits_figure(images: np.ndarray, predictions: list[list], plt):
    """The digits shown (the left half is party 0's block, the right half party 1's), titled true → predicted."""
    cols = min(len(predictions), 6)
    rows = -(-len(predictions) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(max(1.3 * cols, 5.5), 1.5 * rows + 0.4), constrained_layout=True, squeeze=False
    )
    for ax in axes.flat:
        ax.axis("off")
    for ax, image, (_, true, pred, *_) in zip(axes.flat, images, predictions):
        ax.imshow(image.reshape(8, 8), cmap="gray_r")
        ax.axvline(3.5, color="tab:orange", lw=0.8)  # where party 0's columns end
        ax.set_title(f"{true} → {pred}", fontsize=9, color="black" if true == pred else "tab:red")
    fig.suptitle(
        "true → predicted (red: wrong); left of the orange line party 0's columns, right party 1's", fontsize=9
    )
    return fig


def _per_class_figure(metrics: dict[str, dict[str, float]], unseen: int | None, plt):
    """Per-class test accuracy bars, one colour per model, the never-labelled class shaded."""
    classes = np.arange(10)
    fig, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
    width = 0.8 / len(metrics)
    for i, (label, m) in enumerate(metrics.items()):
        offset = (i - (len(metrics) - 1) / 2) * width
        ax.bar(classes + offset, [100 * m[f"acc_class_{c}"] for c in classes], width=width, label=label)
    if unseen is not None:
        ax.axvspan(unseen - 0.5, unseen + 0.5, color="grey", alpha=0.2, label="unseen class")
    ax.set(xticks=classes, xlabel="class", ylabel="test accuracy (%)", ylim=(0, 105))
    ax.legend(loc="lower right", fontsize=8)
    return fig


def build_demo():
    """The Gradio Blocks of the Proto-EVFL Space: the published federation's tab first, then the live comparison."""
    import gradio as gr

    def handler(imbalance_ratio, unseen_class, rounds, seed, progress=gr.Progress()):
        rows, per_class, prototypes = compare(imbalance_ratio, unseen_class, rounds, seed, progress=progress)
        return rows, reading(rows), per_class, prototypes

    def linked_handler(digit_class, count, progress=gr.Progress()):
        return predict_linked(digit_class, count, progress=progress)

    handler.__name__ = "compare"
    run = readable_errors(handler)  # bad input: a readable message in the page, not a stack trace
    run_linked = readable_errors(time_limited(linked_handler), errors=(ValueError, TimeoutError))
    repo = space_model_repo("proto_evfl")

    with gr.Blocks(title="Proto-EVFL: vertical FL with dual prototypes") as demo:
        gr.Markdown(
            "# Proto-EVFL — vertical federated learning with dual prototypes\n"
            "[arXiv 2507.22488](https://arxiv.org/abs/2507.22488) · hf_ext. Two parties hold the left and right "
            "halves of sklearn's digits: 10 aligned labelled samples per class and long-tailed unaligned pools "
            "whose dominant classes differ by party; in the zero-shot setting one class is never labelled."
        )
        with gr.Tab("Published model"):
            gr.Markdown(
                f"Linked model repo: {f'`{repo}`' if repo else 'none'} (the top model and both parties' encoders, "
                "loaded with `from_pretrained`; without it a short federation is trained here in code, and the note "
                "below says so). Each party embeds its half of a held-out test digit, the top model classifies."
            )
            with gr.Row():
                digit_class = gr.Dropdown(
                    [ALL_CLASSES] + [str(c) for c in range(10)],
                    value=ALL_CLASSES,
                    label="class of the test digits shown",
                )
                count = gr.Slider(1, 24, value=12, step=1, label="digits shown")
            gr.Examples(examples=[[ALL_CLASSES, 12], ["0", 12], ["3", 6]], inputs=[digit_class, count],
                        label="examples: any class, class 0 (never labelled in the published zero-shot run), "
                              "class 3")  # fmt: skip
            l_button = gr.Button("Predict with the published model", variant="primary")
            l_note = gr.Markdown(elem_id="proto-evfl-model-source")
            l_table = gr.Dataframe(
                headers=["test metric (%, ↑ higher is better)", "this model (see the note)"],
                label="test metrics (all held-out test digits)",
                elem_id="proto-evfl-linked-metrics",
            )
            l_verdict = gr.Markdown(elem_id="proto-evfl-linked-reading")
            l_predictions = gr.Dataframe(
                headers=PREDICTION_HEADERS, label="predictions on the digits shown", elem_id="proto-evfl-predictions"
            )
            with gr.Row():
                # the figure's own title says what it shows; Gradio's label box would cover the first digits
                l_digits = gr.Plot(
                    label="digits shown: true → predicted", show_label=False, elem_id="proto-evfl-digits"
                )
                l_per_class = gr.Plot(label="per-class test accuracy", elem_id="proto-evfl-linked-per-class")
            l_button.click(
                run_linked,
                [digit_class, count],
                [l_note, l_table, l_predictions, l_digits, l_per_class, l_verdict],
                api_name="predict",
            )
        with gr.Tab("Train vanilla VFL vs Proto-EVFL here"):
            gr.Markdown(
                "Pick the imbalance ratio and a class that is never labelled, then train vanilla VFL and "
                "Proto-EVFL over the Flower protocol (in-process, a few seconds each)."
            )
            with gr.Row():
                ratio = gr.Slider(1, 100, value=50, step=1, label="imbalance ratio of the unaligned pools")
                unseen = gr.Dropdown([NO_UNSEEN] + [str(c) for c in range(10)], value="3", label="unseen class")
                rounds = gr.Slider(2, 80, value=30, step=1, label="rounds")
                seed = gr.Number(value=0, precision=0, label="seed")
            gr.Examples(
                examples=[[50, "3", 30, 0], [1, NO_UNSEEN, 30, 0], [100, "3", 30, 0]],
                inputs=[ratio, unseen, rounds, seed],
                label="examples: the default, balanced pools with every class seen, strong imbalance",
            )
            button = gr.Button("Train vanilla VFL and Proto-EVFL", variant="primary")
            table = gr.Dataframe(
                headers=["test metric (%, ↑ higher is better)", "vanilla VFL", "Proto-EVFL"],
                label="test metrics",
                elem_id="proto-evfl-metrics",
            )
            verdict = gr.Markdown(elem_id="proto-evfl-reading")
            with gr.Row():
                per_class = gr.Plot(label="per-class test accuracy", elem_id="proto-evfl-per-class")
                prototypes = gr.Plot(label="prototypes in 2-D", elem_id="proto-evfl-prototypes")
            button.click(
                run, [ratio, unseen, rounds, seed], [table, verdict, per_class, prototypes], api_name="compare"
            )
    return demo


__all__ = [
    "build_demo",
    "compare",
    "linked_federation",
    "predict_linked",
    "reading",
    "small_federation",
]
