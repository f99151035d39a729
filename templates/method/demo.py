"""The MyMethod Space: type features, get a prediction (the Space's `app.py` re-exports [`build_demo`])."""

from __future__ import annotations


def predict(text: str) -> str:
    import torch

    from .configuration_mymethod import MyMethodConfig
    from .modeling_mymethod import MyMethodModel

    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        return "Enter numbers separated by commas."
    model = MyMethodModel(MyMethodConfig(num_features=len(values) or 1))
    with torch.no_grad():
        return f"{float(model(torch.tensor([values])).predictions[0]):.4f} (untrained model)"


def build_demo():
    import gradio as gr

    with gr.Blocks(title="MyMethod") as demo:
        gr.Markdown("# MyMethod\nType comma-separated features.")
        features = gr.Textbox(label="features", value="0.1, 0.2, 0.3")
        button = gr.Button("Predict")
        out = gr.Textbox(label="prediction")
        button.click(predict, features, out)
    return demo
