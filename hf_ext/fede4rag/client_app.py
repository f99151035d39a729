"""FedE4RAG Flower ClientApp: thin; routes messages to [`~hf_ext.fede4rag.task.FedE4RAGClient`].

The node's `partition-id` picks its company. A `query` message answers the client's data size and adapter size (for
the server's size-proportional sampling and ciphertext checks). A `train` message carries the global adapter: empty
in round 1 (every client starts from the same seeded adapter), in clear, or as CKKS ciphertexts that the client
decrypts with the secret context. The reply carries only the new adapter, encrypted when `encrypt` is on.

Key separation by construction: the secret context's path comes from this SuperNode's *node config*
(`he-secret-path`, e.g. `flower-supernode --node-config "partition-id=0 he-secret-path='/keys/secret.ctx'"`), which
stays on the client side; the run config is also sent to the ServerApp, so a secret named there is refused here
too. The public context's path (`he-public-path`) may be in either. A global adapter from the server is checked
before use (the client's own adapter names and shapes, finite, bounded): a NaN or huge global is refused, not
trained on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from hf_ext.core.federated import DEFAULT_MAX_ABS, arrays_to_state_dict, state_dict_to_arrays

from .he import ClientCipher, flatten_state, make_keys, unflatten_state
from .strategy import CHUNK_PREFIX, chunks_to_record, record_to_chunks
from .encoder import adapter_arrays
from .task import FedE4RAGClient, RunConfig, build_model, client_pairs

app = ClientApp()


def _cipher(context: Context) -> ClientCipher:
    named = sorted(k for k in context.run_config if "secret" in str(k).lower())
    if named:
        raise ValueError(f"the run config names {named}: the server receives the run config, so the secret "
                         "context belongs in this SuperNode's node config only ('he-secret-path')")
    secret = context.node_config.get("he-secret-path")
    public = context.node_config.get("he-public-path", context.run_config.get("he-public-path"))
    if not secret or not public:
        raise ValueError("encrypt is on but this node has no 'he-secret-path' in its node config (or no "
                         "'he-public-path' in its node or run config)")
    return ClientCipher(Path(str(secret)).read_bytes(), Path(str(public)).read_bytes())


def _checked(state: dict, what: str) -> dict:
    for key, value in state.items():
        value = np.asarray(value)
        if not np.isfinite(value).all():
            raise ValueError(f"the global adapter from the server ({what}) holds NaN or Inf in {key!r}: refusing "
                             "to train on it")
        if value.size and not float(np.abs(value).max()) < DEFAULT_MAX_ABS:
            raise ValueError(f"the global adapter from the server ({what}) has |{key}| up to "
                             f"{float(np.abs(value).max()):.3g}, the bound is < {DEFAULT_MAX_ABS:.3g}")
    return state


def _global_state(record: ArrayRecord, client: FedE4RAGClient, context: Context):
    if not isinstance(record, ArrayRecord):
        raise ValueError(f"the server's 'arrays' record is a {type(record).__name__}, not an ArrayRecord")
    if len(record.keys()) == 0:
        return None  # round 1: the common seeded adapter
    reference = client.get_state()
    if any(k.startswith(CHUNK_PREFIX) for k in record.keys()):
        flat, layout = flatten_state(reference)
        return _checked(unflatten_state(_cipher(context).decrypt(record_to_chunks(record), flat.size), layout),
                        "decrypted")
    return _checked({k: v.numpy() for k, v in arrays_to_state_dict(record, reference=reference).items()}, "clear")


@app.query()
def query(msg: Message, context: Context) -> Message:
    run = RunConfig.from_run_config(context.run_config)
    pairs = client_pairs(int(context.node_config["partition-id"]), run)  # no training: no caches needed
    n_params = sum(v.size for v in adapter_arrays(build_model(run)[0]).values())
    return Message(RecordDict({"metrics": MetricRecord({"num-examples": len(pairs),
                                                        "num-params": int(n_params)})}), reply_to=msg)


@app.train()
def train(msg: Message, context: Context) -> Message:
    run = RunConfig.from_run_config(context.run_config)
    pid = int(context.node_config["partition-id"])
    client = FedE4RAGClient(pid, run)
    client.rounds_done = int(msg.content["config"].get("server-round", 1)) - 1
    if "arrays" not in msg.content:
        raise ValueError("the server's train message carries no 'arrays' record")
    state = client.fit(_global_state(msg.content["arrays"], client, context))
    metrics = {"num-examples": client.num_examples, "partition-id": pid,
               **{f"loss-{k}": float(v) for k, v in client.last_loss.items()}}
    content = {"metrics": MetricRecord(metrics)}
    if run.encrypt:
        flat, _ = flatten_state(state)
        cipher = _cipher(context)
        if pid == int(context.run_config.get("foreign-key-partition", -1)):  # tests: a client under another key
            keys = make_keys()
            cipher = ClientCipher(keys.secret, keys.public)
        chunks = cipher.encrypt(flat)
        if pid == int(context.run_config.get("corrupt-partition", -1)):  # tests: bytes that do not deserialise
            chunks = [b"\x00corrupt" + blob[:64] for blob in chunks]
        # one Array per ciphertext (~324 KiB at N = 8192); Flower 1.42 pushes every array as <= 5 MiB chunks, one
        # gRPC call each, so an upload larger than the 512 MiB gRPC limit (the full encoder, ~1.7 GiB) still travels
        content["arrays"] = chunks_to_record(chunks)
        content["he"] = ConfigRecord({"context-id": cipher.context_id})
    else:
        if pid == int(context.run_config.get("corrupt-partition", -1)):
            state = {k: np.full_like(v, np.nan) for k, v in state.items()}
        content["arrays"] = state_dict_to_arrays(state)
    return Message(RecordDict(content), reply_to=msg)
