"""Gradio Space for H2Tune (arXiv 2507.22633), built on hf_ext: a thin shell over `hf_ext.h2tune.demo`."""

from hf_ext.core.demo import launch_kwargs, prepare
from hf_ext.h2tune.demo import build_demo

if __name__ == "__main__":
    # queued, uploads capped (Gradio max_file_size), per-request limits in the handlers
    prepare(build_demo()).launch(**launch_kwargs())
