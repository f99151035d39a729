"""TBA: the dual-heterogeneous-noise-generator adversarial attack on expressive human pose and shape estimation
(arXiv 2504.17457), against victims trained here on a differentiable body model."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "TbaDhngConfig": ".configuration_tba", "TbaVictimConfig": ".configuration_tba", "TbaDhngModel": ".modeling_tba",
    "TbaDhngOutput": ".modeling_tba", "TbaPoseOutput": ".modeling_tba", "TbaPoseRegressor": ".modeling_tba",
})  # fmt: skip


SPEC = register_method(
    MethodSpec(
        name="tba",
        title="TBA: Unveiling Hidden Vulnerabilities in Digital Human Generation via Adversarial Attacks",
        arxiv_id="2504.17457",
        kind="model",
        summary=(
            "An adversarial attack on human pose and shape regressors: a dual heterogeneous noise generator "
            "(diffusers `AutoencoderKL` + `UNet2DConditionModel` + `ControlNetModel`, `TbaDhngModel`) whose noise is "
            "refined inside the "
            "L-infinity ball with gradients from both the generators and the victim (`TbaPoseRegressor`: a frozen "
            "ImageNet EfficientNet-Lite0 trunk with a closed-form ridge head, or an HF ViT / ConvNext regressor of "
            "body-model parameters), compared with FGSM, PGD and MI-FGSM."
        ),
        tags=(
            "adversarial-attack",
            "human-pose-estimation",
            "human-mesh-recovery",
            "diffusers",
            "controlnet",
            "vae",
            "robustness",
        ),  # fmt: skip
        config_class="hf_ext.tba.configuration_tba:TbaVictimConfig",
        auto_classes={"AutoModel": "hf_ext.tba.modeling_tba:TbaPoseRegressor"},
        # The noise generator is a second artifact with its own config class.
        extra_auto_classes=(
            ("hf_ext.tba.configuration_tba:TbaDhngConfig", {"AutoModel": "hf_ext.tba.modeling_tba:TbaDhngModel"}),
        ),
        reproduce="hf_ext.tba.reproduce:main",
        train="hf_ext.tba.train:main",
        evaluate="hf_ext.tba.evaluate:main",
        demo="hf_ext.tba.demo:build_demo",
        contract="hf_ext.tba.testing:contract_fixture",
        datasets=("rendered-procedural-body", "rendered-anny-body"),
        metrics=("mpjpe", "pa-mpjpe", "pve"),
        pipeline_tag="image-feature-extraction",
        status="implemented (rendered procedural / anny bodies; EfficientNet-Lite0 ridge victim A at 58 % of the "
        "prior-mean MPJPE with --full, under the 60 % bar; tiny DHNG, VAE and UNet + ControlNet denoiser "
        "trained for minutes)",
    )
)

__all__ = ["SPEC", "TbaDhngConfig", "TbaDhngModel", "TbaDhngOutput", "TbaPoseOutput", "TbaPoseRegressor",
           "TbaVictimConfig"]  # fmt: skip
