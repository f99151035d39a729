"""Gradio Space for TBA (arXiv 2504.17457), built on hf_ext: a thin shell over `hf_ext.tba.demo`."""

from hf_ext.core.demo import launch_kwargs, prepare
from hf_ext.tba.demo import build_demo

if __name__ == "__main__":
    # queued, uploads capped (Gradio max_file_size), per-request limits in the handlers
    prepare(build_demo()).launch(**launch_kwargs())
