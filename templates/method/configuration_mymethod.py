"""MyMethod configuration (pure typed data, checked at construction and on load)."""

from transformers import PretrainedConfig


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"MyMethodConfig.{name} must be a positive integer, got {value!r}")
    return value


class MyMethodConfig(PretrainedConfig):
    """Configuration of [`MyMethodModel`].

    Args:
        num_features (`int`, *optional*, defaults to 8): width of the input feature vector.
        hidden_size (`int`, *optional*, defaults to 16): width of the hidden layer.
    """

    model_type = "hf_ext_mymethod"

    def __init__(self, num_features: int = 8, hidden_size: int = 16, **kwargs):
        self.num_features = _positive_int("num_features", num_features)
        self.hidden_size = _positive_int("hidden_size", hidden_size)
        super().__init__(**kwargs)
