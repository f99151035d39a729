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


@pytest.mark.parametrize("entry", [["reproduce", "fake"], ["fake", "reproduce"]])
def test_a_reproduction_runs_at_one_torch_thread_and_the_count_is_restored(entry, monkeypatch):
    """The committed numbers were made at one intra-op thread; torch's default (the core count) changes their last
    digits, so `hf-ext reproduce METHOD` and `hf-ext METHOD reproduce` fix the count for the method's run."""
    import torch

    from hf_ext.core import cli

    seen = []

    class Spec:
        name = "fake"

        def load(self, what):
            return lambda argv: seen.append(torch.get_num_threads())

    monkeypatch.setattr(cli, "get_method", lambda name: Spec())
    monkeypatch.setattr(cli, "require_method", lambda spec: None)
    monkeypatch.setattr(cli, "build_parser", _parser_with_fake(cli.build_parser))
    monkeypatch.delenv("HF_EXT_REPRODUCE_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        assert cli.main(entry) == 0
        monkeypatch.setenv("HF_EXT_REPRODUCE_THREADS", "2")
        assert cli.main(entry) == 0
        assert seen == [1, 2] and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def _parser_with_fake(build):
    """The real parser plus a `fake` method sub-command (what `hf-ext METHOD reproduce` dispatches on)."""

    def wrapped():
        parser = build()
        sub = next(a for a in parser._actions if a.dest == "command")
        scripts = sub.add_parser("fake").add_subparsers(dest="script", required=True)
        sub.choices["fake"].set_defaults(method_name="fake")
        scripts.add_parser("reproduce", add_help=False)
        return parser

    return wrapped


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_thread_count_is_refused_before_any_method_runs(value, monkeypatch, capsys):
    from hf_ext.core import cli

    monkeypatch.setattr(cli, "get_method", lambda name: pytest.fail("resolved a method"))
    monkeypatch.setenv("HF_EXT_REPRODUCE_THREADS", value)
    assert cli.main(["reproduce", "amplitudes"]) == 2
    assert "$HF_EXT_REPRODUCE_THREADS must be an integer >= 1" in capsys.readouterr().err


def test_reproduce_help_with_one_method_is_that_methods_options(monkeypatch, capsys):
    """`hf-ext reproduce METHOD --help` hands --help (and the other flags) to the method's own parser, so a user sees
    the options that method takes; with no method or several, the generic reproduce help, and nothing runs."""
    from hf_ext.core import cli

    ran = []

    class Spec:
        name = "fake"

        def load(self, what):
            return lambda argv: ran.append(argv)

    monkeypatch.setattr(cli, "get_method", lambda name: Spec())
    monkeypatch.setattr(cli, "require_method", lambda spec: None)
    assert cli.main(["reproduce", "fake", "--stage0", "--help"]) == 0
    assert ran == [["--stage0", "--help"]]
    ran.clear()
    for argv in (["reproduce", "--help"], ["reproduce", "fake", "fake", "-h"]):
        assert cli.main(argv) == 0
        assert "methods to run" in capsys.readouterr().out and ran == []


def test_reproduce_help_of_a_real_method_lists_its_own_flags(capsys):
    from hf_ext.core.cli import main

    with pytest.raises(SystemExit) as done:
        main(["reproduce", "codebc", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "--stage0" in text and "--gpu" in text and "solc-js" in text
