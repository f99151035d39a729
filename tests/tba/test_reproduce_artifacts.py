"""`--artifacts DIR`: a trained folder loads from any cwd, whatever paths its training record was written with."""

import json

import pytest

from hf_ext.tba.reproduce import load_artifacts_meta


def test_artifact_parts_resolve_inside_the_folder(tmp_path):
    folder = tmp_path / "moved" / "artifacts-abc"
    for part in ("victim_a", "victim_b", "dhng"):
        (folder / part).mkdir(parents=True)
    written = {part: f"runs/tba/full/artifacts-abc/{part}" for part in ("victim_a", "victim_b", "dhng")}
    (folder / "training.json").write_text(json.dumps({"paths": written, "timings": {}}))
    meta = load_artifacts_meta(folder)
    assert meta["paths"] == {part: str(folder / part) for part in written}


def test_artifacts_folder_without_record_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="training.json not found"):
        load_artifacts_meta(tmp_path)
