"""Gradio Space for ORCA (arXiv 2508.16573), built on hf_ext: a thin shell over `hf_ext.orca.demo`."""

from hf_ext.orca.demo import build_demo

if __name__ == "__main__":
    build_demo().launch()
