"""Training FL-LLaMA: set-ups for one or many clients, the three parallel modes, the centralized reference, evaluation,
and the `hf-ext fl_llama train` entry point.

Modes (appendix of arXiv 2505.15683):
* sequential: clients take turns; each runs all its local steps before the next one starts.
* client-batch: in every step the server waits for all clients' `h̃_A`, concatenates them on the batch axis, runs one
  forward/backward and one optimiser step of B, and returns each client's slice (clients run in threads).
* server-hierarchical: one sub-server copy `B_m` per client; the pairs train in parallel (threads) and the server
  FedAvg-averages the sub-servers every `sync_every` steps (optionally also the clients' parts).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import threading
import time
from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hf_ext.core.paths import work_dir

from .arguments import FlLlamaTrainingArguments, PartOptimizer
from .modeling_fl_llama import FlLlamaClientModel, causal_mask_4d, position_ids_from_mask, split_llama
from .parallel import ClientBatchHub
from .server import SplitServer
from .split_model import FlLlamaSplitForCausalLM
from .transport import InProcessTransport, TrafficStats

MODES = ("sequential", "client_batch", "server_hierarchical")


def tiny_llama(vocab_size: int = 1000, hidden_size: int = 64, num_layers: int = 6, num_heads: int = 4,
               max_positions: int = 1280, seed: int = 0, pad_token_id: int = 0) -> LlamaForCausalLM:  # fmt: skip
    """A randomly initialised small `LlamaForCausalLM` (the spec's offline stand-in for LLaMA-2)."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=hidden_size * 2,
                      num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_heads // 2,
                      max_position_embeddings=max_positions, pad_token_id=pad_token_id, bos_token_id=1,
                      eos_token_id=2)  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


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


@torch.no_grad()
def evaluate(split: FlLlamaSplitForCausalLM, data: dict[str, torch.Tensor], yes_id: int, no_id: int,
             batch_size: int = 32, logits_to_keep: int = 0) -> dict:  # fmt: skip
    """Yes/no accuracy (is the `yes` logit above the `no` logit at the answer position), the share of `yes`
    predictions (1.0 or 0.0 means a constant predictor), the mean answer loss, and the ROC AUC of the margin
    `logit(yes) − logit(no)` against the label — threshold-free, so it still ranks examples when every prediction
    falls on one side (0.5 = chance)."""
    split.client.eval()
    correct, yes_count, loss_sum, n = 0, 0, 0.0, len(data["input_ids"])
    margins = []
    for i in range(0, n, batch_size):
        sl = slice(i, i + batch_size)
        out = split(
            data["input_ids"][sl], data["attention_mask"][sl], data["labels"][sl], logits_to_keep=logits_to_keep
        )
        margin = out.logits[:, -2, yes_id] - out.logits[:, -2, no_id]
        pred = (margin > 0).long()
        margins.append(margin.float())
        correct += int((pred == data["label"][sl]).sum())
        yes_count += int(pred.sum())
        loss_sum += float(out.loss) * len(pred)
    auc = margin_auc(torch.cat(margins), data["label"][:n])
    return {"accuracy": correct / n, "yes_rate": yes_count / n, "loss": loss_sum / n, "auc": auc}


def margin_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC by the Mann-Whitney U statistic (ties count one half); NaN when only one class is present."""
    pos, neg = scores[labels.bool()], scores[~labels.bool()]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).float() + 0.5 * (diff == 0).float()).mean())


@torch.no_grad()
def mean_abs_hidden(client: FlLlamaClientModel, data: dict[str, torch.Tensor], num_input_blocks: int) -> float:
    """mean |h_A| over real tokens at depth `a` (the scale the noise is chosen relative to)."""
    a0 = client.config.num_input_blocks
    client.config.num_input_blocks = num_input_blocks
    try:
        mask = data["attention_mask"].bool()
        h = client.head(data["input_ids"], causal_mask_4d(mask, mask.shape[1]), position_ids_from_mask(mask))
        return float(h.abs()[mask].mean())
    finally:
        client.config.num_input_blocks = a0


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext fl_llama train", description=main.__doc__)
    p.add_argument("--a", type=int, default=1, help="client input blocks")
    p.add_argument("--c", type=int, default=1, help="client output blocks")
    p.add_argument("--noise-scale", type=float, default=0.0, help="s (σ = s·sqrt(π/2))")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument(
        "--out",
        default=str(work_dir("fl_llama", "artifact")),
        help="writes OUT/client and OUT/server, each with its training_record.json (`hf-ext push "
        "fl_llama` publishes both, as the Space loads them; one party's part alone with `--from "
        "OUT/client`)",
    )
    return p


TRAIN_PASSAGES, VAL_PASSAGES = 120, 20


def main(argv: list[str] | None = None) -> dict:
    """`hf-ext fl_llama train`: split training of a tiny random Llama on MultiRC (in-process: server and client in
    this process; `hf-ext fl_llama serve` + `hf-ext fl_llama client` run them apart over gRPC); saves the client's
    and the server's parts, each with the run's training record."""
    import shlex
    import sys

    from hf_ext.core.records import metric

    from .artifacts import save_parts
    from .data import answer_token_ids, corpus, encode_cloze, iter_batches, load_multirc, train_tokenizer

    argv = sys.argv[1:] if argv is None else list(argv)
    ns = make_parser().parse_args(argv)
    torch.set_num_threads(1)  # intra-op threads spin-wait on a busy 2-core machine
    train_ex, val_ex = load_multirc("train", limit=TRAIN_PASSAGES), load_multirc("val", limit=VAL_PASSAGES)
    tok = train_tokenizer(corpus(train_ex, 60))
    model = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    args = FlLlamaTrainingArguments(learning_rate=ns.lr, max_steps=ns.steps)
    # store 3 + 3 client blocks so the saved parts can be re-partitioned up to a, c = 3 (the Space does)
    setup = build_setup(model, ns.a, ns.c, ns.noise_scale, args=args, client_stored_blocks=max(3, ns.a, ns.c))
    data = encode_cloze(tok, train_ex)
    result = train(setup, [list(iter_batches(data, ns.batch_size, steps=ns.steps))])
    metrics = evaluate(setup.clients[0], encode_cloze(tok, val_ex), *answer_token_ids(tok))
    losses = result["losses"][0]
    name = "multirc"
    record = {
        "command": "hf-ext fl_llama train" + (" " + shlex.join(argv) if argv else ""),
        "datasets": [
            {
                "name": name,
                "hub_id": None,
                "description": (
                    "MultiRC (SuperGLUE) yes/no cloze prompts, read locally from the FedSEA-LLaMA repository's "
                    "JSONL files: "
                    f"the first {TRAIN_PASSAGES} training passages ({len(train_ex)} answer options) for training, "
                    "the first "
                    f"{VAL_PASSAGES} validation passages ({len(val_ex)} options) for the metrics"
                ),
            }
        ],
        "metrics": [
            metric("final training loss", "loss", losses[-1], split="train", dataset=name, higher_is_better=False),
            metric(
                "validation answer loss",
                "loss",
                metrics["loss"],
                split="validation",
                dataset=name,
                higher_is_better=False,
            ),
            metric(
                "validation accuracy",
                "accuracy",
                metrics["accuracy"],
                split="validation",
                dataset=name,
                higher_is_better=True,
            ),
            metric(
                "validation AUC", "roc_auc", metrics["auc"], split="validation", dataset=name, higher_is_better=True
            ),
        ],
        "config": {
            "a": ns.a,
            "c": ns.c,
            "noise_scale": ns.noise_scale,
            "steps": len(losses),
            "batch_size": ns.batch_size,
            "training_arguments": args.to_dict(),
            "transport": "in-process",
            "model": {
                k: model.config.to_dict()[k]
                for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
            },
            "validation_yes_rate": metrics["yes_rate"],
        },
        "notes": (
            f"{len(losses)} split-training steps of a tiny random Llama from scratch (a small demonstration run, "
            "not the paper's fine-tuning)"
        ),
        "skip_nonfinite": True,  # the AUC is NaN when the validation slice holds one class only
    }
    save_parts(setup.clients[0].client, setup.server.model, ns.out, tokenizer=tok, record=record)
    print(f"final loss {losses[-1]:.4f}  val accuracy {metrics['accuracy']:.3f}  -> {ns.out}")
    return {"losses": result["losses"], **metrics}


__all__ = ["MODES", "ClientBatchHub", "SplitSetup", "build_setup", "evaluate", "main", "make_parser",
           "mean_abs_hidden", "tiny_llama", "train", "train_centralized"]  # fmt: skip
