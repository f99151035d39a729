"""A small Hub-compatible HTTP server on 127.0.0.1 for push tests.

`huggingface_hub`'s real client code (`create_repo`, `upload_folder`, `ModelCard.validate`, `push_to_hub`) runs
against it when `HF_ENDPOINT` points at it. It stores uploaded files under a folder and answers `preupload` with
`uploadMode: "regular"`, so the client inlines file contents in the NDJSON commit (no LFS, no Xet). Standard library
only; it implements the endpoints the client uses and answers 404 to the rest.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

REPO = r"(models|datasets|spaces)/([^/]+/[^/]+)"


class MockHub:
    """Starts the server on a free loopback port; use as a context manager.

    Args:
        root (`str` or `Path`): where uploaded repos are stored (`root/<type>s/<owner>/<name>/...`).
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, code: int = 200, obj: dict | None = None) -> None:
                body = json.dumps(obj if obj is not None else {}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def do_GET(self):
                hub.requests.append(("GET", self.path))
                if self.path.startswith("/api/whoami"):
                    return self._send(200, {"type": "user", "name": "tester", "orgs": [],
                                            "auth": {"accessToken": {"role": "write"}}})
                m = re.match(rf"^/api/{REPO}(?:/revision/[^/?]+)?", self.path)
                if m:
                    d = hub.repo_dir(m.group(1), m.group(2))
                    if not d.is_dir():
                        return self._send(404, {"error": "Repository not found"})
                    files = [{"rfilename": str(p.relative_to(d))} for p in d.rglob("*") if p.is_file()]
                    return self._send(200, {"id": m.group(2), "sha": "0" * 40, "siblings": files, "private": False})
                self._send(404, {"error": f"mock hub: no GET {self.path}"})

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
                    return self._send(409 if exists else 200, {"url": url, "name": rid, **({"error": "exists"} if exists else {})})
                if self.path == "/api/validate-yaml":
                    return self._validate_yaml(body)
                m = re.match(rf"^/api/{REPO}/preupload/(.+)$", self.path)
                if m:
                    files = json.loads(body)["files"]
                    return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                       "shouldIgnore": False, "oid": None} for f in files]})
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
                for line in body.decode().splitlines():
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if item["key"] == "file":
                        dst = d / item["value"]["path"]
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        dst.write_bytes(base64.b64decode(item["value"]["content"]))
                    elif item["key"] == "deletedFile":
                        (d / item["value"]["path"]).unlink(missing_ok=True)
                    elif item["key"] == "lfsFile":
                        return self._send(400, {"error": "mock hub does not implement LFS/Xet"})
                sha = hashlib.sha1(body).hexdigest()
                prefix = "" if kind == "models" else kind + "/"
                return self._send(200, {"commitUrl": f"http://{self.headers['Host']}/{prefix}{rid}/commit/{sha}",
                                        "commitOid": sha, "pullRequestUrl": None})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def repo_dir(self, kind: str, repo_id: str) -> Path:
        return self.root / kind / repo_id

    def __enter__(self) -> MockHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
