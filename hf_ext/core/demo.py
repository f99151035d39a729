"""Shared pieces of the methods' Gradio Spaces."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


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
