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

import functools
import time
from pathlib import Path

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from hf_ext.core.federated import DEFAULT_MAX_ABS, arrays_to_state_dict, state_dict_to_arrays

from .encoder import adapter_arrays
from .he import ClientCipher, flatten_state, make_keys, unflatten_state
from .strategy import CHUNK_PREFIX, chunks_to_record, record_to_chunks
from .task import FedE4RAGClient, RunConfig, build_model, client_pairs

app = ClientApp()


def _cipher(context: Context) -> ClientCipher:
    named = sorted(k for k in context.run_config if "secret" in str(k).lower())
    if named:
        raise ValueError(
            f"the run config names {named}: the server receives the run config, so the secret "
            "context belongs in this SuperNode's node config only ('he-secret-path')"
        )
    secret = context.node_config.get("he-secret-path")
    public = context.node_config.get("he-public-path", context.run_config.get("he-public-path"))
    if not secret or not public:
        raise ValueError(
            "encrypt is on but this node has no 'he-secret-path' in its node config (or no "
            "'he-public-path' in its node or run config)"
        )
    return ClientCipher(Path(str(secret)).read_bytes(), Path(str(public)).read_bytes())


def _checked(state: dict, what: str) -> dict:
    """The global adapter from the server, refused when non-finite or out of bounds (the core guard's checks)."""
    from hf_ext.core.federated.guard import array_problem

    for key, value in state.items():
        value = np.asarray(value)
        problem = array_problem(key, value, (value.shape, value.dtype), DEFAULT_MAX_ABS)
        if problem:
            raise ValueError(f"the global adapter from the server ({what}) is refused: {problem}")
    return state


@functools.lru_cache(maxsize=2)
def _shared_model(run: RunConfig):
    """One model per run config and process, shared by the clients this process serves (a Ray actor serves
    several nodes, round after round): every `train` loads an adapter into it before training, so nothing but that
    adapter carries over. Also returns the seeded round-0 adapter."""
    model, tokenizer = build_model(run)
    return model, tokenizer, adapter_arrays(model)


@functools.lru_cache(maxsize=8)
def _client(run: RunConfig, company: int) -> FedE4RAGClient:
    model, tokenizer, _ = _shared_model(run)
    return FedE4RAGClient(company, run, model, tokenizer)


def _global_state(record: ArrayRecord, client: FedE4RAGClient, context: Context) -> tuple[dict, float]:
    """The adapter this round starts from (and the seconds spent decrypting it)."""
    if not isinstance(record, ArrayRecord):
        raise ValueError(f"the server's 'arrays' record is a {type(record).__name__}, not an ArrayRecord")
    if len(record.keys()) == 0:
        return _shared_model(client.run)[2], 0.0  # round 1: the common seeded adapter, not what the model holds
    reference = _shared_model(client.run)[2]
    if any(k.startswith(CHUNK_PREFIX) for k in record.keys()):
        flat, layout = flatten_state(reference)
        t0 = time.perf_counter()
        values = _cipher(context).decrypt(record_to_chunks(record), flat.size)
        return _checked(unflatten_state(values, layout), "decrypted"), time.perf_counter() - t0
    return _checked({k: v.numpy() for k, v in arrays_to_state_dict(record, reference=reference).items()}, "clear"), 0.0


def _company(run: RunConfig, context: Context) -> int:
    pid = int(context.node_config["partition-id"])
    if not 0 <= pid < len(run.companies):
        raise ValueError(
            f"partition-id {pid} has no company: the run has {len(run.companies)} clients "
            f"(client-companies {run.companies})"
        )
    return run.companies[pid]


@app.query()
def query(msg: Message, context: Context) -> Message:
    run = RunConfig.from_run_config(context.run_config)
    pairs = client_pairs(_company(run, context), run)  # no training: no caches needed
    n_params = sum(v.size for v in _shared_model(run)[2].values())
    return Message(
        RecordDict({"metrics": MetricRecord({"num-examples": len(pairs), "num-params": int(n_params)})}), reply_to=msg
    )


@app.train()
def train(msg: Message, context: Context) -> Message:
    run = RunConfig.from_run_config(context.run_config)
    if "client-threads" in context.run_config:  # simulation: one CPU per actor
        torch.set_num_threads(max(1, int(context.run_config["client-threads"])))
    pid = int(context.node_config["partition-id"])
    client = _client(run, _company(run, context))
    client.rounds_done = int(msg.content["config"].get("server-round", 1)) - 1
    if "arrays" not in msg.content:
        raise ValueError("the server's train message carries no 'arrays' record")
    start, decrypt_s = _global_state(msg.content["arrays"], client, context)
    state = client.fit(start)
    metrics = {
        "num-examples": client.num_examples,
        "partition-id": pid,
        "num-steps": client.last_steps,
        "decrypt-s": decrypt_s,
        **{f"loss-{k}": float(v) for k, v in client.last_loss.items()},
    }
    content = {}
    if run.encrypt:
        flat, _ = flatten_state(state)
        cipher = _cipher(context)
        if pid == int(context.run_config.get("foreign-key-partition", -1)):  # tests: a client under another key
            keys = make_keys()
            cipher = ClientCipher(keys.secret, keys.public)
        t0 = time.perf_counter()
        chunks = cipher.encrypt(flat)
        metrics["encrypt-s"] = time.perf_counter() - t0
        metrics["bytes-up"] = sum(len(c) for c in chunks)
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
        metrics["bytes-up"] = int(sum(v.nbytes for v in state.values()))
    content["metrics"] = MetricRecord(metrics)
    return Message(RecordDict(content), reply_to=msg)
