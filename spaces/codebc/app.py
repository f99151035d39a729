"""Gradio Space for CodeBC (arXiv 2504.21043), built on hf_ext: a thin shell over `hf_ext.codebc.demo`."""

from hf_ext.codebc.demo import build_demo
from hf_ext.core.demo import launch_kwargs, prepare

if __name__ == "__main__":
    # queued, uploads capped (Gradio max_file_size), per-request limits in the handlers
    prepare(build_demo()).launch(**launch_kwargs())
