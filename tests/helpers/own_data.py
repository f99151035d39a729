"""The user's path on their own data, shared by every `tests/<method>/test_*own_data*.py`: `hf-ext train` on a data
set written outside the checkout → load the artifact → `hf-ext evaluate` → `hf-ext push --dry-run` with no extra
flag, the card's `model-index` equal to the training record's metrics."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from huggingface_hub import ModelCard

from hf_ext.core.cli import main as cli
from hf_ext.core.records import RECORD_FILE, load_training_record

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_cli(*argv: str) -> None:
    rc = cli([str(a) for a in argv])
    assert rc == 0, f"hf-ext {' '.join(map(str, argv))} exited {rc}"


def assert_outside_checkout(path: Path) -> None:
    assert REPO_ROOT not in Path(path).resolve().parents, f"{path} is inside the checkout; use tmp_path"


def card_metrics(card_path: Path) -> dict[str, float]:
    card = ModelCard.load(card_path)
    return {r.metric_name: r.metric_value for r in (card.data.eval_results or [])}


def check_own_data_path(
    method: str,
    tmp_path: Path,
    *,
    data: Path | str,
    artifact: Path,
    train_argv: Sequence[str],
    evaluate_argv: Sequence[str] = (),
    load: Callable[[Path], object] | None = None,
    expect_metrics: Sequence[str] = (),
) -> dict:
    """Runs the whole path and returns `{"record", "evaluation", "card"}`; asserts what every method owes its user.

    Args:
        data: the user's data (a file or folder under `tmp_path`, or a Hub id they could pass).
        artifact: the folder `train_argv` tells `hf-ext train` to write.
        train_argv: the arguments after `hf-ext train <method>` (they must name `data` and `artifact`).
        evaluate_argv: further arguments after `hf-ext evaluate <method> --model ARTIFACT --data DATA`.
        load: loads the artifact as a user would (`AutoModel.from_pretrained`, `PeftModel.from_pretrained`,
            `Estimator.from_pretrained` ...); its result must not be `None`.
        expect_metrics: metric names the record and the evaluation must both report.
    """
    if not isinstance(data, str) or os.path.exists(data):
        assert_outside_checkout(Path(data))
    assert_outside_checkout(artifact)
    run_cli("train", method, *train_argv)
    record = load_training_record(artifact)
    assert record is not None, f"hf-ext train {method} wrote no {RECORD_FILE} in {artifact}"
    assert record["method"] == method and record["trained"] is True
    assert record["command"].startswith(f"hf-ext train {method}"), record["command"]
    assert record["datasets"] and record["datasets"][0].get("fingerprint"), "the record must fingerprint the data"
    assert record["metrics"], "the record must carry measured evaluation metrics"
    names = {m["name"] for m in record["metrics"]}
    assert set(expect_metrics) <= names, f"record metrics {sorted(names)} lack {set(expect_metrics) - names}"
    if load is not None:
        assert load(artifact) is not None

    evaluation = tmp_path / "evaluation.json"
    run_cli("evaluate", method, "--model", artifact, "--data", data, "--output", evaluation, *evaluate_argv)
    result = json.loads(evaluation.read_text())
    got = {m["name"] for m in result["metrics"]}
    assert set(expect_metrics) <= got, f"evaluate reported {sorted(got)}, not {sorted(expect_metrics)}"

    upload = tmp_path / "upload"
    run_cli("push", method, "--repo-id", f"someone/{method}-own", "--from", artifact, "--dry-run", "--out", upload)
    metrics = card_metrics(upload / "README.md")
    assert metrics == {m["name"]: m["value"] for m in record["metrics"]}, "card model-index != training record"
    text = (upload / "README.md").read_text()
    assert "untrained" not in text.split("## ")[0].lower(), "a trained artifact's card must not say untrained"
    assert f"hf-ext train {method}" in text, "the card must name the command that trained this artifact"
    return {"record": record, "evaluation": result, "card": text}
