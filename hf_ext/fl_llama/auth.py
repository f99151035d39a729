"""Client authentication for the FL-LLaMA gRPC server: per-client bearer tokens, made by `hf-ext fl_llama tokens`.

Why tokens: the split protocol is a request/reply RPC driven by the clients, and the server keeps per-client state
between calls (the pending forward whose backward returns gradients, the KV caches of generation sessions). Before
this module any process reaching the port could name itself another client and receive that client's gradients,
decode in or end its sessions, or move the partition and wipe everyone's state. Now:

* `hf-ext fl_llama tokens OUT --clients alice bob --admins ops` writes one secret token per client
  (`OUT/clients/<name>.token`, mode 0600, to hand to that client) and `OUT/server_tokens.json`, which holds only the
  SHA-256 of each token with the client's name and role (a leaked server file does not let anyone log in).
* `hf-ext fl_llama serve SERVER_DIR --tokens OUT/server_tokens.json` refuses every call without a valid token
  (`UNAUTHENTICATED`); the token's *name* is the client's identity: its pending forward, sub-server and sessions are
  keyed by it, and a `client_id` the client puts in a message is ignored. Only `admin` tokens may send `partition`.
* A client passes its token with `GrpcTransport(address, token=read_token(path))` (sent as the `authorization`
  metadata of every call).

Revocation and expiry: a server started with `--tokens FILE` re-reads FILE whenever it changes (its size, mtime or
inode), so removing a client's entry (`hf-ext fl_llama tokens OUT --revoke NAME`, or an edit) stops its token at the
next call, without a restart. An entry may carry `"expires_at"` (seconds since the epoch, UTC; `--expires-in SECONDS`
when making tokens): from then on the token is refused. A file that becomes unreadable or malformed locks everyone
out (fail closed) until it is fixed. Types are strict: `"admin"` must be `true` or `false` (`"no"` is an error, not
an admin), `"expires_at"` a number or null, and unknown fields are refused.

Tokens travel in the clear unless the channel is TLS: on anything but loopback, also pass `--tls-cert/--tls-key` to
`serve` and `root_certificates=` to [`GrpcTransport`].
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser

TOKEN_METADATA = "authorization"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
FORMAT = "hf_ext.fl_llama.tokens/1"


@dataclass(frozen=True)
class Principal:
    """An authenticated client: its `name` (from the server's token file, never from a message) and role."""

    name: str
    admin: bool = False


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_ENTRY_FIELDS = {"sha256", "admin", "expires_at"}


def _parse_entries(data, path) -> dict[str, tuple[Principal, float | None]]:
    """The token table of a parsed `server_tokens.json`, every field type-checked (a `ValueError` names it)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("clients"), dict):
        raise ValueError(f"{path} is not an FL-LLaMA token file (format {FORMAT!r})")
    unknown = set(data) - {"format", "clients"}
    if unknown:
        raise ValueError(f"{path}: unknown top-level field(s) {sorted(unknown)}")
    entries = {}
    for name, item in data["clients"].items():
        if not _NAME.match(str(name)):
            raise ValueError(f"{path}: malformed client name {name!r}")
        if not isinstance(item, dict):
            raise ValueError(f"{path}: the entry of client {name!r} must be an object, got {type(item).__name__}")
        extra = set(item) - _ENTRY_FIELDS
        if extra:
            raise ValueError(f"{path}: client {name!r} has unknown field(s) {sorted(extra)}")
        digest = item.get("sha256")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(f"{path}: client {name!r}: 'sha256' must be 64 lowercase hex digits")
        admin = item.get("admin", False)
        if not isinstance(admin, bool):
            raise ValueError(f"{path}: client {name!r}: 'admin' must be true or false, got {admin!r}")
        expires = item.get("expires_at")
        if expires is not None and (
            isinstance(expires, bool) or not isinstance(expires, (int, float)) or not math.isfinite(expires)
        ):
            raise ValueError(
                f"{path}: client {name!r}: 'expires_at' must be seconds since the epoch (a number) or null, "
                f"got {expires!r}"
            )
        if digest in entries:
            raise ValueError(f"{path}: clients {entries[digest][0].name!r} and {name!r} share one token")
        entries[digest] = (Principal(str(name), admin), None if expires is None else float(expires))
    if not entries:
        raise ValueError(f"{path} lists no client")
    return entries


class TokenStore:
    """The server's table of token hashes → [`Principal`] (with an optional expiry time).

    Args:
        entries (`dict[str, Principal]` or `dict[str, tuple[Principal, float | None]]`): SHA-256 hex digest of a
            token → its client (and the epoch second it expires at, or `None`).
        path (`str` or `os.PathLike`, *optional*): the file the table came from; when set, the table is re-read
            whenever the file changes (revocation without restart), and an unreadable or malformed file refuses
            every token until it is fixed.
        clock (`callable`, *optional*): seconds since the epoch (tests pass a fake clock).
    """

    def __init__(self, entries: dict, path: str | os.PathLike | None = None, clock=time.time):
        self._entries = {k: v if isinstance(v, tuple) else (v, None) for k, v in entries.items()}
        self._path = Path(path) if path is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp = self._file_stamp()
        self._broken: str | None = None

    @classmethod
    def load(cls, path: str | os.PathLike, clock=time.time) -> TokenStore:
        """Reads a `server_tokens.json` written by [`generate_tokens`] and watches it for changes; a malformed file
        raises `ValueError` naming the field."""
        return cls(cls._read(path), path=path, clock=clock)

    @staticmethod
    def _read(path) -> dict:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"cannot read the token file {path}: {err}") from err
        return _parse_entries(data, path)

    def _file_stamp(self):
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)
        except OSError:
            return "missing"
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _refresh(self) -> None:
        """Re-reads the file if it changed since the last read (fail closed when it is now unreadable)."""
        if self._path is None:
            return
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        with self._lock:
            if stamp == self._stamp:
                return
            try:
                self._entries, self._broken = self._read(self._path), None
            except ValueError as err:
                self._entries, self._broken = {}, str(err)
                print(f"FL-LLaMA token file: {err}; every token is refused until it is fixed", file=sys.stderr)
            self._stamp = stamp

    @property
    def names(self) -> list[str]:
        self._refresh()
        return sorted(p.name for p, _ in self._entries.values())

    def authenticate(self, token: str | None) -> Principal | None:
        """The client a token belongs to, or `None` (unknown, revoked or expired; digests compared in constant
        time). The token file is re-read first if it changed."""
        if not token or not isinstance(token, str) or len(token) > 512:
            return None
        self._refresh()
        digest = _digest(token)
        found = None
        for known, (principal, expires) in self._entries.items():  # every entry is compared: no early exit
            if hmac.compare_digest(known, digest):
                found = principal if expires is None or self._clock() < expires else None
        return found


def generate_tokens(out_dir: str | os.PathLike, clients: list[str], admins: list[str] = (),
                    expires_in: float | None = None) -> dict[str, str]:  # fmt: skip
    """Makes one random token per client (and per admin) under `out_dir`.

    Writes `clients/<name>.token` (the token, mode 0600) for each, and `server_tokens.json` (names, roles and token
    hashes only; with `expires_in` seconds, each entry's `expires_at`). Returns name → token.
    """
    if expires_in is not None and (
        isinstance(expires_in, bool) or not isinstance(expires_in, (int, float)) or not expires_in > 0
        or not math.isfinite(expires_in)
    ):  # fmt: skip
        raise ValueError(f"expires_in must be a finite number of seconds > 0, got {expires_in!r}")
    names = list(clients) + list(admins)
    if not names:
        raise ValueError("name at least one client (--clients) or admin (--admins)")
    for name in names:
        if not _NAME.match(name):
            raise ValueError(
                f"client name {name!r} must be 1-64 characters of [A-Za-z0-9_.-], starting with a letter or digit"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"client names must be distinct, got {names}")
    out = Path(out_dir)
    (out / "clients").mkdir(parents=True, exist_ok=True)
    tokens = {name: secrets.token_urlsafe(32) for name in names}
    for name, token in tokens.items():
        path = out / "clients" / f"{name}.token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
    expires_at = None if expires_in is None else time.time() + float(expires_in)
    entries = {name: {"sha256": _digest(tokens[name]), "admin": name in admins} for name in names}
    if expires_at is not None:
        for entry in entries.values():
            entry["expires_at"] = expires_at
    _write_table(out / "server_tokens.json", {"format": FORMAT, "clients": entries})
    return tokens


def _write_table(path: Path, table: dict) -> None:
    """Atomically (a running server re-reads the file and must never see half of it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(table, handle, indent=2)
    os.replace(tmp, path)


def revoke_tokens(table_path: str | os.PathLike, names: list[str]) -> list[str]:
    """Removes clients from a `server_tokens.json` (atomically); a server using the file refuses their tokens at the
    next call. Returns the names that are left; an unknown name raises `ValueError`."""
    path = Path(table_path)
    data = json.loads(path.read_text())
    _parse_entries(data, path)
    unknown = sorted(set(names) - set(data["clients"]))
    if unknown:
        raise ValueError(f"{path} has no client(s) {unknown}")
    for name in names:
        del data["clients"][name]
    _write_table(path, data)
    return sorted(data["clients"])


def read_token(path: str | os.PathLike) -> str:
    """A client's token from its `.token` file."""
    token = Path(path).read_text().strip()
    if not token:
        raise ValueError(f"the token file {path} is empty")
    return token


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="hf-ext fl_llama tokens", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("out_dir", help="folder for server_tokens.json and clients/<name>.token")
    p.add_argument("--clients", nargs="*", default=[], help="client names (one token each)")
    p.add_argument("--admins", nargs="*", default=[], help="names allowed to send admin messages (partition)")
    p.add_argument("--expires-in", type=float, help="seconds until the new tokens expire (default: never)")
    p.add_argument(
        "--revoke", nargs="+", metavar="NAME", help="remove these clients from OUT/server_tokens.json (no restart)"
    )
    return p


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    ns = parser.parse_args(argv)
    if ns.revoke:
        if ns.clients or ns.admins:
            parser.error("--revoke removes clients; make new tokens in a separate call")
        try:
            left = revoke_tokens(Path(ns.out_dir) / "server_tokens.json", ns.revoke)
        except (OSError, ValueError) as err:
            parser.error(f"--revoke: {err}")
        print(f"revoked {', '.join(ns.revoke)}; {len(left)} client(s) left (a running server applies it at once)")
        return
    if ns.expires_in is not None and not (math.isfinite(ns.expires_in) and ns.expires_in > 0):
        parser.error(f"--expires-in must be a finite number of seconds > 0, got {ns.expires_in}")
    try:
        generate_tokens(ns.out_dir, ns.clients, ns.admins, expires_in=ns.expires_in)
    except ValueError as err:
        parser.error(str(err))
    out = Path(ns.out_dir)
    print(f"server table: {out / 'server_tokens.json'} (pass to `hf-ext fl_llama serve --tokens`)")
    for name in list(ns.clients) + list(ns.admins):
        print(f"token for {name}: {out / 'clients' / (name + '.token')} (give it to that client only)")


__all__ = ["Principal", "TOKEN_METADATA", "TokenStore", "generate_tokens", "main", "read_token", "revoke_tokens"]
