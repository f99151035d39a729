"""GPMFS: global-plus-personalized multi-label feature selection (https://arxiv.org/abs/2504.12740)."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "GPMFSConfig": ".config", "GPMFSSelector": ".selector", "GPMFSMultiLabelClassifier": ".estimator",
})  # fmt: skip

SPEC = register_method(
    MethodSpec(
        name="gpmfs",
        title="GPMFS: Global Foundation and Personalized Optimization for Multi-Label Feature Selection",
        arxiv_id="2504.12740",
        kind="estimator",
        summary=(
            "A scikit-learn multi-label feature selector: a global feature set by l2,1 row norms plus per-label "
            "personal features above a threshold θ, saved as a Hub artifact (config + safetensors)."
        ),
        tags=("feature-selection", "multi-label", "scikit-learn", "tabular"),
        config_class="hf_ext.gpmfs.config:GPMFSConfig",
        reproduce="hf_ext.gpmfs.reproduce:main",
        demo="hf_ext.gpmfs.demo:build_demo",
        contract="hf_ext.gpmfs.testing:contract_fixture",
        train="hf_ext.gpmfs.train:main",
        evaluate="hf_ext.gpmfs.evaluate:main",
        commands={"fit": "hf_ext.gpmfs.train:cli"},  # the old name of `hf-ext train gpmfs`
        datasets=("mulan-yeast",),
        metrics=("hamming_loss", "average_precision", "f1"),
        pipeline_tag="tabular-classification",
        library_name="hf_ext",
        status="implemented (Yeast and Solar Flare from the river wheel, digits, planted data; per-label classifier)",
        usage=(
            "from hf_ext.gpmfs import GPMFSSelector\n\n"
            'selector = GPMFSSelector.from_pretrained("{repo_id}")\n'
            "X_global = selector.transform(X)             # the global feature set\n"
            "X_label3 = selector.transform(X, label=3)    # global + personal features of label 3\n\n"
            "# one classifier per label on its own columns (Pipeline / GridSearchCV ready)\n"
            "from hf_ext.gpmfs import GPMFSMultiLabelClassifier\n"
            "clf = GPMFSMultiLabelClassifier(GPMFSSelector(budget=0.2, theta=0.5)).fit(X, Y)"
        ),
    )
)

__all__ = ["GPMFSConfig", "GPMFSMultiLabelClassifier", "GPMFSSelector", "SPEC"]
