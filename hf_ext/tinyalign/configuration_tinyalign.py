"""Configuration of TinyAlign (arXiv 2505.12884): a vision encoder, a causal LM, the `mlp2x_gelu` connector, the
memory-retrieval branch (query pooling, top-k, value connector) and the frozen random Perceiver that writes values."""

from __future__ import annotations

import math
from typing import Literal

from transformers import AutoConfig, PreTrainedConfig
from transformers.configuration_utils import SubConfigSpec


class TinyAlignEfficientNetConfig(PreTrainedConfig):
    r"""Configuration of [`TinyAlignEfficientNetModel`]: an EfficientNet-Lite vision tower whose last feature map
    (`(B, hidden_size, S/32, S/32)`) gives the visual tokens. Registered with `AutoConfig` under its `model_type` when
    this module is imported, so a saved TinyAlign artifact with this sub-config loads in a fresh process.

    Args:
        model_name (`str`): the EfficientNet-Lite variant of `efficientnet_lite_pytorch` (`"efficientnet-lite0"`).
        num_channels (`int`): input channels (3, RGB).
        image_size (`int`): input height and width (a multiple of 32).
        hidden_size (`int`): channels of the final feature map (1280 for every Lite variant).
    """

    model_type = "hf_ext_efficientnet_lite"

    model_name: str = "efficientnet-lite0"
    num_channels: int = 3
    image_size: int = 64
    hidden_size: int = 1280

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        check_fields(self, {"model_name": "str", "num_channels": ("int", 1), "image_size": ("int", 32),
                            "hidden_size": ("int", 1)})  # fmt: skip
        if not str(self.model_name).startswith("efficientnet-lite"):
            raise ValueError(f"model_name must be an EfficientNet-Lite variant, got {self.model_name!r}")
        if self.image_size < 32 or self.image_size % 32:
            raise ValueError(f"image_size must be a positive multiple of 32, got {self.image_size}")


def check_fields(config, spec: dict) -> None:
    """Types and ranges of `config`'s fields, naming the field: `spec` maps a name to `"bool"`, `"str"`,
    `"str?"` (a string or `None`), `("int", low)` (an int >= low, bools refused) or `("float", low, high)` (a finite
    number in [low, high]). Runs at construction and on load (`from_pretrained` / `from_dict` build the config
    through the same `__post_init__`). Kept in this file: the configuration travels as remote code without
    hf_ext."""
    name = type(config).__name__
    for field, kind in spec.items():
        value = getattr(config, field)
        if kind == "bool":
            ok, want = isinstance(value, bool), "a bool (true / false)"
        elif kind in ("str", "str?"):
            ok = isinstance(value, str) or (kind == "str?" and value is None)
            want = "a string" + (" or None" if kind == "str?" else "")
        elif kind[0] == "int":
            ok = not isinstance(value, bool) and isinstance(value, int) and value >= kind[1]
            want = f"an integer >= {kind[1]}"
        else:
            low, high = kind[1], kind[2]
            ok = (
                not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
                and low <= value <= high
            )  # fmt: skip
            want = f"a finite number in [{low:g}, {high:g}]"
        if not ok:
            raise ValueError(f"{name}.{field} must be {want}, got {value!r}")


# Sub-configs are resolved through AutoConfig by model_type: register this one on import (the remote-code copy of
# this file registers it too), or a fresh process fails with "Unrecognized model type for subconfig".
AutoConfig.register(TinyAlignEfficientNetConfig.model_type, TinyAlignEfficientNetConfig, exist_ok=True)


class TinyAlignConfig(PreTrainedConfig):
    r"""Configuration for [`TinyAlignForConditionalGeneration`].

    Composes any Hugging Face vision encoder (`vision_config`, loaded with `AutoModel.from_config`) and any causal LM
    (`text_config`, loaded with `AutoModelForCausalLM.from_config`), as in TinyLLaVA Factory, plus TinyAlign's memory
    branch. Paper: [TinyAlign](https://arxiv.org/abs/2505.12884).

    Args:
        vision_config (`dict` or `PreTrainedConfig`): the vision encoder; default a one-stage ConvNeXt for 8×8 digits
            (stride-2 stem, so 4×4 = 16 visual tokens).
        text_config (`dict` or `PreTrainedConfig`): the causal LM; default a 1-block Llama with width 64.
        image_size (`int`): expected height and width of `pixel_values` (checked on every forward).
        num_channels (`int`): expected channels of `pixel_values`.
        vision_feature_layer (`int`): which hidden state of the vision encoder feeds the connector. Default −1 (the
            last, the stage output; the paper's SigLIP uses −2): the toy ConvNeXt has one stage, whose only other
            hidden state is the stem output, which has seen no convolution block.
        vision_feature_select_strategy (`str`): `"default"` drops the CLS token of token-sequence encoders (ViT-like),
            `"full"` keeps every token. Ignored for convolutional encoders (feature maps have no CLS).
        num_image_tokens (`int`): visual tokens per image produced by the encoder (validated at run time).
        connector_type (`str`): only `"mlp2x_gelu"` (Linear → GELU → Linear), the connector of the paper's scripts.
        use_retrieval (`bool`): `False` gives the baseline (connector only, no memory tokens).
        memory_top_k (`int`): neighbours retrieved per image; their values go along the token axis
            (`k·num_latents` tokens). Default 4 (the paper's scripts use 10): with 16 visual tokens and 32 latents
            per value, k = 10 would put 320 memory tokens in front of an ~8-token caption in these tiny LMs.
        alpha (`float`): weight of the visual tokens in the fused key/query (`1−alpha` for the text tokens), 0.4.
        query_includes_answer (`bool`): **ablation only**, the released code's behaviour: the training query pools
            the answer tokens too (leakage). Training-mode forwards only; eval mode (evaluation, generation) always
            uses the honest query, as the released code does at inference. Default `False` (honest: image +
            prompt tokens only).
        query_prompt_length (`int`): prompt tokens right after the last image/memory placeholder; the honest query
            pools the tokens up to there and nothing later, by position, so it needs no `labels` (7 = the words of
            `processing_tinyalign.PROMPT`; `TinyAlignProcessor` checks it).
        value_num_latents (`int`), value_latent_dim (`int`): shape of one memory value (Perceiver latents, 32×96).
        value_d_model (`int`), value_num_self_attends (`int`), value_num_heads (`int`), value_text_length (`int`):
            the frozen random Perceiver that writes values (image conv1x1 + trainable positions, byte text). Its image
            branch uses `value_d_model // 2` = 64 conv channels + 64 position channels (the paper: 256 + 256): the
            weights are random and never trained (as released), and 8×8 images have 64 pixels; chosen for CPU cost.
        image_token_id (`int`), rag_token_id (`int`): placeholder ids in `input_ids` (expanded: one per token). They
            never reach the LM's embedding table, so they may lie past the LM vocabulary (a pretrained LM's
            tokenizer gets `<image>` / `<rag>` added after its own tokens without resizing the embeddings).
        memory_token_norm (`bool`): rescale every memory token to a learned norm (`memory_scale`, initialised to the
            LM's mean token-embedding norm by [`~TinyAlignForConditionalGeneration.calibrate_memory_scale`]), so the
            memory tokens neither vanish next to the text nor swamp it: straight out of connector2 they sit at
            about 1/25 of SmolLM2's embedding norm. `False` is the released code (connector2 output as is).
        vision_model_name_or_path (`str`, *optional*), text_model_name_or_path (`str`, *optional*): where the frozen
            vision encoder / LM come from (a Hub repo id or a local folder, `base_model`-style). When set,
            `save_pretrained` leaves that part out of `model.safetensors` (the artifact holds the trained connectors,
            the value Perceiver, the bank and the processor only) and `from_pretrained` loads it from there.

    The keys and the queries go through `retrieval_connector`, a frozen copy of the connector taken when the bank is
    built (`build_memory_bank`); `hf-ext reproduce tinyalign` builds the bank right after model creation, so that copy
    is the untrained, randomly initialised connector.
    """

    model_type = "hf_ext_tinyalign"
    sub_configs_defaults = {
        "vision_config": SubConfigSpec(
            config_class=AutoConfig,
            model_type="convnext",
            init_kwargs={
                "num_channels": 1,
                "patch_size": 2,
                "num_stages": 1,
                "hidden_sizes": [64],
                "depths": [2],
                "image_size": 8,
            },
        ),
        "text_config": SubConfigSpec(
            config_class=AutoConfig,
            model_type="llama",
            init_kwargs={
                "vocab_size": 64,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "max_position_embeddings": 512,
            },
        ),
    }

    vision_config: dict | PreTrainedConfig | None = None
    text_config: dict | PreTrainedConfig | None = None
    image_size: int = 8
    num_channels: int = 1
    vision_feature_layer: int = -1
    vision_feature_select_strategy: Literal["default", "full"] = "default"
    num_image_tokens: int = 16
    connector_type: str = "mlp2x_gelu"
    use_retrieval: bool = True
    memory_top_k: int = 4
    alpha: float = 0.4
    query_includes_answer: bool = False
    query_prompt_length: int = 7
    value_num_latents: int = 32
    value_latent_dim: int = 96
    value_d_model: int = 128
    value_num_self_attends: int = 8
    value_num_heads: int = 8
    value_text_length: int = 64
    image_token_id: int = 4
    rag_token_id: int = 5
    memory_token_norm: bool = True
    vision_model_name_or_path: str | None = None
    text_model_name_or_path: str | None = None
    tie_word_embeddings: bool = False

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        check_fields(self, _TINYALIGN_FIELDS)
        for name in (
            "image_size",
            "num_channels",
            "num_image_tokens",
            "value_num_latents",
            "value_latent_dim",
            "value_num_self_attends",
            "value_num_heads",
            "value_text_length",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TinyAlignConfig.{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.value_d_model, int) or self.value_d_model < 2 or self.value_d_model % 2:
            raise ValueError(
                f"TinyAlignConfig.value_d_model must be an even integer >= 2 (half conv channels, half "
                f"positions), got {self.value_d_model!r}"
            )
        if self.value_latent_dim % self.value_num_heads:
            raise ValueError(
                f"TinyAlignConfig.value_latent_dim={self.value_latent_dim} must be divisible by "
                f"value_num_heads={self.value_num_heads}"
            )
        if self.connector_type != "mlp2x_gelu":
            raise ValueError(f"connector_type must be 'mlp2x_gelu', got {self.connector_type!r}")
        if not 0.0 <= self.alpha <= 1.0:  # also refuses NaN
            raise ValueError(f"alpha must lie in [0, 1], got {self.alpha}")
        if self.memory_top_k < 1:
            raise ValueError(f"memory_top_k must be >= 1, got {self.memory_top_k}")
        if self.query_prompt_length < 0:
            raise ValueError(f"query_prompt_length must be >= 0, got {self.query_prompt_length}")
        if self.vision_feature_select_strategy not in ("default", "full"):
            raise ValueError(
                f"vision_feature_select_strategy must be 'default' or 'full', "
                f"got {self.vision_feature_select_strategy!r}"
            )
        if self.image_token_id == self.rag_token_id:
            raise ValueError("image_token_id and rag_token_id must differ")
        for name in ("image_token_id", "rag_token_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"{name}={value!r} must be an integer >= 0 (placeholder ids may lie past the LM "
                    f"vocabulary, vocab_size={self.text_config.vocab_size}, but not below 0)"
                )

    @property
    def hidden_size(self) -> int:
        """Width of the LM embeddings: the connector output width and the memory key width."""
        return self.text_config.hidden_size

    @property
    def num_memory_tokens(self) -> int:
        """Extra tokens placed after the image tokens: `memory_top_k · value_num_latents` (0 for the baseline)."""
        return self.memory_top_k * self.value_num_latents if self.use_retrieval else 0


_TINYALIGN_FIELDS = {
    **{name: ("int", 1) for name in ("image_size", "num_channels", "num_image_tokens", "memory_top_k",
                                     "value_num_latents", "value_latent_dim", "value_d_model",
                                     "value_num_self_attends", "value_num_heads", "value_text_length")},
    "vision_feature_layer": ("int", -(2**31)),
    "query_prompt_length": ("int", 0),
    "image_token_id": ("int", -(2**31)),  # the range (>= 0) is checked below, with the vocabulary in the message
    "rag_token_id": ("int", -(2**31)),
    "alpha": ("float", 0.0, 1.0),
    **{name: "bool" for name in ("use_retrieval", "query_includes_answer", "memory_token_norm",
                                 "tie_word_embeddings")},
    "connector_type": "str",
    "vision_feature_select_strategy": "str",
    "vision_model_name_or_path": "str?",
    "text_model_name_or_path": "str?",
}  # fmt: skip


__all__ = ["TinyAlignConfig", "TinyAlignEfficientNetConfig"]
