"""Gradio Space for TinyAlign (arXiv 2505.12884), built on hf_ext: a thin shell over `hf_ext.tinyalign.demo`."""

from hf_ext.tinyalign.demo import build_demo

if __name__ == "__main__":
    build_demo().launch()
