"""Gradio Space for CodeBC (arXiv 2504.21043), built on hf_ext: a thin shell over `hf_ext.codebc.demo`."""

from hf_ext.codebc.demo import build_demo

if __name__ == "__main__":
    build_demo().launch()
