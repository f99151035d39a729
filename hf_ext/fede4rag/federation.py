"""The in-process federation `reproduce` runs: the same client code and the same aggregation as the Flower apps
([`~hf_ext.fede4rag.strategy`] averages with `hf_ext.core.federated.weighted_average`, uniform weights; CKKS with
[`~hf_ext.fede4rag.he.ServerAggregator`]), without rebuilding a model per message.

The clients share one model object: each round a client loads the global adapter, trains, and hands back its adapter,
so no state other than the adapter survives between rounds (as in the code, where every round re-creates the
optimiser).
"""

from __future__ import annotations

import random
import time
import numpy as np
from flwr.app import Array, ArrayRecord

from hf_ext.core.federated import weighted_average

from .data import COMPANIES
from .encoder import adapter_arrays, load_trainable_state
from .he import ClientCipher, ServerAggregator, flatten_state, make_keys, unflatten_state
from .task import FedE4RAGClient, RunConfig, build_model, with_setting


def plain_mean(states: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Uniform FedAvg through the shared Flower glue (`weighted_average` with equal weights)."""
    records = [ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in s.items()}) for s in states]
    avg = weighted_average(records, [1.0] * len(records))
    return {k: avg[k].numpy() for k in states[0]}


class EncryptedRound:
    """One key set-up (secret context to clients, public context to the server) and per-round CKKS averaging with
    its costs: client encrypt / server aggregate / client decrypt seconds, bytes uploaded, max error vs plaintext."""

    def __init__(self):
        self.keys = make_keys()
        self.cipher = ClientCipher(self.keys.secret, self.keys.public)
        self.server = ServerAggregator(self.keys.public)
        self.costs: list[dict[str, float]] = []

    def average(self, states: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        flats = [flatten_state(s) for s in states]
        layout = flats[0][1]
        t0 = time.perf_counter()
        uploads = {str(i): (self.cipher.encrypt(flat), self.cipher.context_id) for i, (flat, _) in enumerate(flats)}
        t1 = time.perf_counter()
        n_chunks = len(uploads["0"][0])
        chunks, rejected = self.server.average(uploads, n_chunks, size=flats[0][0].size)
        if rejected or chunks is None:
            raise RuntimeError(f"honest clients were rejected: {rejected}")
        t2 = time.perf_counter()
        flat = self.cipher.decrypt(chunks, flats[0][0].size)
        t3 = time.perf_counter()
        plain = np.mean([f for f, _ in flats], axis=0)
        self.costs.append({
            "encrypt_s_per_client": (t1 - t0) / len(states), "aggregate_s": t2 - t1, "decrypt_s": t3 - t2,
            "bytes_up_per_client": float(np.mean([sum(len(b) for b in u[0]) for u in uploads.values()])),
            "bytes_down": float(sum(len(b) for b in chunks)), "ciphertexts_per_client": n_chunks,
            "max_abs_error": float(np.abs(flat - plain).max()),
        })
        return unflatten_state(flat, layout)


def run_setting(setting: str, run: RunConfig, evaluator) -> dict:
    """Trains one of the settings and returns its test metrics (and, per setting, extra records)."""
    run = with_setting(run, setting)
    model, tokenizer = build_model(run)
    out: dict = {"setting": setting, "seed": run.seed}
    if setting == "zero-shot":  # LoRA B = 0: the adapter is the identity, this is MiniLM as released
        out["metrics"] = evaluator.evaluate(model)
        return out
    init_state = adapter_arrays(model)
    if setting == "centralized":
        client = FedE4RAGClient(None, run, model, tokenizer)
        for _ in range(run.rounds):
            client.fit(kd=False)
        out["metrics"] = evaluator.evaluate(model)
        out["num_examples"] = client.num_examples
        return out
    clients = [FedE4RAGClient(i, run, model, tokenizer) for i in range(len(COMPANIES))]
    if setting == "local-only":  # each company alone for as many epochs; scored one by one, then averaged
        per_client = {}
        for c in clients:
            c.set_state(init_state)
            for _ in range(run.rounds):
                c.fit(kd=False)
            per_client[COMPANIES[c.partition]] = evaluator.evaluate(model)
        out["per_client"] = per_client
        out["metrics"] = {k: float(np.mean([m[k] for m in per_client.values()])) for k in next(iter(
            per_client.values()))}
        return out
    kd = run.kd_lambda > 0
    rng = random.Random(run.seed)
    he = EncryptedRound() if run.encrypt else None
    global_state, sampled = init_state, []
    for _ in range(run.rounds):
        chosen = clients
        if run.one_client:  # FLGo "md" sampling with proportion 0.2 of 5 clients: one client ∝ data size
            chosen = rng.choices(clients, weights=[c.num_examples for c in clients], k=1)
        sampled.append([COMPANIES[c.partition] for c in chosen])
        states = [c.fit(global_state, kd=kd) for c in chosen]
        global_state = he.average(states) if he is not None else plain_mean(states)
    load_trainable_state(model, global_state)
    out["metrics"] = evaluator.evaluate(model)
    out["sampled"] = sampled
    if he is not None:
        out["he_costs"] = he.costs
    out["adapter"] = global_state
    return out


def final_model(run: RunConfig, state):
    """The run's model with `state` loaded in its adapter."""
    model, tokenizer = build_model(run)
    load_trainable_state(model, state)
    return model, tokenizer


__all__ = ["EncryptedRound", "final_model", "plain_mean", "run_setting"]
