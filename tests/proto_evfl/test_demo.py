"""The Space's logic: a short comparison returns the metric table and both figures; bad input is a readable
`gr.Error`."""

import gradio as gr
import pytest

from hf_ext.proto_evfl.demo import build_demo, compare


def test_compare_trains_both_models_and_draws_the_figures():
    rows, per_class, prototypes = compare(imbalance_ratio=20, unseen_class="5", rounds=3, seed=0)
    assert [r[0] for r in rows] == ["accuracy", "macro-F1", "unseen-class acc"]
    assert rows[2][1] == 0.0  # vanilla VFL on the unseen class
    bars = per_class.axes[0].containers
    assert [len(b) for b in bars] == [10, 10]  # per-class accuracy of both models
    assert len(prototypes.axes[0].texts) == 10  # one labelled star per global prototype


@pytest.mark.parametrize(
    "args, match",
    [((0.5, "3", 10, 0), "imbalance ratio must be between 1 and 100"), ((50, "12", 10, 0), "unseen class must be a "
     "digit 0-9"), ((50, "x", 10, 0), "unseen class must be a digit"), ((50, "none", 500, 0), "rounds must be")],
)  # fmt: skip
def test_bad_input_is_a_readable_error(args, match):
    with pytest.raises(ValueError, match=match):
        compare(*args)
    demo = build_demo()
    run = next(fn for fn in demo.fns.values() if fn.api_name == "compare").fn
    with pytest.raises(gr.Error, match=match):
        run(*args)
