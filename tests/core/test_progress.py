"""`hf_ext.core.progress`: a bar on a terminal, nothing under `--quiet`, `HF_EXT_QUIET`, `CI` or a redirected
stream, and the iterated values are the same either way."""

from __future__ import annotations

import io

import pytest

from hf_ext.core import progress as progress_module
from hf_ext.core.progress import progress, progress_enabled, set_quiet


class FakeTerminal(io.StringIO):
    """A captured stream that says it is a terminal (what a user's shell gives the bar)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("CI", "HF_EXT_QUIET", "HF_EXT_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    token = progress_module._QUIET.set(False)
    yield
    progress_module._QUIET.reset(token)


def _run(**kwargs) -> tuple[list[int], str]:
    stream = kwargs.pop("file", None) or FakeTerminal()
    seen = list(progress(range(5), desc="runs", file=stream, **kwargs))
    return seen, stream.getvalue()


def test_bar_on_a_terminal():
    seen, shown = _run()
    assert seen == [0, 1, 2, 3, 4]
    assert "runs" in shown and "5/5" in shown and "100%" in shown


@pytest.mark.parametrize("var", ["CI", "HF_EXT_QUIET"])
def test_silent_under_ci_and_quiet_env(monkeypatch, var):
    monkeypatch.setenv(var, "true")
    seen, shown = _run()
    assert seen == [0, 1, 2, 3, 4] and shown == ""


@pytest.mark.parametrize("value", ["", "0", "false"])
def test_ci_set_to_false_keeps_the_bar(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    assert "5/5" in _run()[1]


def test_silent_with_quiet_argument_and_set_quiet():
    assert _run(quiet=True) == ([0, 1, 2, 3, 4], "")
    set_quiet(True)
    assert _run()[1] == ""
    assert "5/5" in _run(quiet=False)[1]  # an explicit argument wins over the context
    set_quiet(False)
    assert "5/5" in _run()[1]


def test_silent_when_the_stream_is_not_a_terminal(monkeypatch):
    assert _run(file=io.StringIO())[1] == ""
    monkeypatch.setenv("HF_EXT_PROGRESS", "1")  # forced on for a log
    assert "5/5" in _run(file=io.StringIO())[1]
    monkeypatch.setenv("CI", "1")  # CI still wins
    assert _run(file=io.StringIO())[1] == ""


def test_default_stream_is_stderr(capsys, monkeypatch):
    monkeypatch.setenv("HF_EXT_PROGRESS", "1")
    list(progress(range(3), desc="stages"))
    captured = capsys.readouterr()
    assert captured.out == "" and "3/3" in captured.err
    monkeypatch.setenv("CI", "1")
    list(progress(range(3), desc="stages"))
    assert capsys.readouterr().err == ""


def test_manual_bar_and_bad_quiet():
    stream = FakeTerminal()
    with progress(total=4, desc="steps", file=stream) as bar:
        bar.update(4)
    assert "4/4" in stream.getvalue()
    assert progress_enabled(file=FakeTerminal()) and not progress_enabled(file=io.StringIO())
    with pytest.raises(TypeError, match="quiet"):
        set_quiet("yes")


class FakeTrainer:
    """Records the callbacks `trainer_progress` leaves on a Trainer (as `Trainer.add/remove_callback` do)."""

    def __init__(self):
        from transformers.trainer_callback import PrinterCallback

        self.callbacks = [PrinterCallback()]

    def remove_callback(self, cls):
        self.callbacks = [c for c in self.callbacks if not isinstance(c, cls)]

    def add_callback(self, callback):
        self.callbacks.append(callback)


def test_trainer_step_bar_without_log_lines(monkeypatch, capsys):
    from types import SimpleNamespace

    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from hf_ext.core.progress import trainer_progress

    monkeypatch.setenv("HF_EXT_PROGRESS", "1")
    trainer = FakeTrainer()
    trainer_progress(trainer)
    (bar,) = trainer.callbacks
    assert isinstance(bar, ProgressCallback) and not isinstance(bar, PrinterCallback)
    state = SimpleNamespace(is_world_process_zero=True, is_local_process_zero=True, max_steps=3, global_step=0)
    bar.on_train_begin(None, state, None)
    for step in range(1, 4):
        state.global_step = step
        bar.on_step_end(None, state, None)
    bar.on_log(None, state, None, logs={"train_runtime": 1.0})  # stdout keeps only the command's own lines
    bar.on_train_end(None, state, None)
    captured = capsys.readouterr()
    assert captured.out == "" and "3/3" in captured.err
    monkeypatch.setenv("CI", "1")
    trainer = FakeTrainer()
    trainer_progress(trainer)
    assert trainer.callbacks == []
