"""Gradio Space for TBA (arXiv 2504.17457), built on hf_ext: a thin shell over `hf_ext.tba.demo`."""

from hf_ext.tba.demo import build_demo

if __name__ == "__main__":
    build_demo().launch()
