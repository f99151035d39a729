"""`hf-ext reproduce --jobs N`: methods run N at a time in their own processes, the longest (by the last run) first,
each one's output printed whole when it ends, failures counted, the seconds saved for the next run's order."""

from __future__ import annotations

import json

import pytest

from hf_ext.core import reproduce_pool

# A stand-in for `hf-ext reproduce NAME`: prints its name and argv in two writes with a pause between (so
# interleaved output would show), then fails for "bad".
FAKE = (
    "import sys, time; name = sys.argv[2]; print('begin', name, sys.argv[3:], flush=True); time.sleep(0.3); "
    "print('end', name, flush=True); sys.exit(1 if name == 'bad' else 0)"
)


def test_pool_runs_longest_first_prints_each_log_whole_and_counts_failures(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_EXT_HOME", str(tmp_path))
    monkeypatch.setattr(reproduce_pool, "CHILD", FAKE)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "reproduce_seconds.json").write_text(json.dumps({"a": 1.0, "b": 50.0, "bad": 5.0}))
    failed, times = reproduce_pool.run_pool(["a", "b", "bad", "new"], ["--full"], jobs=2)
    out = capsys.readouterr().out
    started = [line.split()[2] for line in out.splitlines() if line.startswith("[reproduce] started")]
    assert started == ["new", "b", "bad", "a"]  # unknown first, then the last run's seconds, longest first
    assert failed == ["bad"] and set(times) == {"a", "b", "bad", "new"}
    for name in ("a", "b", "bad", "new"):  # each log printed whole: its two lines are adjacent
        lines = out.splitlines()
        i = lines.index(f"begin {name} ['--full']")
        assert lines[i + 1] == f"end {name}"
    saved = json.loads((tmp_path / "logs" / "reproduce_seconds.json").read_text())
    assert set(saved) == {"a", "b", "bad", "new"} and saved["new"] > 0.2


def test_cli_refuses_jobs_below_one(capsys):
    from hf_ext.core.cli import main

    assert main(["reproduce", "amplitudes", "--jobs", "0"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", [1, 2])
def test_cli_sends_one_method_or_jobs_1_down_the_sequential_path(jobs, monkeypatch, capsys):
    """With one method (or --jobs 1) nothing is spawned: the method runs in this process, as before."""
    from hf_ext.core import cli

    ran = []
    monkeypatch.setattr(reproduce_pool, "run_pool", lambda *a: pytest.fail("spawned a pool"))

    class Spec:
        name = "fake"

        def load(self, what):
            return lambda argv: ran.append((what, argv))

    monkeypatch.setattr(cli, "get_method", lambda name: Spec())
    monkeypatch.setattr(cli, "require_method", lambda spec: None)
    assert cli.main(["reproduce", "fake", "--jobs", str(jobs)]) == 0
    assert ran == [("reproduce", [])]
