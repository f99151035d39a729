"""TBA on the user's own images and regressor: `hf-ext train tba --data` (the DHNG trained on the train split, TBA
and PGD on the test split) → load → `hf-ext evaluate tba --baseline pgd` → `hf-ext push --dry-run`; any regressor
through the documented interface (a transformers ViT regression model with its processor); schema failures through
the CLI. Tiny victims and generator: seconds."""

from __future__ import annotations

import pytest
import torch
from helpers.own_data import REPO_ROOT, check_own_data_path, run_cli

from hf_ext.core.cli import main as cli
from hf_ext.core.records import load_training_record
from hf_ext.tba.data import SCHEMA, write_example_images

FAST = ("--vae_epochs", "1", "--denoiser_epochs", "1", "--batch_size", "4", "--attack_steps", "2",
        "--attack_batch_size", "8")  # fmt: skip
TBA_METRICS = ("TBA output shift (%)", "TBA SSIM", "TBA MPJPE shift (mm)")


def _pose_victim(folder):
    from hf_ext.tba import TbaPoseRegressor, TbaVictimConfig

    torch.manual_seed(0)
    kwargs = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    TbaPoseRegressor(TbaVictimConfig(backbone="vit", image_size=32, backbone_kwargs=kwargs)).save_pretrained(folder)
    return folder


def test_own_images_train_evaluate_push(tmp_path):
    from transformers import AutoModel

    images = write_example_images(tmp_path / "images", n=10, size=48)
    victim = _pose_victim(tmp_path / "victim")
    out = tmp_path / "out"
    result = check_own_data_path(
        "tba",
        tmp_path,
        data=images,
        artifact=out,
        train_argv=["--data", images, "--output_dir", out, "--victim_model", victim, *FAST],
        evaluate_argv=["--baseline", "pgd"],
        load=lambda path: AutoModel.from_pretrained(path / "dhng"),
        expect_metrics=TBA_METRICS,
    )
    record = result["record"]
    recorded = {m["name"]: m["value"] for m in record["metrics"]}
    assert record["config"]["victim"] == str(victim.resolve()) and record["config"]["split"]["rows"]["test"] == 2
    assert record["config"]["victim_info"]["kind"] == "pose"
    # evaluate rebuilds the recorded split and seeds: the same test images and the same attacks as train
    evaluated = {m["name"]: m["value"] for m in result["evaluation"]["metrics"]}
    assert evaluated == pytest.approx({k: v for k, v in recorded.items() if k.startswith("TBA")}, rel=1e-4)
    comparison = result["evaluation"]["comparison"]
    assert comparison["baseline"] == "PGD" and comparison["output shift (%)"]["n"] == 2
    assert comparison["output shift (%)"]["baseline_mean"] == pytest.approx(recorded["PGD output shift (%)"], rel=1e-4)
    assert comparison["output shift (%)"]["mean"] == pytest.approx(
        recorded["TBA output shift (%)"] - recorded["PGD output shift (%)"], abs=1e-3
    )
    assert 0 < recorded["TBA SSIM"] <= 1 and recorded["TBA output shift (%)"] > 0


def test_any_regressor_through_the_interface(tmp_path):
    """A plain transformers regression model (ViT, `problem_type="regression"`) with its image processor, images
    listed in a CSV: attacked through `RegressionObjective` (no body model), normalisation applied inside."""
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    images = write_example_images(tmp_path / "images", n=8, size=40)
    table = tmp_path / "images.csv"
    table.write_text("image\n" + "".join(f"images/person_{i:03d}.png\n" for i in range(8)))
    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=32, num_labels=3, problem_type="regression")  # fmt: skip
    ViTForImageClassification(config).save_pretrained(tmp_path / "regressor")
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(tmp_path / "regressor")
    out = tmp_path / "out"
    run_cli("train", "tba", "--data", table, "--output_dir", out, "--victim_model", tmp_path / "regressor",
            "--image_size", "32", *FAST)  # fmt: skip
    record = load_training_record(out)
    names = {m["name"] for m in record["metrics"]}
    assert {"TBA output shift (%)", "TBA SSIM", "PGD output shift (%)"} <= names
    assert not any("MPJPE" in n for n in names)  # no body model for a generic regressor
    assert record["config"]["victim_info"] == {"kind": "regressor", "image_size": 32, "body_model": None,
                                               "class": "ViTForImageClassification"}  # fmt: skip
    assert images.is_dir() and record["datasets"][0]["rows"] == {"train": 6, "test": 2}


def test_image_regressor_resizes_and_normalises_differentiably():
    from hf_ext.tba.interface import ImageRegressor

    class Echo(torch.nn.Module):
        def forward(self, pixel_values):
            return pixel_values.flatten(1)

    wrapped = ImageRegressor(Echo(), image_size=4, image_mean=[0.5, 0.5, 0.5], image_std=[0.25, 0.25, 0.25])
    x = torch.full((2, 3, 8, 8), 0.75, requires_grad=True)
    out = wrapped(x)
    assert out.shape == (2, 48) and torch.allclose(out, torch.ones_like(out))  # (0.75 - 0.5) / 0.25
    out.sum().backward()
    assert x.grad is not None and torch.allclose(x.grad.sum(), torch.tensor(2 * 48 / 0.25))


def test_attacks_stay_in_the_budget_and_the_objective_is_zero_at_the_clean_images(tmp_path):
    from hf_ext.tba.evaluation import AttackSetting, attack_scores, make_objective, run_attack
    from hf_ext.tba.interface import load_victim

    victim, info = load_victim(str(_pose_victim(tmp_path / "victim")))
    clean = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    setting = AttackSetting(eps=4 / 255, steps=2, batch_size=2)
    assert float(make_objective(victim, info, clean, setting)(clean).abs().max()) < 1e-3
    for attack in ("pgd", "fgsm", "mifgsm"):
        scores = attack_scores(victim, info, clean, run_attack(attack, victim, info, clean, setting))
        assert max(scores["linf"]) <= 4 / 255 + 1e-6 and len(scores["ssim"]) == 3
    with pytest.raises(ValueError, match="attack must be one of"):
        run_attack("cw", victim, info, clean, setting)


def _cli_error(capsys, *argv) -> str:
    rc = cli([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("hf-ext")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_missing_and_ill_typed_columns_name_the_column(tmp_path, capsys):
    write_example_images(tmp_path / "images", n=2, size=32)
    missing = tmp_path / "missing.csv"
    missing.write_text("path\nimages/person_000.png\n")
    err = _cli_error(capsys, "train", "tba", "--data", missing, "--output_dir", tmp_path / "o")
    assert "no column 'image'" in err
    typed = tmp_path / "typed.csv"
    typed.write_text("image\n1.5\n2.5\n")
    err = _cli_error(capsys, "evaluate", "tba", "--model", tmp_path, "--data", typed)
    assert "column 'image' should be image, found float64" in err
    absent = tmp_path / "absent.csv"
    absent.write_text("image\nimages/nobody.png\n")
    err = _cli_error(capsys, "train", "tba", "--data", absent, "--output_dir", tmp_path / "o")
    assert "column 'image'" in err and "nobody.png" in err
    assert not (tmp_path / "o").exists()
    err = _cli_error(capsys, "train", "tba", "--data", tmp_path / "images", "--output_dir", tmp_path / "o",
                     "--victim_model", tmp_path / "no-such-victim")  # fmt: skip
    assert "--victim_model" in err or "victim" in err


def test_docs_show_the_schema():
    page = (REPO_ROOT / "docs" / "methods" / "tba.md").read_text()
    assert SCHEMA.to_markdown() in page
    assert "## Train on your own data" in page
