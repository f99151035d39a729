"""Gradio Space for stringy Tr(φ³) and superstring amplitudes (arXiv 2504.21676), built on hf_ext: a thin shell
over `hf_ext.amplitudes.demo`."""

from hf_ext.amplitudes.demo import build_demo

if __name__ == "__main__":
    build_demo().launch()
