"""MyMethod model. Self-contained (it travels to the Hub as remote code): imports only its configuration."""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_mymethod import MyMethodConfig


@dataclass
class MyMethodOutput(ModelOutput):
    """Output of [`MyMethodModel`]: `loss` (mean squared error, when `labels` are given) and `predictions`."""

    loss: torch.Tensor | None = None
    predictions: torch.Tensor | None = None


class MyMethodModel(PreTrainedModel):
    """A two-layer regressor: `predictions = W2 relu(W1 features)`.

    Args:
        config ([`MyMethodConfig`]): the model configuration.
    """

    config_class = MyMethodConfig
    base_model_prefix = "mymethod"
    main_input_name = "features"

    def __init__(self, config: MyMethodConfig):
        super().__init__(config)
        self.net = nn.Sequential(
            nn.Linear(config.num_features, config.hidden_size), nn.ReLU(), nn.Linear(config.hidden_size, 1)
        )
        self.post_init()

    def forward(self, features: torch.Tensor, labels: torch.Tensor | None = None, **kwargs) -> MyMethodOutput:
        if features.ndim != 2 or features.shape[-1] != self.config.num_features:
            raise ValueError(f"features must be [batch, {self.config.num_features}], got {tuple(features.shape)}")
        if not torch.isfinite(features).all():
            raise ValueError("features contain NaN or inf")
        predictions = self.net(features.to(self.dtype)).squeeze(-1)
        loss = None
        if labels is not None:
            loss = nn.functional.mse_loss(predictions, labels.to(predictions.dtype))
        return MyMethodOutput(loss=loss, predictions=predictions)
