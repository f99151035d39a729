"""Append-only logs of a long reproduction's finished runs: one JSON object a line, flushed to disk as each run ends.

A run cut short (a killed process, a session's deadline) keeps every run it finished; a later invocation reads the
log back and trains only what is missing, or several processes each run some seeds into one log and a last
invocation decides from all of them. A record is reused only under the settings it was measured with: the writer
stores [`settings_key`] of those settings with it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def settings_key(settings: Mapping[str, Any]) -> str:
    """A short, order-independent digest of `settings` (JSON values): equal settings give equal keys."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def append_record(path: str | os.PathLike, record: Mapping[str, Any]) -> None:
    """Appends `record` as one line of `path` (made with its folder when missing) and fsyncs it, so the line
    survives the process being killed right after. The line goes out in one `write` on an `O_APPEND` descriptor:
    processes appending to one log (seeds run apart) never interleave their lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        while written < len(data):  # a regular file takes it whole; a short write is finished, not dropped
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The JSON-object lines of `path`, in order (none when the file is missing). A line that is not a JSON object
    — a torn last line of a killed writer — is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


class RunLog:
    """The finished runs of one setting in an append-only log: each line is `{"key", "id", **payload}`, where `key`
    is [`settings_key`] of `settings` (every knob that changes a run's numbers) and `id` names the run within the
    setting (e.g. `{"variant": "h2tune", "seed": 0}`). With `reuse`, the lines of the same key already in `path` are
    read back ([`get`]); [`add`] appends as each run ends. `reused` counts the runs handed back."""

    def __init__(self, path: str | os.PathLike, settings: Mapping[str, Any], *, reuse: bool = True):
        self.path, self.key, self.reused = Path(path), settings_key(settings), 0
        records = read_records(self.path) if reuse else []
        self._runs = {
            self._ident(r["id"]): r for r in records if r.get("key") == self.key and isinstance(r.get("id"), dict)
        }

    @staticmethod
    def _ident(ident: Mapping[str, Any]) -> str:
        return json.dumps(ident, sort_keys=True)

    def get(self, **ident: Any) -> dict[str, Any] | None:
        """The logged record of the run `ident` (its payload fields with `key` and `id`), or `None`."""
        record = self._runs.get(self._ident(ident))
        self.reused += record is not None
        return record

    def add(self, ident: Mapping[str, Any], **payload: Any) -> None:
        """Logs the finished run `ident` with `payload` (JSON values)."""
        record = {"key": self.key, "id": dict(ident), **payload}
        self._runs[self._ident(ident)] = record
        append_record(self.path, record)


__all__ = ["RunLog", "append_record", "read_records", "settings_key"]
