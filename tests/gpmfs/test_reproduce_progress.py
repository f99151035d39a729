"""`hf-ext reproduce gpmfs` shows a bar per data set on stderr, none with `--quiet`, and prints the same results
either way (the bars never touch stdout)."""

from __future__ import annotations

import re

from hf_ext.gpmfs.reproduce import main


def _run(tmp_path, capsys, *extra) -> tuple[str, str]:
    main(["--datasets", "flare", "--out", str(tmp_path / "out"), *extra])
    captured = capsys.readouterr()
    # timings and the output folder differ between runs; every number of the tables must not
    out = re.sub(r"\d+(\.\d+)? s\b|runtime [\d.]+ s", "<t>", captured.out)
    return out, captured.err


def test_bar_per_data_set_and_quiet(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("HF_EXT_PROGRESS", "1")  # captured stderr is no terminal: force the bar on
    shown_out, shown_err = _run(tmp_path, capsys)
    assert "gpmfs data sets" in shown_err and "1/1" in shown_err and "flare folds" in shown_err
    quiet_out, quiet_err = _run(tmp_path, capsys, "--quiet")
    assert "gpmfs data sets" not in quiet_err and "folds" not in quiet_err
    assert quiet_out == shown_out and "average_precision" in shown_out
