"""Results of a run: [`save_result`] in a `ServerApp`, [`load_result`] in the runner (part of
[`hf_ext.core.federated`], whose docstring explains how results work on the three runners).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord

Record = ArrayRecord | MetricRecord | ConfigRecord

# Set by `LoopbackFederation` on the SuperLink; its ServerApp processes inherit it and `save_result` writes there.
RESULT_DIR_ENV = "HF_EXT_FLWR_RESULT_DIR"


# --- Results ----------------------------------------------------------------------------------------------------------


def save_result(context: Context, records: Mapping[str, Record] | None = None) -> None:
    """Store a `ServerApp`'s result; call it last in `main` so every runner returns the same records.

    Puts `records` into `context.state`. When `HF_EXT_FLWR_RESULT_DIR` is set (by [`LoopbackFederation`] on the
    SuperLink, whose ServerApp processes inherit it), also writes the whole `context.state` to
    `<dir>/result-<run_id>.pb`, for [`load_result`].

    Args:
        context (`Context`): the `ServerApp`'s context.
        records (`Mapping[str, ArrayRecord | MetricRecord | ConfigRecord]`, *optional*): records to store by name.
    """
    for name, record in (records or {}).items():
        context.state[name] = record
    target = os.environ.get(RESULT_DIR_ENV)
    if target:
        from flwr.common.serde import recorddict_to_proto

        path = Path(target) / f"result-{context.run_id}.pb"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(recorddict_to_proto(context.state).SerializeToString())
        os.replace(tmp, path)  # the runner never sees a half-written file


def load_result(path: str | os.PathLike) -> dict[str, Record]:
    """Read a result written by [`save_result`].

    Args:
        path (`str` or `os.PathLike`): the `.pb` file.

    Returns:
        `dict[str, ArrayRecord | MetricRecord | ConfigRecord]`: the ServerApp's `context.state`.
    """
    from flwr.common.serde import recorddict_from_proto
    from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict  # pylint: disable=no-name-in-module

    proto = ProtoRecordDict()
    proto.ParseFromString(Path(path).read_bytes())
    return dict(recorddict_from_proto(proto))
