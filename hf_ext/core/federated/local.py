"""The in-process runner: [`LocalGrid`] and [`run_local`] (part of [`hf_ext.core.federated`])."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from hf_ext.core.federated.results import Record

# --- In-process Grid --------------------------------------------------------------------------------------------------


class ClientAppError(RuntimeError):
    """A `ClientApp` raised while a [`LocalGrid`] ran it; the original exception is the `__cause__`."""


def _set_task_identity(run_id: int) -> None:
    # PRIVATE in Flower 1.42: `Message(...)` reads its run, source node and task ids from this process-wide
    # identity, which the real runtimes set. A ServerApp speaks as the SuperLink node (id 1).
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, 1


class LocalGrid(Grid):
    """An in-process `flwr.serverapp.Grid` that calls the `ClientApp` directly: no Ray, no sockets, deterministic.

    Messages are deep-copied on the way to and from a `ClientApp`, as the wire would, so clients never share
    objects with the server or with each other. Nodes have ids `101, 102, ...` and the node configs
    `{"partition-id": i, "num-partitions": num_nodes}` (plus `node_configs[i]`). Each node keeps its `Context`
    across messages, as a SuperNode does. `ClientApp`s run one after another in node order, whatever order a strategy
    sampled them in, and `send_and_receive` returns the replies in node order.

    Args:
        client_app (`ClientApp`): the app every node runs.
        num_nodes (`int`): number of nodes.
        node_configs (`Sequence[Mapping]`, *optional*): extra node config per node (overrides the defaults).
        run_config (`Mapping`, *optional*): the run config every node's context gets.
        client_errors (`str`, defaults to `"raise"`): `"raise"` turns a `ClientApp` exception into a
            [`ClientAppError`] naming the node (clear test failures); `"reply"` sends back an error reply as
            Flower's runtimes do, to test how a strategy handles failures.
        run_id (`int`, defaults to `1`): the run id of every context and message.
    """

    first_node_id = 101

    def __init__(
        self,
        client_app: ClientApp,
        num_nodes: int,
        *,
        node_configs: Sequence[Mapping[str, Any]] | None = None,
        run_config: Mapping[str, Any] | None = None,
        client_errors: str = "raise",
        run_id: int = 1,
    ) -> None:
        from flwr.supercore.run import Run

        if num_nodes < 1:
            raise ValueError(f"num_nodes must be at least 1, got {num_nodes}")
        if node_configs is not None and len(node_configs) != num_nodes:
            raise ValueError(f"{len(node_configs)} node_configs for {num_nodes} nodes")
        if client_errors not in ("raise", "reply"):
            raise ValueError(f"client_errors must be 'raise' or 'reply', got {client_errors!r}")
        self.client_app = client_app
        self.client_errors = client_errors
        self._run = Run.create_empty(run_id=run_id)
        self.contexts: dict[int, Context] = {}
        extra_configs = node_configs or [{}] * num_nodes
        for i in range(num_nodes):
            node_config = {"partition-id": i, "num-partitions": num_nodes, **dict(extra_configs[i])}
            self.contexts[self.first_node_id + i] = Context(
                run_id=run_id,
                node_id=self.first_node_id + i,
                node_config=node_config,
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
        self._replies: dict[str, Message] = {}
        self._counter = itertools.count(1)
        _set_task_identity(run_id)

    def set_run(self, run: Any) -> None:
        self._run = run

    @property
    def run(self) -> Any:
        return self._run

    def create_message(
        self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str, ttl: float | None = None
    ) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> list[str]:
        from flwr.common.constant import ErrorCode

        messages = list(messages)
        for message in messages:
            if message.metadata.dst_node_id not in self.contexts:
                raise ValueError(
                    f"message addressed to unknown node {message.metadata.dst_node_id} (nodes: {self.get_node_ids()})"
                )
        ids = [f"local-{next(self._counter)}" for _ in messages]
        # Strategies sample nodes in random order; running them in node order keeps runs (and failures) reproducible.
        for index in sorted(range(len(messages)), key=lambda i: (messages[i].metadata.dst_node_id, i)):
            message, node_id = messages[index], messages[index].metadata.dst_node_id
            # Message ids are read-only; Flower's own InMemoryGrid sets them the same way.
            message.metadata.__dict__["_message_id"] = ids[index]
            delivered = copy.deepcopy(message)
            context = self.contexts[node_id]
            try:
                reply = self.client_app(delivered, context)
            except Exception as err:  # noqa: BLE001 (re-raised with the node named, or sent back as Flower does)
                if self.client_errors == "raise":
                    raise ClientAppError(
                        f"ClientApp on node {node_id} (partition-id {context.node_config.get('partition-id')}) "
                        f"raised on a {message.metadata.message_type!r} message: {type(err).__name__}: {err}"
                    ) from err
                reason = f"{type(err)}:<'{err}'>"
                reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason), reply_to=delivered)
            if not isinstance(reply, Message):
                raise ClientAppError(f"ClientApp on node {node_id} returned {type(reply).__name__}, not a Message")
            reply = copy.deepcopy(reply)
            reply.metadata.__dict__["_message_id"] = f"local-{next(self._counter)}"
            self._replies[ids[index]] = reply
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        return [self._replies.pop(i) for i in list(message_ids) if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        replies = self.pull_messages(self.push_messages(messages))
        return sorted(replies, key=lambda reply: reply.metadata.src_node_id)


def run_local(
    server_app: ServerApp,
    client_app: ClientApp,
    *,
    num_nodes: int,
    run_config: Mapping[str, Any] | None = None,
    node_configs: Sequence[Mapping[str, Any]] | None = None,
    client_errors: str = "raise",
) -> dict[str, Record]:
    """Run a `ServerApp` with its `ClientApp` on a [`LocalGrid`].

    Args:
        server_app (`ServerApp`): the server app.
        client_app (`ClientApp`): the client app of every node.
        num_nodes (`int`): number of nodes.
        run_config (`Mapping`, *optional*): run config of the server and of every node.
        node_configs (`Sequence[Mapping]`, *optional*): extra node config per node.
        client_errors (`str`, defaults to `"raise"`): see [`LocalGrid`].

    Returns:
        `dict[str, ArrayRecord | MetricRecord | ConfigRecord]`: the ServerApp's `context.state` at the end.
    """
    grid = LocalGrid(
        client_app, num_nodes, node_configs=node_configs, run_config=run_config, client_errors=client_errors
    )
    context = Context(
        run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(), run_config=dict(run_config or {})
    )
    server_app(grid, context)
    return dict(context.state)
