"""Progress bars for the long commands (`hf-ext reproduce ...`): a thin `tqdm` wrapper that stays silent where a bar
would only add noise.

A bar is shown on stderr unless one of these holds:

- the command runs with `--quiet` (its `main` calls [`set_quiet`], or the caller passes `quiet=True`);
- `HF_EXT_QUIET` is set to anything but `""`, `"0"` or `"false"`;
- `CI` is set to anything but `""`, `"0"` or `"false"` (CI logs keep only the printed results);
- the stream the bar draws on is not a terminal (a redirected log gets no carriage-return noise).

A `Trainer`'s own step bar follows the same rules through [`trainer_progress`] (off in parallel worker processes,
whose bars would overwrite each other and the parent's bar over the runs).

`HF_EXT_PROGRESS=1` forces the bar on whatever the stream (for a log that should keep it); `--quiet`,
`HF_EXT_QUIET` and `CI` still win. Bars never touch stdout, so the printed results are the same with and without
them.

Example:

```python
from hf_ext.core.progress import progress

for name in progress(["yeast", "flare"], desc="data sets"):
    ...
```
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterable
from contextvars import ContextVar
from typing import IO, Any

from tqdm.auto import tqdm

_QUIET: ContextVar[bool] = ContextVar("hf_ext_progress_quiet", default=False)
_OFF = ("", "0", "false", "no")


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in _OFF


def set_quiet(quiet: bool) -> None:
    """Silences (`True`) or restores (`False`) every bar of this context: a command's `--quiet` flag calls it once
    at the start of its `main`, so the bars inside its helpers follow without a `quiet` argument each."""
    if not isinstance(quiet, bool):
        raise TypeError(f"quiet must be True or False, got {quiet!r}")
    _QUIET.set(quiet)


def progress_enabled(quiet: bool | None = None, file: IO[str] | None = None) -> bool:
    """Whether a bar would be drawn: not `quiet` (default: the context's [`set_quiet`] value), `HF_EXT_QUIET` and
    `CI` unset, and `file` (default stderr) a terminal or `HF_EXT_PROGRESS` set."""
    if quiet is None:
        quiet = _QUIET.get()
    if quiet or _env_on("HF_EXT_QUIET") or _env_on("CI"):
        return False
    if _env_on("HF_EXT_PROGRESS"):
        return True
    stream = file if file is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def progress(
    iterable: Iterable | None = None,
    desc: str | None = None,
    total: int | None = None,
    *,
    quiet: bool | None = None,
    file: IO[str] | None = None,
    **kwargs: Any,
) -> tqdm:
    """A `tqdm` bar over `iterable` (or a manual one with `total` and `.update()`), disabled by the rules of the
    module docstring. Extra keyword arguments go to `tqdm` (`unit`, `leave`, `position` ...).

    Args:
        iterable (`Iterable`, *optional*): what to iterate over; `None` for a manual bar.
        desc (`str`, *optional*): the bar's label.
        total (`int`, *optional*): the number of steps, when `iterable` has no `len()`.
        quiet (`bool`, *optional*): `True` silences this bar; default: the context's [`set_quiet`] value.
        file (text stream, *optional*): where to draw (default stderr).
    """
    stream = file if file is not None else sys.stderr
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, desc=desc, total=total, file=stream, disable=not progress_enabled(quiet, stream), **kwargs)


def trainer_progress(trainer: Any, quiet: bool | None = None) -> None:
    """Gives a `transformers.Trainer` the step bar of `ProgressCallback` (on stderr) when [`progress_enabled`] and
    this is not a worker process, else no bar; in both cases without the per-log dict lines that `ProgressCallback`
    and `PrinterCallback` write to stdout, so what a command prints stays the same. Build the `Trainer` with
    `disable_tqdm=True` (it changes nothing else) and call this once before `train()`."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if progress_enabled(quiet) and multiprocessing.parent_process() is None:
        trainer.add_callback(_step_bar_class()())


def _step_bar_class():
    # built on first use, so that importing this module does not import transformers
    from transformers.trainer_callback import ProgressCallback

    class StepBar(ProgressCallback):
        """`ProgressCallback` without its `on_log` lines (they go to stdout, between a command's results)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            return None

    return StepBar
