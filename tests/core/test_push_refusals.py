"""`hf-ext push` refuses malformed repo ids and symlink loops in one line (exit message, no traceback), before any
work; `underscore_flags` gives every dashed flag its underscore spelling."""

from __future__ import annotations

import argparse
import os

import pytest

from hf_ext.core.arguments import ArgumentParser, underscore_flags
from hf_ext.core.cli import main
from hf_ext.core.hub import PushRefusedError, check_repo_id, select_push_files


@pytest.mark.parametrize(
    "repo_id", ["../../etc", "/abs", "a/b/c", "a--b", "name.git", "sp ace/x", "", "x/", "ns/.hidden", "a/b..c"]
)
def test_malformed_repo_ids_are_refused(repo_id):
    with pytest.raises(PushRefusedError, match="--repo_id"):
        check_repo_id(repo_id)


@pytest.mark.parametrize("repo_id", ["someone/orca-mmoe", "orca", "Org_1/model.v2"])
def test_wellformed_repo_ids_pass(repo_id):
    assert check_repo_id(repo_id) == repo_id


def test_push_with_bad_repo_id_exits_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["push", "orca", "--repo-id", "../../etc", "--dry_run", "--out", str(tmp_path / "o")])
    message = str(info.value.code)
    assert "--repo_id '../../etc' is not a Hub repo id" in message and "\n" not in message
    assert not (tmp_path / "o").exists()


def test_symlink_loop_is_refused_in_one_line(tmp_path):
    art = tmp_path / "art"
    art.mkdir()
    (art / "config.json").write_text("{}")
    os.symlink("loop", art / "loop")  # a link to itself
    with pytest.raises(PushRefusedError, match="symlink loop"):
        select_push_files(art)
    with pytest.raises(SystemExit) as info:
        main(["push", "orca", "--repo_id", "me/orca", "--from", str(art), "--dry_run", "--out", str(tmp_path / "o")])
    assert "symlink loop" in str(info.value.code) and "Traceback" not in str(info.value.code)


def test_underscore_flags_keeps_the_dashed_alias():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-memory", type=int, default=1)
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("run").add_argument("--output-dir")
    underscore_flags(parser)
    assert parser.parse_args(["--n_memory", "3"]).n_memory == 3
    assert parser.parse_args(["--n-memory", "4"]).n_memory == 4
    assert parser.parse_args(["run", "--output_dir", "x"]).output_dir == "x"
    assert "--n_memory" in parser.format_help()


def test_argument_parser_shows_and_accepts_both_spellings():
    parser = ArgumentParser()
    group = parser.add_argument_group("g")
    group.add_argument("--max-new-tokens", type=int, default=1)
    assert parser.parse_args(["--max_new_tokens", "5"]).max_new_tokens == 5
    assert parser.parse_args(["--max-new-tokens", "6"]).max_new_tokens == 6
    assert "--max_new_tokens MAX_NEW_TOKENS, --max-new-tokens" in parser.format_help()
