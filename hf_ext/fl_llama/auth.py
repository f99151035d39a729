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

Tokens travel in the clear unless the channel is TLS: on anything but loopback, also pass `--tls-cert/--tls-key` to
`serve` and `root_certificates=` to [`GrpcTransport`].
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

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


class TokenStore:
    """The server's table of token hashes → [`Principal`].

    Args:
        entries (`dict[str, Principal]`): SHA-256 hex digest of a token → its client.
    """

    def __init__(self, entries: dict[str, Principal]):
        self._entries = dict(entries)

    @classmethod
    def load(cls, path: str | os.PathLike) -> TokenStore:
        """Reads a `server_tokens.json` written by [`generate_tokens`]; a malformed file raises `ValueError`."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"cannot read the token file {path}: {err}") from err
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("clients"), dict):
            raise ValueError(f"{path} is not an FL-LLaMA token file (format {FORMAT!r})")
        entries = {}
        for name, item in data["clients"].items():
            if (
                not _NAME.match(str(name))
                or not isinstance(item, dict)
                or not re.fullmatch(r"[0-9a-f]{64}", str(item.get("sha256", "")))
            ):
                raise ValueError(f"{path}: malformed entry for client {name!r}")
            entries[item["sha256"]] = Principal(str(name), bool(item.get("admin", False)))
        if not entries:
            raise ValueError(f"{path} lists no client")
        return cls(entries)

    @property
    def names(self) -> list[str]:
        return sorted(p.name for p in self._entries.values())

    def authenticate(self, token: str | None) -> Principal | None:
        """The client a token belongs to, or `None` (comparing digests in constant time)."""
        if not token or len(token) > 512:
            return None
        digest = _digest(token)
        found = None
        for known, principal in self._entries.items():  # every entry is compared: no early exit on a match
            if hmac.compare_digest(known, digest):
                found = principal
        return found


def generate_tokens(out_dir: str | os.PathLike, clients: list[str], admins: list[str] = ()) -> dict[str, str]:
    """Makes one random token per client (and per admin) under `out_dir`.

    Writes `clients/<name>.token` (the token, mode 0600) for each, and `server_tokens.json` (names, roles and token
    hashes only). Returns name → token.
    """
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
    table = {
        "format": FORMAT,
        "clients": {name: {"sha256": _digest(tokens[name]), "admin": name in admins} for name in names},
    }
    tmp = out / ".server_tokens.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(table, handle, indent=2)
    os.replace(tmp, out / "server_tokens.json")
    return tokens


def read_token(path: str | os.PathLike) -> str:
    """A client's token from its `.token` file."""
    token = Path(path).read_text().strip()
    if not token:
        raise ValueError(f"the token file {path} is empty")
    return token


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hf-ext fl_llama tokens", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("out_dir", help="folder for server_tokens.json and clients/<name>.token")
    p.add_argument("--clients", nargs="*", default=[], help="client names (one token each)")
    p.add_argument("--admins", nargs="*", default=[], help="names allowed to send admin messages (partition)")
    return p


def main(argv: list[str] | None = None) -> None:
    ns = make_parser().parse_args(argv)
    generate_tokens(ns.out_dir, ns.clients, ns.admins)
    out = Path(ns.out_dir)
    print(f"server table: {out / 'server_tokens.json'} (pass to `hf-ext fl_llama serve --tokens`)")
    for name in list(ns.clients) + list(ns.admins):
        print(f"token for {name}: {out / 'clients' / (name + '.token')} (give it to that client only)")


__all__ = ["Principal", "TOKEN_METADATA", "TokenStore", "generate_tokens", "main", "read_token"]
