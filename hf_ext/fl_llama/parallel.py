"""The two parallel modes as message handlers in front of a [`SplitServer`], for in-process threads and for several
client processes over gRPC alike (`hf-ext fl_llama serve --mode client_batch|server_hierarchical --clients M`).

* [`ClientBatchHub`]: each client's `forward` (or `backward`) waits until all `M` clients' messages of the step have
  arrived; the server handles them as one batch ([`SplitServer.handle_batch`], one forward/backward and one optimiser
  step of B) and each client gets its own slice back.
* [`HierarchicalSync`]: the server keeps one sub-server per client (`SplitServer(hierarchical=True)`); a client's
  `backward` that completes its `k`-th step with `k % sync_every == 0` waits until every one of the `M` clients has
  done `k` steps, and the last to arrive FedAvg-averages the sub-servers ([`SplitServer.aggregate`]).

Both block a caller while others have not arrived, so over gRPC they run with `serialize=False` (the server is
thread-safe; the hubs lock only their own bookkeeping) and need `max_workers >= M`. In server-hierarchical mode the
sub-servers compute in parallel: a client's step holds only its own sub-server's lock. A wait longer than `timeout`
raises [`PeerDisconnected`] in every waiting client.
"""

from __future__ import annotations

import threading

from .server import SplitServer
from .transport import PeerDisconnected, decode, encode


class ClientBatchHub:
    """Client-batch mode: the step's `forward` (or `backward`) messages of `num_clients` clients become one batch.

    Args:
        server ([`SplitServer`]): part B.
        num_clients (`int`): clients per step (`M`).
        timeout (`float`): seconds a client waits for the others.

    `handler(key)` gives an in-process handler for client `key`; `handle_bytes(data, principal)` is the gRPC entry
    point (the key is the authenticated principal's name, or the message's `client_id` without tokens).
    """

    def __init__(self, server: SplitServer, num_clients: int, timeout: float = 120.0):
        self.server, self.n, self.timeout = server, int(num_clients), timeout
        self._cv = threading.Condition()
        self._pending: dict = {}
        self._replies: dict = {}
        self._error: BaseException | None = None

    def handler(self, key):
        return lambda data: self._handle(data, key, None)

    def handle_bytes(self, data: bytes, principal=None) -> bytes:
        try:
            key = principal.name if principal is not None else str(decode(data)[2].get("client_id", "0"))
            return self._handle(data, key, principal)
        except PeerDisconnected as exc:
            return encode("error", meta={"kind": "remote", "message": str(exc)})

    def _handle(self, data: bytes, key, principal) -> bytes:
        try:
            method = decode(data)[0]
        except Exception:  # noqa: BLE001  (the server answers a malformed message with its own error)
            method = None
        if method not in ("forward", "backward"):  # hello, save, generation: this client alone (the server locks)
            return self.server.handle_bytes(data, principal)
        with self._cv:
            self._pending[key] = (data, principal)
            if len(self._pending) == self.n:
                order = sorted(self._pending)
                try:
                    owners = [self._owner(k) for k in order]
                    replies = self.server.handle_batch([self._pending[k][0] for k in order], owners=owners)
                    self._replies.update(zip(order, replies))
                except BaseException as exc:  # noqa: BLE001  (every waiting client must learn of it)
                    self._error = exc
                self._pending = {}
                self._cv.notify_all()
            elif not self._cv.wait_for(lambda: key in self._replies or self._error is not None, self.timeout):
                self._pending.pop(key, None)
                raise PeerDisconnected(f"client-batch step timed out waiting for the other clients ({self.n})")
            if self._error is not None:  # sticky: a failed batch step fails every client of the run
                raise self._error
            return self._replies.pop(key)

    def _owner(self, key) -> str:
        principal = self._pending[key][1]
        return principal.name if principal is not None else str(key)


class HierarchicalSync:
    """Server-hierarchical mode over a shared handler: FedAvg of the sub-servers every `sync_every` steps of each
    of `num_clients` clients, the fast ones waiting for the slow ones at each round boundary.

    Args:
        server ([`SplitServer`]): built with `hierarchical=True`.
        num_clients (`int`): clients taking part (`M`).
        sync_every (`int`): local steps between averages.
        timeout (`float`): seconds a client waits at a boundary.
    """

    def __init__(self, server: SplitServer, num_clients: int, sync_every: int, timeout: float = 120.0):
        if not server.hierarchical:
            raise ValueError("HierarchicalSync needs a SplitServer(hierarchical=True)")
        self.server, self.n, self.sync_every, self.timeout = server, int(num_clients), int(sync_every), timeout
        self._cv = threading.Condition()
        self._steps: dict[str, int] = {}
        self.rounds = 0

    def handle_bytes(self, data: bytes, principal=None) -> bytes:
        # The step itself runs outside the condition: each client's sub-server has its own lock, so the clients'
        # forwards and backwards compute in parallel; only the round bookkeeping and the FedAvg are serialised.
        reply = self.server.handle_bytes(data, principal)
        try:
            method, _, meta = decode(data)
        except Exception:  # noqa: BLE001  (the server already answered the malformed message)
            return reply
        if method != "backward" or decode(reply)[0] == "error":
            return reply
        owner = principal.name if principal is not None else str(meta.get("client_id", "0"))
        with self._cv:
            done = self._steps[owner] = self._steps.get(owner, 0) + 1
            if done % self.sync_every:
                return reply
            target = done // self.sync_every
            arrived = lambda: len(self._steps) == self.n and min(self._steps.values()) >= done  # noqa: E731
            if arrived():
                self.server.aggregate()  # every other client waits at this boundary: no sub-server is mid-step
                self.rounds = target
                self._cv.notify_all()
            elif not self._cv.wait_for(lambda: self.rounds >= target, self.timeout):
                return encode(
                    "error",
                    meta={
                        "kind": "remote",
                        "message": f"server-hierarchical round {target} "
                        f"timed out waiting for the other clients ({self.n})",
                    },
                )
            return reply


__all__ = ["ClientBatchHub", "HierarchicalSync"]
