"""The multi-client modes of FL-LLaMA (appendix of arXiv 2505.15683) and the set-ups that run them in one process.

* sequential: clients take turns; each runs all its local steps before the next one starts.
* client-batch: in every step the server waits for all clients' `h̃_A`, concatenates them on the batch axis, runs one
  forward/backward and one optimiser step of B, and returns each client's slice (clients run in threads).
* server-hierarchical: one sub-server copy `B_m` per client; the pairs train in parallel (threads) and the server
  FedAvg-averages the sub-servers every `sync_every` steps (optionally also the clients' parts).

[`build_setup`] wires a server and its clients in one process (in-process transports, bytes still counted), [`train`]
runs a mode and [`train_centralized`] is the unsplit reference. The two parallel modes are message handlers in front
of a [`SplitServer`], for in-process threads and for several client processes over gRPC alike
(`hf-ext fl_llama serve --mode client_batch|server_hierarchical --clients M`).

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

import copy
import dataclasses
import threading
import time
from dataclasses import dataclass

from transformers import LlamaForCausalLM

from .arguments import FlLlamaTrainingArguments, PartOptimizer
from .modeling_fl_llama import position_ids_from_mask, split_llama
from .server import SplitServer
from .split_model import FlLlamaSplitForCausalLM
from .transport import InProcessTransport, PeerDisconnected, TrafficStats, decode, encode

MODES = ("sequential", "client_batch", "server_hierarchical")


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


@dataclass
class SplitSetup:
    """A server and its clients, all in one process (in-process transports, bytes still counted)."""

    server: SplitServer
    clients: list[FlLlamaSplitForCausalLM]

    @property
    def traffic(self) -> dict:
        total = TrafficStats()
        for c in self.clients:
            stats = c.transport.stats
            for m in stats.messages:
                total.messages[m] += stats.messages[m]
                total.sent[m] += stats.sent[m]
                total.received[m] += stats.received[m]
        return total.as_dict()

    def direct(self, index: int = 0) -> FlLlamaSplitForCausalLM:
        """Client `index`'s parts with a direct (non-batching) transport to the server, e.g. for evaluation."""
        c = self.clients[index]
        if isinstance(c.transport, InProcessTransport) and c.transport.handler == self.server.handle_bytes:
            return c
        return FlLlamaSplitForCausalLM(c.client, InProcessTransport(self.server.handle_bytes), c.args, c.client_id,
                                       c.compress_mask)  # fmt: skip


def build_setup(model: LlamaForCausalLM, num_input_blocks: int = 1, num_output_blocks: int = 1,
                noise_scale: float = 0.0, num_clients: int = 1, mode: str = "sequential",
                args: FlLlamaTrainingArguments | None = None, compress_mask: bool = True,
                **partition) -> SplitSetup:  # fmt: skip
    """Splits `model` and wires a server to `num_clients` clients (each with its own copy of parts A and C)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    args = args or FlLlamaTrainingArguments()
    client_model, server_model = split_llama(model, num_input_blocks, num_output_blocks, noise_scale=noise_scale,
                                             **partition)  # fmt: skip
    server = SplitServer(server_model, args, hierarchical=(mode == "server_hierarchical"))
    hub = ClientBatchHub(server, num_clients) if mode == "client_batch" else None
    clients = []
    for m in range(num_clients):
        transport = InProcessTransport(hub.handler(m) if hub else server.handle_bytes)
        client_args = dataclasses.replace(args, seed=args.seed + m)  # each client draws its own noise
        clients.append(FlLlamaSplitForCausalLM(copy.deepcopy(client_model) if m else client_model, transport,
                                               client_args, client_id=str(m), compress_mask=compress_mask))  # fmt: skip
    return SplitSetup(server, clients)


def _average_clients(clients: list[FlLlamaSplitForCausalLM]) -> None:
    states = [c.client.state_dict() for c in clients]
    mean = {k: sum(s[k].double() for s in states).div(len(states)).to(states[0][k].dtype) for k in states[0]}
    for c in clients:
        c.client.load_state_dict(mean)


def train(setup: SplitSetup, client_batches: list[list[dict]], mode: str = "sequential", sync_every: int = 5,
          average_clients: bool = False, logits_to_keep: int = 0) -> dict:  # fmt: skip
    """Trains every client on its batches in `mode`; returns losses per client, wall time and traffic
    (`logits_to_keep=2`: the loss of a cloze answer at the last position only, see `FlLlamaClientModel.tail`)."""
    n = len(setup.clients)
    losses: list[list[float]] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def run(m: int, batches, barrier=None):
        try:
            for i, batch in enumerate(batches):
                losses[m].append(setup.clients[m].train_step(batch, logits_to_keep))
                if barrier is not None and (i + 1) % sync_every == 0:
                    barrier.wait()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            if barrier is not None:
                barrier.abort()

    start = time.perf_counter()
    if mode == "sequential":
        for m in range(n):
            run(m, client_batches[m])
    else:
        barrier = None
        if mode == "server_hierarchical":

            def sync():  # noqa: E306  (FedAvg of the sub-servers, optionally of the clients' parts)
                setup.server.aggregate()
                if average_clients:
                    _average_clients(setup.clients)

            barrier = threading.Barrier(n, action=sync)
        threads = [threading.Thread(target=run, args=(m, client_batches[m], barrier)) for m in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if mode == "server_hierarchical":
            setup.server.aggregate()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return {"losses": losses, "wall_s": wall, "traffic": setup.traffic}


def train_centralized(model: LlamaForCausalLM, batches: list[dict], args: FlLlamaTrainingArguments) -> list[float]:
    """The centralized reference: the same model, data order and AdamW/LinearLR, one optimiser for all parameters."""
    opt = PartOptimizer(model.parameters(), args)
    model.train()
    losses = []
    for b in batches:
        mask = b["attention_mask"]
        out = model(input_ids=b["input_ids"], attention_mask=mask, position_ids=position_ids_from_mask(mask),
                    labels=b["labels"])  # fmt: skip
        out.loss.backward()
        opt.step()
        losses.append(float(out.loss.detach()))
    return losses


__all__ = ["MODES", "ClientBatchHub", "HierarchicalSync", "SplitSetup", "build_setup", "train", "train_centralized"]
