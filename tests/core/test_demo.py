"""`readable_errors`: the shared bad-input handling of the Spaces."""

import inspect

import gradio as gr
import pytest

from hf_ext.core.demo import readable_errors


def _compare(strength: float, seed: int = 0):
    if strength < 0:
        raise ValueError("strength must be >= 0, got -1")
    if seed < 0:
        raise RuntimeError("a real bug")
    return strength * 2


def test_value_error_becomes_gradio_error_and_signature_is_kept():
    run = readable_errors(_compare)
    assert run(1.5) == 3.0
    assert inspect.signature(run) == inspect.signature(_compare)  # Gradio binds inputs by this signature
    with pytest.raises(gr.Error, match="strength must be >= 0"):
        run(-1)
    with pytest.raises(RuntimeError):  # only bad input is softened; bugs keep their traceback
        run(1.0, seed=-1)
