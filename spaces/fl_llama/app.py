"""Gradio Space for FL-LLaMA (arXiv 2505.15683), built on hf_ext: a thin shell over `hf_ext.fl_llama.demo`."""

from hf_ext.fl_llama.demo import build_demo

if __name__ == "__main__":
    build_demo().launch()
