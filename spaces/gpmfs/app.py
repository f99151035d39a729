"""Gradio Space for GPMFS (arXiv 2504.12740), built on hf_ext: a thin shell over `hf_ext.gpmfs.demo`."""

from hf_ext.gpmfs.demo import build_demo

if __name__ == "__main__":
    build_demo().launch()
