"""Shared pieces of the methods' Gradio Spaces: readable errors, request caps and time limits, the linked model repo
and its offline fallback, and the launch settings every `spaces/<method>/app.py` uses.

A Space is self-contained: it reads nothing from `runs/` or `../shared`. Its model comes from the model repo its
README links (`models:` front matter, set by `hf-ext push --space-repo-id`), or from `$HF_EXT_MODEL_REPO` (a repo id
or a local artifact folder, e.g. `HF_EXT_MODEL_REPO=runs/orca/artifact hf-ext demo orca`). When that cannot be
loaded (offline, no repo yet) the demo builds a small model in code and says so on the page.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODEL_REPO_ENV = "HF_EXT_MODEL_REPO"
MAX_FILE_SIZE = "20mb"  # Gradio `launch(max_file_size=...)`: bigger uploads are refused before they reach a handler
MAX_FILE_BYTES = 20 * 2**20
MAX_ROWS = 100_000
MAX_COLUMNS = 2_000
REQUEST_SECONDS = 120.0  # per-request time limit (a visitor waits at most this long for an answer)

_requests = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="hf_ext_space")


class RequestTooLarge(ValueError):
    """An upload or a parameter is over the Space's cap (the message names the cap and how to stay under it)."""


def readable_errors(fn: Callable[..., Any], errors: tuple[type[Exception], ...] = (ValueError,)) -> Callable[..., Any]:
    """`fn` for a Gradio event: bad input (`errors`, by default `ValueError`) shows as a readable message in the
    page (`gr.Error`) instead of a stack trace. The signature is kept, so Gradio binds the inputs as to `fn`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except errors as err:
            import gradio as gr

            raise gr.Error(str(err)) from None

    return wrapper


def time_limited(fn: Callable[..., Any], seconds: float = REQUEST_SECONDS) -> Callable[..., Any]:
    """`fn` answering within `seconds`, else a readable `TimeoutError` message (shown with [`readable_errors`]).

    The call runs in a worker thread; one that overruns keeps its thread until it ends (Python cannot stop a
    thread), but the visitor gets the message at once and the next request is served. Gradio's `gr.Progress`
    argument is passed through (the request's context variables go with the call).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        # Gradio's request context (progress bar, event id) lives in context variables: carry them to the thread
        future = _requests.submit(contextvars.copy_context().run, fn, *args, **kwargs)
        try:
            return future.result(timeout=seconds)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(
                f"this request took longer than the Space's limit of {seconds:.0f} s; try a smaller input "
                "(fewer rows, columns or steps), or run it locally with `hf-ext demo`"
            ) from None

    return wrapper


def check_file(path: str | os.PathLike | None, max_bytes: int = MAX_FILE_BYTES, what: str = "the upload") -> None:
    """Raises [`RequestTooLarge`] when the uploaded file is bigger than `max_bytes`."""
    if path and os.path.getsize(path) > max_bytes:
        raise RequestTooLarge(
            f"{what} is {os.path.getsize(path) / 2**20:.1f} MiB; the Space accepts at most {max_bytes / 2**20:.0f} MiB"
        )


def check_csv_shape(path: str | os.PathLike, max_rows: int = MAX_ROWS, max_columns: int = MAX_COLUMNS) -> None:
    """Reads only the header line and counts lines, so a 10⁶-column or 10⁷-row CSV is refused before parsing."""
    with open(path, "rb") as f:
        header = f.readline(64 * 2**20)
        columns = header.count(b",") + 1 if header.strip() else 0
        if columns > max_columns:
            raise RequestTooLarge(f"the CSV has {columns} columns; the Space accepts at most {max_columns}")
        rows = sum(1 for _ in f)
    if rows > max_rows:
        raise RequestTooLarge(f"the CSV has {rows} data rows; the Space accepts at most {max_rows}")


def check_range(name: str, value: float, low: float, high: float) -> float:
    """`value` as a float when `low <= value <= high`, else a `ValueError` naming the field and the range."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}") from None
    if not low <= v <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return v


def _front_matter_models(readme: Path) -> list[str]:
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError:
        return []
    m = re.match(r"^---\n(.*?)\n---", text, flags=re.S)
    if not m:
        return []
    import yaml

    meta = yaml.safe_load(m.group(1)) or {}
    models = meta.get("models") or []
    return [models] if isinstance(models, str) else list(models)


def space_model_repo(method: str) -> str | None:
    """The model repo a Space loads: `$HF_EXT_MODEL_REPO`, else the first `models:` entry of the deployed Space's
    README (the working directory of a Space holds `app.py` and `README.md`), else that of `spaces/<method>/`."""
    repos = space_model_repos(method)
    return repos[0] if repos else None


def space_model_repos(method: str) -> list[str]:
    """Every model repo a Space links, in order (a method whose artifacts are separate repos, e.g. TBA's victim and
    noise generator): `$HF_EXT_MODEL_REPO` split at commas, else the `models:` list of the Space README (see
    [`space_model_repo`])."""
    if os.environ.get(MODEL_REPO_ENV):
        return [r.strip() for r in os.environ[MODEL_REPO_ENV].split(",") if r.strip()]
    candidates = []
    if Path("app.py").is_file():
        candidates.append(Path("README.md"))
    try:
        from .paths import asset

        candidates.append(asset("spaces", method, "README.md"))
    except Exception:  # noqa: BLE001 - no packaged Space template: nothing linked
        pass
    for readme in candidates:
        models = _front_matter_models(readme)
        if models:
            return [str(m) for m in models]
    return []


def load_linked(
    method: str, load: Callable[[str], Any], build_small: Callable[[], Any], small_note: str
) -> tuple[Any, str]:
    """`(model, note)`: `load(repo_id)` of the linked model repo, or `build_small()` with a visible note saying why.

    Args:
        method (`str`): the registered method (finds the Space README's `models:`).
        load (`Callable[[str], Any]`): loads from a repo id or local folder (`from_pretrained`).
        build_small (`Callable[[], Any]`): the small model built in code (no download).
        small_note (`str`): what is shown instead (e.g. "an untrained tiny ORCA built in code"), on the page.
    """
    repo = space_model_repo(method)
    if repo:
        try:
            return load(repo), f"model: `{repo}` (loaded with `from_pretrained`)"
        except Exception as err:  # noqa: BLE001 - offline, missing repo or files: fall back, and say so
            why = f"could not load the linked model repo `{repo}` ({type(err).__name__})"
    else:
        why = "no model repo is linked (set $HF_EXT_MODEL_REPO, or push with `hf-ext push --space-repo-id`)"
    return build_small(), f"**Note:** {why}; showing {small_note} instead."


def bar_figure(
    groups: list[str], series: dict[str, list[float]], ylabel: str, title: str | None = None, log: bool = False
):
    """A grouped bar chart (matplotlib, Agg backend) for a `gr.Plot`: one group of bars per entry of `groups`, one
    bar colour per key of `series` (each value lists one height per group)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if any(len(v) != len(groups) for v in series.values()):
        raise ValueError(f"every series needs one value per group ({len(groups)})")
    fig, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
    x = np.arange(len(groups))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width=width, label=name)
    ax.set(xticks=x, ylabel=ylabel)
    ax.set_xticklabels(groups)
    if log:
        ax.set_yscale("log")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def launch_kwargs() -> dict[str, Any]:
    """What every Space passes to `launch()`: the upload cap (Gradio refuses bigger files with a message)."""
    return {"max_file_size": MAX_FILE_SIZE}


def prepare(demo):
    """The Space's `Blocks`, queued (one request at a time per event, a bounded queue).

    Launch it with `launch(**launch_kwargs())`.
    """
    return demo.queue(default_concurrency_limit=1, max_size=16)
