"""EfficientNet-Lite as a Hugging Face vision tower: a small `PreTrainedModel` around `efficientnet_lite_pytorch`'s
network whose final feature map becomes TinyAlign's visual tokens. Self-contained (relative imports only), so it
travels with the TinyAlign modeling code as remote code;
the network itself needs `pip install efficientnet-lite-pytorch`.

The ImageNet weights are put in by `hf_ext.tinyalign.pretrained_parts.efficientnet_lite0_tower` (through
`hf_ext.core.pretrained.load_efficientnet_lite0`); `from_config` gives the same network with random weights.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPoolingAndNoAttention

from .configuration_tinyalign import TinyAlignEfficientNetConfig

EFFICIENTNET_LITE_PIP = "pip install efficientnet-lite-pytorch"


def _efficientnet_class():
    """The network class, imported on first use. Inside a `try` on purpose: transformers' remote-code import check
    skips `try` blocks, so a machine without the package gets this message with the pip name."""
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as err:
        raise ImportError(f"the EfficientNet-Lite vision tower needs {EFFICIENTNET_LITE_PIP}") from err
    return EfficientNet


class TinyAlignEfficientNetModel(PreTrainedModel):
    """EfficientNet-Lite without its classifier. `forward(pixel_values)` returns the final feature map
    `(B, hidden_size, S/32, S/32)` as `last_hidden_state` (and as the only entry of `hidden_states`) and its spatial
    mean as `pooler_output`. Inputs: RGB normalised with the ImageNet mean and std (see `TinyAlignImageProcessor`)."""

    config_class = TinyAlignEfficientNetConfig
    base_model_prefix = "efficientnet"
    main_input_name = "pixel_values"
    input_modalities = ("image",)
    _no_split_modules = []

    def __init__(self, config: TinyAlignEfficientNetConfig):
        super().__init__(config)
        net = _efficientnet_class().from_name(config.model_name, in_channels=config.num_channels)
        net._fc = nn.Identity()  # the classifier is never used: the tower hands over its feature map
        net._dropout = nn.Identity()
        self.net = net
        self.post_init()

    def _init_weights(self, module):
        # The package's own initialisation (set in its constructor) is kept: a random tower is only a test stand-in.
        return

    def forward(
        self, pixel_values: torch.Tensor, output_hidden_states: bool | None = None, return_dict=None, **kwargs
    ) -> BaseModelOutputWithPoolingAndNoAttention:
        if pixel_values.ndim != 4 or pixel_values.shape[1] != self.config.num_channels:
            raise ValueError(
                f"pixel_values must be (batch, {self.config.num_channels}, S, S), got {tuple(pixel_values.shape)}"
            )
        features = self.net.extract_features(pixel_values)
        return BaseModelOutputWithPoolingAndNoAttention(
            last_hidden_state=features, pooler_output=features.mean(dim=(2, 3)), hidden_states=(features,)
        )


AutoModel.register(TinyAlignEfficientNetConfig, TinyAlignEfficientNetModel, exist_ok=True)

__all__ = ["TinyAlignEfficientNetModel"]
