"""A GPMFS save is one atomic directory swap: a subprocess killed at any point of a save leaves the old or the new
complete artifact (never new weights with an old config), and the next save removes every leftover."""

import json
import os
import random
import signal
import time

import numpy as np
import pytest

import hf_ext.core.integrity as hub
import hf_ext.gpmfs.artifact as artifact
from hf_ext.gpmfs.selector import GPMFSSelector


@pytest.fixture(scope="module")
def two_selectors(small):
    """Two fits that differ in budget, so a mixed artifact (weights of one, config of the other) is detectable."""
    base = GPMFSSelector(budget=3, theta=0.3, k_personal=1, max_iter=5).fit(small.X, small.Y)
    return base, base.with_selection(budget=6)


def _check_complete(path, selectors):
    """`path` loads, and is exactly one of `selectors` (config and weights from the same save)."""
    loaded = GPMFSSelector.from_pretrained(path)
    matches = [
        s
        for s in selectors
        if s.budget == loaded.budget
        and s.budget_ == loaded.budget_
        and np.array_equal(s.global_indices_, loaded.global_indices_)
    ]
    assert len(matches) == 1, f"mixed artifact: budget {loaded.budget}, |G| = {len(loaded.global_indices_)}"
    assert len(loaded.global_indices_) == loaded.budget_


def _no_leftovers(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


def _fork_saver(path, selectors, kill_at_step=None):
    """Forks a child that saves the selectors alternately forever (or kills itself at the `kill_at_step`-th step
    boundary); returns its pid. fork, not a fresh interpreter: no import cost per kill."""
    pid = os.fork()
    if pid == 0:  # child
        try:
            steps = {"n": 0}
            if kill_at_step is not None:

                def hook(step):
                    steps["n"] += 1
                    if steps["n"] == kill_at_step:
                        os.kill(os.getpid(), signal.SIGKILL)

                artifact._SAVE_HOOK = hook
            i = 1
            while True:
                selectors[i % 2].save_pretrained(path)
                i += 1
        finally:
            os._exit(0)
    return pid


def test_kill_during_save_leaves_a_complete_artifact(two_selectors, tmp_path):
    path = tmp_path / "art"
    two_selectors[0].save_pretrained(path)
    rng = random.Random(0)
    tries = 0
    # Random instants (the child spends most time writing, fsyncing and swapping) ...
    for _ in range(24):
        pid = _fork_saver(path, two_selectors)
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        _check_complete(path, two_selectors)
        tries += 1
    # ... and right after each step of a save (written / swapped / cleaned) of the 1st and 2nd save in the child.
    for step in range(1, 7):
        pid = _fork_saver(path, two_selectors, kill_at_step=step)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        _check_complete(path, two_selectors)
        tries += 1
    assert tries >= 20
    two_selectors[1].save_pretrained(path)  # the next save cleans the leftovers of every killed save
    assert _no_leftovers(path) == []
    assert sorted(os.listdir(path)) == ["config.json", "hf_ext_checksums.json", "model.safetensors"]
    _check_complete(path, two_selectors)


def test_fallback_two_renames_are_repaired(two_selectors, tmp_path, monkeypatch):
    """Without RENAME_EXCHANGE (two renames), a save killed between them leaves the path missing for an instant;
    the next load or save moves the old complete artifact back."""
    path = tmp_path / "art"
    two_selectors[0].save_pretrained(path)
    monkeypatch.setattr(hub, "_exchange", lambda a, b: False)
    pid = os.fork()
    if pid == 0:
        try:
            old_replace = os.replace

            def replace_then_die(src, dst):  # killed right after the first rename (old artifact moved aside)
                old_replace(src, dst)
                if not str(src).endswith(".tmp"):  # not the checksum file's own temp file
                    os.kill(os.getpid(), signal.SIGKILL)

            os.replace = replace_then_die
            two_selectors[1].save_pretrained(path)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert not path.exists() and any(p.startswith(".art.old-") for p in _no_leftovers(path))
    loaded = GPMFSSelector.from_pretrained(path)  # restored, old artifact
    assert loaded.budget == two_selectors[0].budget
    two_selectors[1].save_pretrained(path)
    assert _no_leftovers(path) == []
    assert GPMFSSelector.from_pretrained(path).budget == two_selectors[1].budget


def test_save_refuses_to_replace_a_foreign_folder(two_selectors, tmp_path):
    (tmp_path / "notes.txt").write_text("user data")
    with pytest.raises(ValueError, match="not part of a GPMFS artifact"):
        two_selectors[0].save_pretrained(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "user data"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        two_selectors[0].save_pretrained(tmp_path / "file")


def test_mixed_artifact_is_rejected_by_the_hash(two_selectors, tmp_path):
    """What a two-step save could leave (weights of one save, config of the other) is an error on load."""
    a, b = tmp_path / "a", tmp_path / "b"
    two_selectors[0].save_pretrained(a)
    two_selectors[1].save_pretrained(b)
    os.replace(b / "model.safetensors", a / "model.safetensors")
    with pytest.raises(ValueError, match="content hash differs"):
        GPMFSSelector.from_pretrained(a)
    assert "weights_sha256" in json.loads((b / "config.json").read_text())["fitted"]
