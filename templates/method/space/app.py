"""Gradio Space for MyMethod, built on hf_ext: a thin shell over `mymethod.demo`."""

from mymethod.demo import build_demo

from hf_ext.core.demo import launch_kwargs, prepare

if __name__ == "__main__":
    prepare(build_demo()).launch(**launch_kwargs())
