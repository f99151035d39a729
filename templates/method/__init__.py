"""MyMethod: <one line on what the method is> (arXiv <id>).

This folder is the whole method: `hf_ext` discovers it (a subpackage of `hf_ext`, or an installed package that
declares an `hf_ext.methods` entry point) and this file registers it once.
"""

from pathlib import Path

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use: `import hf_ext` imports no torch and none of the method's own dependencies.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {"MyMethodConfig": ".configuration_mymethod", "MyMethodModel": ".modeling_mymethod"},
)

_HERE = Path(__file__).resolve().parent

SPEC = register_method(
    MethodSpec(
        name="mymethod",
        title="MyMethod: the paper's title",
        kind="model",
        summary="A `PreTrainedModel` regressor on tabular features (replace with the method in HF terms).",
        tags=("tabular-regression",),
        config_class="mymethod.configuration_mymethod:MyMethodConfig",
        auto_classes={"AutoModel": "mymethod.modeling_mymethod:MyMethodModel"},
        reproduce="mymethod.reproduce:main",
        train="mymethod.train:main",
        demo="mymethod.demo:build_demo",
        contract="mymethod.testing:contract_fixture",
        datasets=("synthetic-linear-regression",),
        metrics=("mse",),
        pipeline_tag="tabular-regression",
        # inside hf_ext the card and Space live in model_cards/<name>.md and spaces/<name>/; a method kept in its
        # own folder carries them itself
        card_path=str(_HERE / "model_card.md"),
        space_path=str(_HERE / "space"),
    )
)

__all__ = ["SPEC", "MyMethodConfig", "MyMethodModel"]
