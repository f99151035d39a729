"""A small Hub-compatible HTTP server on 127.0.0.1 for push *and* download tests.

`huggingface_hub`'s real client code runs against it when `HF_ENDPOINT` points at it:

- uploads: `create_repo`, `upload_folder`, `ModelCard.validate`, `push_to_hub` (the server answers `preupload` with
  `uploadMode: "regular"`, so the client inlines file contents in the NDJSON commit: no LFS, no Xet);
- downloads: `hf_hub_download` / `snapshot_download` and everything built on them (`from_pretrained(repo_id)`,
  `trust_remote_code=True`, `datasets.load_dataset(repo_id)`): `HEAD`/`GET /<repo>/resolve/<revision>/<path>`,
  `/api/<type>s/<repo>/revision/<revision>` (repo info with `siblings`) and `/api/<type>s/<repo>/tree/<revision>`
  (the recursive file listing `snapshot_download` uses).

Every commit gets a sha; `main` (or no revision) is the newest commit and an older sha serves that commit's files, so
`revision=` pins work as on the Hub. Missing repos, revisions and files answer 404 with the Hub's `X-Error-Code`
(`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`), so the client raises the same exceptions as against the Hub.
Standard library only; unknown routes answer 404. [`serving`] starts one with the client pointed at it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock
from urllib.parse import unquote, urlsplit

import yaml

REPO = r"(models|datasets|spaces)/([^/]+/[^/]+)"
# /<owner>/<name>/resolve/... for models, /datasets/<owner>/<name>/resolve/... for the other types
RESOLVE = r"^/(?:(datasets|spaces)/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$"


def _git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class MockHub:
    """Starts the server on a free loopback port; use as a context manager.

    Args:
        root (`str` or `Path`): where repos are stored: the newest files of a repo under
            `root/<type>s/<owner>/<name>/`, each commit's snapshot under `root/.commits/<type>s/<owner>/<name>/<sha>/`.

    Attributes:
        url (`str`): the endpoint to put in `HF_ENDPOINT`.
        requests (`list[tuple[str, str]]`): every `(method, path)` served, for assertions.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.requests: list[tuple[str, str]] = []
        self.heads: dict[tuple[str, str], list[str]] = {}  # (kind, repo id) -> commit shas, oldest first
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the Hub; every reply sets Content-Length

            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, code: int = 200, obj=None, headers: dict | None = None, head: bool = False) -> None:
                body = json.dumps(obj if obj is not None else {}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _error(self, code: str, message: str, head: bool = False) -> None:
                self._send(404, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message}, head=head)

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def do_HEAD(self):
                hub.requests.append(("HEAD", self.path))
                self._route_get(head=True)

            def do_GET(self):
                hub.requests.append(("GET", self.path))
                self._route_get(head=False)

            def _route_get(self, head: bool) -> None:
                path = unquote(urlsplit(self.path).path)
                if path.startswith("/api/whoami"):
                    return self._send(
                        200,
                        {"type": "user", "name": "tester", "orgs": [], "auth": {"accessToken": {"role": "write"}}},
                        head=head,
                    )
                m = re.match(RESOLVE, path)
                if m:
                    kind = m.group(1) or "models"
                    return self._resolve(kind, m.group(2), m.group(3), m.group(4), head)
                m = re.match(rf"^/api/{REPO}/tree/([^/]+)(?:/(.*))?$", path)
                if m:
                    return self._tree(m.group(1), m.group(2), m.group(3), m.group(4) or "", head)
                m = re.match(rf"^/api/{REPO}(?:/revision/([^/]+))?/?$", path)
                if m:
                    return self._info(m.group(1), m.group(2), m.group(3) or "main", head)
                self._send(404, {"error": f"mock hub: no GET {self.path}"}, head=head)

            def _snapshot(self, kind: str, rid: str, revision: str, head: bool):
                """(folder, sha) of `revision`, or None after answering the 404."""
                if not hub.repo_dir(kind, rid).is_dir():
                    self._error("RepoNotFound", f"Repository {rid} not found", head)
                    return None
                found = hub.snapshot(kind, rid, revision)
                if found is None:
                    self._error("RevisionNotFound", f"Invalid rev id: {revision}", head)
                return found

            def _info(self, kind: str, rid: str, revision: str, head: bool):
                found = self._snapshot(kind, rid, revision, head)
                if found is None:
                    return
                folder, sha = found
                files = [{"rfilename": p} for p in hub.files(folder)]
                info = {
                    "id": rid,
                    "sha": sha,
                    "siblings": files,
                    "private": False,
                    "disabled": False,
                    "gated": False,
                    "tags": [],
                    "downloads": 0,
                    "likes": 0,
                }
                if kind == "spaces":
                    info["sdk"] = "gradio"
                self._send(200, info, head=head)

            def _tree(self, kind: str, rid: str, revision: str, prefix: str, head: bool):
                found = self._snapshot(kind, rid, revision, head)
                if found is None:
                    return
                folder, _ = found
                recursive = "recursive=true" in (urlsplit(self.path).query or "").lower()
                prefix = prefix.strip("/")
                entries, folders = [], set()
                for rel in hub.files(folder):
                    if prefix and not rel.startswith(prefix + "/"):
                        continue
                    rest = rel[len(prefix) + 1 :] if prefix else rel
                    if not recursive and "/" in rest:
                        folders.add((prefix + "/" if prefix else "") + rest.split("/", 1)[0])
                        continue
                    data = (folder / rel).read_bytes()
                    entries.append({"type": "file", "path": rel, "size": len(data), "oid": _git_blob_sha(data)})
                if recursive:
                    for rel in list(hub.files(folder)):
                        parts = rel.split("/")[:-1]
                        for i in range(1, len(parts) + 1):
                            sub = "/".join(parts[:i])
                            if not prefix or sub.startswith(prefix + "/"):
                                folders.add(sub)
                entries += [{"type": "directory", "path": f, "oid": "0" * 40} for f in sorted(folders)]
                self._send(200, entries, head=head)

            def _resolve(self, kind: str, rid: str, revision: str, filename: str, head: bool):
                found = self._snapshot(kind, rid, revision, head)
                if found is None:
                    return
                folder, sha = found
                target = (folder / filename).resolve()
                if folder.resolve() not in target.parents or not target.is_file():
                    return self._error("EntryNotFound", f"{filename} does not exist at revision {revision}", head)
                data = target.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", f'"{_git_blob_sha(data)}"')
                self.send_header("X-Repo-Commit", sha)
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            def do_POST(self):
                body = self._body()
                hub.requests.append(("POST", self.path))
                if self.path == "/api/repos/create":
                    payload = json.loads(body)
                    rid = f"{payload.get('organization') or 'tester'}/{payload['name']}"
                    kind = payload.get("type") or "model"
                    if kind == "space" and not payload.get("sdk"):
                        return self._send(400, {"error": "a Space needs an sdk"})
                    d = hub.repo_dir(kind + "s", rid)
                    exists = d.is_dir()
                    d.mkdir(parents=True, exist_ok=True)
                    prefix = "" if kind == "model" else kind + "s/"
                    url = f"http://{self.headers['Host']}/{prefix}{rid}"
                    return self._send(
                        409 if exists else 200, {"url": url, "name": rid, **({"error": "exists"} if exists else {})}
                    )
                if self.path == "/api/validate-yaml":
                    return self._validate_yaml(body)
                m = re.match(rf"^/api/{REPO}/preupload/(.+)$", self.path)
                if m:
                    files = json.loads(body)["files"]
                    return self._send(
                        200,
                        {
                            "files": [
                                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                                for f in files
                            ]
                        },
                    )
                m = re.match(rf"^/api/{REPO}/commit/(.+)$", self.path)
                if m:
                    return self._commit(m.group(1), m.group(2), body)
                self._send(404, {"error": f"mock hub: no POST {self.path}"})

            def _validate_yaml(self, body: bytes):
                # The real Hub checks the card metadata schema; we check what the client sends parses as YAML.
                payload = json.loads(body)
                content = payload.get("content", "")
                if content.startswith("---"):  # a whole README: the metadata is the front matter
                    content = content.split("---", 2)[1] if content.count("---") >= 2 else ""
                try:
                    meta = yaml.safe_load(content) or {}
                except yaml.YAMLError as err:
                    return self._send(400, {"error": f"invalid YAML: {err}"})
                if not isinstance(meta, dict):
                    return self._send(400, {"error": "metadata must be a mapping"})
                return self._send(200, {"warnings": []})

            def _commit(self, kind: str, rid: str, body: bytes):
                d = hub.repo_dir(kind, rid)
                d.mkdir(parents=True, exist_ok=True)
                with hub._lock:
                    for line in body.decode().splitlines():
                        if not line.strip():
                            continue
                        item = json.loads(line)
                        if item["key"] == "file":
                            dst = (d / item["value"]["path"]).resolve()
                            if d.resolve() not in dst.parents:
                                return self._send(400, {"error": f"path leaves the repo: {item['value']['path']}"})
                            dst.parent.mkdir(parents=True, exist_ok=True)
                            dst.write_bytes(base64.b64decode(item["value"]["content"]))
                        elif item["key"] == "deletedFile":
                            (d / item["value"]["path"]).unlink(missing_ok=True)
                        elif item["key"] == "lfsFile":
                            return self._send(400, {"error": "mock hub does not implement LFS/Xet"})
                    sha = hashlib.sha1(body + str(len(hub.heads.get((kind, rid), []))).encode()).hexdigest()
                    hub._record_commit(kind, rid, sha)
                prefix = "" if kind == "models" else kind + "/"
                return self._send(
                    200,
                    {
                        "commitUrl": f"http://{self.headers['Host']}/{prefix}{rid}/commit/{sha}",
                        "commitOid": sha,
                        "pullRequestUrl": None,
                    },
                )

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def repo_dir(self, kind: str, repo_id: str) -> Path:
        """The newest files of a repo (`kind` is `"models"`, `"datasets"` or `"spaces"`)."""
        return self.root / kind / repo_id

    def _record_commit(self, kind: str, rid: str, sha: str) -> None:
        snap = self.root / ".commits" / kind / rid / sha
        shutil.copytree(self.repo_dir(kind, rid), snap, dirs_exist_ok=True)
        self.heads.setdefault((kind, rid), []).append(sha)

    def snapshot(self, kind: str, rid: str, revision: str) -> tuple[Path, str] | None:
        """(folder, commit sha) that `revision` (a branch name `main`, or a commit sha) serves, or `None`."""
        shas = self.heads.get((kind, rid), [])
        if revision in ("main", "HEAD"):
            return (self.repo_dir(kind, rid), shas[-1]) if shas else (self.repo_dir(kind, rid), "0" * 40)
        if revision in shas:
            return (self.root / ".commits" / kind / rid / revision, revision)
        return None

    @staticmethod
    def files(folder: Path) -> list[str]:
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())

    def __enter__(self) -> MockHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def serving(root: str | Path) -> Iterator[MockHub]:
    """A [`MockHub`] under `root` with `huggingface_hub`'s client pointed at it until the block ends: `HF_ENDPOINT`,
    a fake token, online mode and a private `HF_HOME` under `root`, so `from_pretrained(repo_id)`, `push_folder`
    and `hf_hub_download` talk to the loopback server. Everything is restored on exit (tests run offline).

    The client reads its endpoint, offline switch and cache folder once, at import time, so those module constants
    are patched too (and the module-level `HfApi`, which `file_exists` uses, kept the old endpoint).
    """
    import huggingface_hub.constants as constants
    import huggingface_hub.hf_api as hf_api

    root = Path(root)
    with MockHub(root / "store") as server, contextlib.ExitStack() as stack:
        home = root / "hf_home"
        stack.enter_context(
            mock.patch.dict(
                os.environ,
                {"HF_ENDPOINT": server.url, "HF_TOKEN": "hf_fake", "HF_HUB_OFFLINE": "0", "HF_HOME": str(home)},
            )
        )
        for name, value in (
            ("ENDPOINT", server.url),
            ("HF_HUB_OFFLINE", False),
            ("HF_HUB_CACHE", str(home / "hub")),
            ("HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}"),
        ):
            stack.enter_context(mock.patch.object(constants, name, value))
        stack.enter_context(mock.patch.object(hf_api.api, "endpoint", server.url))
        yield server
