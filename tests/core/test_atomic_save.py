"""Saves are atomic at every instant: a save process killed at random points and right after each rename always
leaves a complete artifact (the old or the new one, never a mix), and the next save removes what it left behind.

The saving child imports only `hf_ext.core.integrity` (the package `__init__` is stubbed) and writes a hand-made
safetensors file, so each kill costs a fraction of a second, not an import of torch.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hf_ext.core.integrity import CheckpointError, atomic_write_dir, clean_stale_saves, verify_checkpoint

REPO_ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    r"""
    import json, os, shutil, signal, struct, sys, types
    pkg = types.ModuleType("hf_ext"); pkg.__path__ = [sys.argv[1] + "/hf_ext"]; sys.modules["hf_ext"] = pkg
    from hf_ext.core import integrity as hub
    out, point, versions = sys.argv[2], sys.argv[3], int(sys.argv[4])

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def write_version(v):
        def write(tmp):
            payload = bytes([v % 256]) * (2 << 20)  # 2 MiB, so a random kill often lands mid-write
            header = json.dumps({"w": {"dtype": "U8", "shape": [len(payload)], "data_offsets": [0, len(payload)]}})
            header = header.encode() + b" " * (-len(header) % 8)
            with open(tmp / "model.safetensors", "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header)
                f.write(payload[: len(payload) // 2])
                if point == "mid_write" and v > 1:
                    f.flush(); die()
                f.write(payload[len(payload) // 2:])
            (tmp / "sub").mkdir()
            (tmp / "sub" / "bank.safetensors").write_bytes(open(tmp / "model.safetensors", "rb").read())
            (tmp / "config.json").write_text(json.dumps({"model_type": "toy", "version": v}))
        return write

    real_exchange, real_replace, real_rmtree = hub._exchange, os.replace, shutil.rmtree
    renames = []

    def replace(src, dst):
        real_replace(src, dst)
        if str(src).endswith(".tmp"):
            return  # the checksum file's own temp file, not a directory swap
        renames.append((str(src), str(dst)))
        if saving > 1 and point == "fallback_first_rename" and len(renames) == 1:
            die()
        if saving > 1 and point == "fallback_second_rename" and len(renames) == 2:
            die()
        if saving == 1 and point == "first_save_rename":
            die()

    def exchange(a, b):
        ok = real_exchange(a, b)
        if saving > 1 and point == "after_exchange":
            die()
        return ok

    def rmtree(path, *args, **kwargs):
        if saving > 1 and point == "mid_rmtree_old" and os.path.isdir(path):
            for name in sorted(os.listdir(path))[:1]:
                target = os.path.join(path, name)
                (real_rmtree if os.path.isdir(target) else os.unlink)(target)
            die()
        return real_rmtree(path, *args, **kwargs)

    def checksums(folder):
        result = real_checksums(folder)
        if saving > 1 and point == "after_checksums":
            die()
        return result

    real_checksums = hub.write_checksums
    hub.write_checksums, hub._exchange, os.replace, shutil.rmtree = checksums, exchange, replace, rmtree
    if point.startswith("fallback"):
        hub._exchange = lambda a, b: False
    for saving in range(1, versions + 1):
        renames.clear()
        hub.atomic_write_dir(out, write_version(saving))
        print(f"saved {saving}", flush=True)
    """
)


def _run_child(out: Path, point: str, versions: int, kill_after_s: float | None = None) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(REPO_ROOT), str(out), point, str(versions)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill_after_s is not None:
        first = proc.stdout.readline()  # the first complete artifact exists from here on
        assert first.startswith("saved 1"), proc.stderr.read()
        time.sleep(kill_after_s)
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    return proc.returncode


def _check_complete(out: Path) -> int:
    """The artifact is complete and consistent (config and both weight files of one version); returns it."""
    verify_checkpoint(out)  # config, safetensors sizes, sha256 of every listed file
    version = json.loads((out / "config.json").read_text())["version"]
    for name in ("model.safetensors", "sub/bank.safetensors"):
        data = (out / name).read_bytes()
        assert data[-1] == version % 256, f"{name} is from another save than config.json"
    return version


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _next_save_cleans(out: Path) -> None:
    atomic_write_dir(out, lambda d: (d / "config.json").write_text(json.dumps({"model_type": "toy", "version": 0})))
    assert _leftovers(out) == [], "the next save must remove every leftover of the killed one"
    verify_checkpoint(out)


POINTS = [
    "mid_write",
    "after_checksums",
    "after_exchange",
    "mid_rmtree_old",
    "fallback_first_rename",
    "fallback_second_rename",
]


@pytest.mark.parametrize("point", POINTS)
def test_kill_right_after_each_step(tmp_path, point):
    out = tmp_path / "art"
    rc = _run_child(out, point, versions=3)
    assert rc == -signal.SIGKILL
    version = _check_complete(out) if out.exists() else None
    if point == "fallback_first_rename":
        # the one instant the fallback (no renameat2) leaves the path empty: the next save restores the old copy
        assert not out.exists() and any(".old-" in n for n in _leftovers(out))
        clean_stale_saves(out)
        version = _check_complete(out)
    assert version in (1, 2)
    _next_save_cleans(out)


def test_kill_during_first_save_leaves_nothing_or_complete(tmp_path):
    out = tmp_path / "art"
    assert _run_child(out, "first_save_rename", versions=1) == -signal.SIGKILL
    assert _check_complete(out) == 1
    _next_save_cleans(out)


def test_kill_at_random_points(tmp_path):
    """20 saves killed at random instants: always a complete artifact of one version, no leftovers after a save."""
    rng = random.Random(0)
    outcomes = []
    for trial in range(20):
        out = tmp_path / f"art{trial}"
        _run_child(out, "random", versions=50, kill_after_s=rng.uniform(0.0, 0.4))
        outcomes.append(_check_complete(out))
        _next_save_cleans(out)
    assert all(v >= 1 for v in outcomes)


def test_stale_leftovers_of_a_live_process_are_kept(tmp_path):
    """A concurrent save (its process alive) is not disturbed; a dead one's folders are removed."""
    out = tmp_path / "art"
    atomic_write_dir(out, lambda d: (d / "config.json").write_text("{}"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".art.tmp-{sleeper.pid}-abc"
        live.mkdir()
        dead = tmp_path / ".art.tmp-999999999-abc"
        dead.mkdir()
        legacy = tmp_path / ".art.tmp-k2j3h4"  # the spelling before pids were recorded
        legacy.mkdir()
        clean_stale_saves(out)
        assert live.exists() and not dead.exists() and not legacy.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_checksums_catch_flipped_and_missing_files(tmp_path):
    out = tmp_path / "art"

    def write(d: Path):
        (d / "config.json").write_text(json.dumps({"model_type": "toy"}))
        header = json.dumps({"w": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}}).encode()
        header += b" " * (-len(header) % 8)
        (d / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(64))
        (d / "dataset").mkdir()
        (d / "dataset" / "data-00000-of-00001.arrow").write_bytes(b"table bytes")

    atomic_write_dir(out, write)
    listed = json.loads((out / "hf_ext_checksums.json").read_text())["files"]
    assert set(listed) == {"model.safetensors", "dataset/data-00000-of-00001.arrow"}
    verify_checkpoint(out)
    weights = bytearray((out / "model.safetensors").read_bytes())
    weights[-3] ^= 0x01  # one flipped bit: safetensors itself would load this silently
    (out / "model.safetensors").write_bytes(bytes(weights))
    with pytest.raises(CheckpointError, match=r"model.safetensors is corrupt: sha256"):
        verify_checkpoint(out)
    atomic_write_dir(out, write)
    (out / "dataset" / "data-00000-of-00001.arrow").unlink()
    with pytest.raises(CheckpointError, match=r"missing \['dataset/data-00000-of-00001.arrow'\]"):
        verify_checkpoint(out)
    (out / "hf_ext_checksums.json").write_text("[1, 2")
    with pytest.raises(CheckpointError, match="hf_ext_checksums.json is corrupt"):
        verify_checkpoint(out)


def test_exchange_failure_keeps_old(tmp_path, monkeypatch):
    """A write that raises leaves the old artifact and no temporary folder, on the fallback path too."""
    from hf_ext.core import integrity as hub

    out = tmp_path / "art"
    atomic_write_dir(out, lambda d: (d / "config.json").write_text('{"v": 1}'))
    monkeypatch.setattr(hub, "_exchange", lambda a, b: False)
    atomic_write_dir(out, lambda d: (d / "config.json").write_text('{"v": 2}'))
    assert json.loads((out / "config.json").read_text()) == {"v": 2} and _leftovers(out) == []
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 3:  # checksum file, then out -> old, then tmp -> out fails
            raise OSError("disk gone")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_dir(out, lambda d: (d / "config.json").write_text('{"v": 3}'))
    monkeypatch.setattr(os, "replace", real_replace)
    assert json.loads((out / "config.json").read_text()) == {"v": 2} and _leftovers(out) == []


REAL_CHILD = textwrap.dedent(
    r"""
    import sys
    import torch
    import hf_ext
    from hf_ext.core.hub import save_artifact
    from hf_ext.tinyalign.testing import tiny_model
    models = [tiny_model(seed=s) for s in (0, 1)]
    for i in range(1000):
        save_artifact(models[i % 2], sys.argv[1])
        print(f"saved {i + 1}", flush=True)
    """
)


def test_killed_real_save_loads(tmp_path):
    """A TinyAlign model (weights + faiss bank) saved in a loop and killed mid-way loads with its bank."""
    out = tmp_path / "tinyalign"
    proc = subprocess.Popen(
        [sys.executable, "-c", REAL_CHILD, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    for _ in range(3):  # let a few saves complete, then kill during a later one
        line = proc.stdout.readline()
        assert line.startswith("saved"), proc.stderr.read()[-2000:]
    time.sleep(random.Random(1).uniform(0.0, 0.3))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    from transformers import AutoModelForImageTextToText

    import hf_ext  # noqa: F401

    model = AutoModelForImageTextToText.from_pretrained(out)
    assert model.memory_bank is not None and len(model.memory_bank) == 24
    _next_save_cleans(out)


PLAIN_CHILD = textwrap.dedent(
    r"""
    import sys, torch
    import hf_ext  # noqa: F401  (the load guard and the atomic save_pretrained)
    from hf_ext.orca import OrcaModel
    from hf_ext.orca.testing import tiny_config
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(OrcaModel(tiny_config()))
    for i in range(1000):
        models[i % 2].save_pretrained(sys.argv[1])  # plain transformers call, no hf_ext helper
        print(f"saved {i + 1}", flush=True)
    """
)


def test_killed_plain_save_pretrained_keeps_a_complete_artifact(tmp_path):
    """`model.save_pretrained(dir)` of a registered class is atomic: killed at random instants (3 runs), the folder
    always loads as exactly one of the two versions saved into it, never a mix or a truncated file."""
    import torch

    from hf_ext.orca import OrcaModel
    from hf_ext.orca.testing import tiny_config

    versions = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        versions.append(OrcaModel(tiny_config()).state_dict())
    out = tmp_path / "orca"
    rng = random.Random(7)
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", PLAIN_CHILD, str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        for _ in range(2):
            line = proc.stdout.readline()
            assert line.startswith("saved"), proc.stderr.read()[-2000:]
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=120)
        loaded = OrcaModel.from_pretrained(out).state_dict()
        matches = [all(torch.equal(loaded[k], v[k]) for k in v) for v in versions]
        assert sum(matches) == 1, "the artifact is neither the first nor the second version"
