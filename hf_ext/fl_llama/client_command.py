"""`hf-ext fl_llama client`: the client party as a command, training its parts A and C against a running
`hf-ext fl_llama serve` over gRPC on the user's own text.

```bash
hf-ext fl_llama split MODEL_DIR parts --a 1 --c 1            # or `hf-ext fl_llama train --out parts`
hf-ext fl_llama tokens toks --clients alice
hf-ext fl_llama serve parts/server --tokens toks/server_tokens.json --output-dir server_out &
hf-ext fl_llama client --address 127.0.0.1:PORT --token-file toks/clients/alice.token \\
    --client-dir parts/client --train-file my_text.txt --max-steps 100 --output-dir client_out
```

The client's parts come from a folder written by the split/save code (`--client-dir`, e.g. `parts/client`), or from
splitting a `LlamaForCausalLM` folder (`--model`) at the server's `(a, c)`; the `hello` handshake refuses any other
partition or model. Training text is never sent: each line of a `.txt` file (or the `--text-field` of each record of
a `.jsonl` file) is one example, tokenized by the client's tokenizer, truncated to `--max-length` tokens and
left-padded; only the noisy hidden states `h̃_A` and the gradients `g_B` cross the wire.

Every `--save-steps` and at the end the client asks the server to save (`save`: part B and its optimiser, to the
server's `--output-dir`) and writes its own resumable checkpoint `OUTPUT_DIR/checkpoint-<step>` (weights, both
optimisers, the noise generator, the server checkpoint's name). At the end it writes `OUTPUT_DIR/client`: the client's
artifact (safetensors, config, tokenizer, card) with its `training_record.json`, which `hf-ext push fl_llama --from
OUTPUT_DIR/client` publishes; with the server's checkpoint it merges into the trained `LlamaForCausalLM`
([`~hf_ext.fl_llama.modeling_fl_llama.merge_parts`]). `--resume-from OUTPUT_DIR/checkpoint-<step>` continues, with
the server restarted by `serve --resume-from` from the server checkpoint that checkpoint names.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import shutil
import sys
from pathlib import Path

from hf_ext.core.arguments import ArgumentParser

PROG = "hf-ext fl_llama client"


class ClientError(RuntimeError):
    """A failure the user can fix (no server, refused token or handshake, unusable data); `main` prints it as one
    line and exits with status 1."""


def make_parser() -> argparse.ArgumentParser:
    from .arguments import FlLlamaTrainingArguments

    p = ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("server")
    g.add_argument("--address", required=True, help="host:port of a running `hf-ext fl_llama serve`")
    g.add_argument("--token-file", help="this client's token (`hf-ext fl_llama tokens`: DIR/clients/<name>.token)")
    g.add_argument(
        "--client-id",
        help="this client's name (default: the token file's name; the server keys its "
        "state by the token's name, so this only names the client of an --insecure server)",
    )
    g.add_argument("--insecure", action="store_true", help="send no token (a loopback server run with --insecure)")
    g.add_argument("--tls-root-cert", help="PEM of the CA that signed the server's TLS certificate")
    g.add_argument("--connect-timeout", type=float, default=30.0, help="seconds to wait for the server at start")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per call")
    g = p.add_argument_group("model")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--client-dir", help="a saved FlLlamaClientModel (e.g. `hf-ext fl_llama split`'s OUT/client)")
    src.add_argument("--model", help="a LlamaForCausalLM folder to split here (the server splits the same one)")
    g.add_argument("--tokenizer", help="tokenizer folder (default: the client dir or the model)")
    g.add_argument("--a", type=int, help="client input blocks (default: the client dir's, or 1 with --model)")
    g.add_argument("--c", type=int, help="client output blocks (default: the client dir's, or 1 with --model)")
    g.add_argument("--client-stored-blocks", type=int, help="with --model: first/last blocks the client stores")
    g.add_argument(
        "--noise-scale",
        type=float,
        help="s: noise N(0, σ²), σ = s·sqrt(π/2), on every h_A sent (default: the client dir's, 0 with --model)",
    )
    g = p.add_argument_group("data and training")
    g.add_argument("--train-file", required=True, help="plain text (one example a line) or .jsonl (--text-field)")
    g.add_argument("--validation-file", help="same format; its LM loss is recorded as the artifact's metric")
    g.add_argument("--text-field", default="text", help="the field of a .jsonl record holding the text")
    g.add_argument("--max-steps", type=int, default=100, help="training steps (the server's schedule length too)")
    g.add_argument("--batch-size", type=int, default=8)
    g.add_argument(
        "--max-length",
        type=int,
        help="tokens per example, longer ones truncated (default: 128, or the "
        "model's max_position_embeddings when smaller)",
    )
    g.add_argument(
        "--learning-rate",
        type=float,
        default=FlLlamaTrainingArguments.learning_rate,
        help="AdamW of parts A and C (part B's is `serve --lr`)",
    )
    g.add_argument("--max-grad-norm", type=float, default=1.0, help="per-part clip; <= 0 disables it")
    g.add_argument("--seed", type=int, default=0, help="data order and the noise generator")
    g.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    g = p.add_argument_group("saving")
    g.add_argument("--output-dir", required=True, help="writes checkpoint-<step>/ and, at the end, client/")
    g.add_argument("--save-steps", type=int, default=0, help="also save both parties every N steps (0: at the end)")
    g.add_argument("--save-total-limit", type=int, default=2, help="client checkpoints kept in --output-dir")
    g.add_argument("--resume-from", help="a client checkpoint (OUTPUT_DIR/checkpoint-<step>) to continue from")
    return p


# ---- data ---------------------------------------------------------------------------------------------------------
def read_texts(path: str | Path, text_field: str = "text") -> list[str]:
    """The non-empty examples of a plain-text file (one a line) or a `.jsonl` / `.json` file (`text_field` of each
    record; a `.json` file may also be one list of records)."""
    path = Path(path)
    if not path.is_file():
        raise ClientError(f"{path} does not exist (--train-file / --validation-file)")
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ClientError(f"{path} is not UTF-8 text ({err})") from None
    if path.suffix.lower() not in (".jsonl", ".json"):
        return [line for line in raw.splitlines() if line.strip()]
    rows: list = []
    if path.suffix.lower() == ".json" and raw.lstrip().startswith("["):
        rows = json.loads(raw)
    else:
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ClientError(f"{path}:{n} is not a JSON record ({err.msg})") from None
    texts = []
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not isinstance(row.get(text_field), str):
            raise ClientError(f"{path}: record {n} has no string field {text_field!r} (set --text-field)")
        texts.append(row[text_field])
    return [t for t in texts if t.strip()]


def encode_texts(tokenizer, texts: list[str], max_length: int) -> dict:
    """Causal-LM examples of `texts`: token ids truncated to `max_length`, left-padded to the longest example, the
    labels equal to the ids (`-100` on pads). Examples of fewer than 2 tokens (nothing to predict) are dropped."""
    import torch

    pad = next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)
    rows = [tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    rows = [r for r in rows if len(r) >= 2]
    if not rows:
        return {}
    length = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (length - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (length - len(r)) + [1] * len(r) for r in rows])
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def load_examples(path: str | Path, tokenizer, max_length: int, text_field: str = "text") -> dict:
    """[`read_texts`] + [`encode_texts`]; a file without a usable example is a [`ClientError`] naming it."""
    texts = read_texts(path, text_field)
    data = encode_texts(tokenizer, texts, max_length)
    if not data:
        raise ClientError(
            f"{path} holds no training text: {len(texts)} non-empty example(s), none of at least 2 "
            "tokens (a .txt file has one example a line; a .jsonl file one record a line)"
        )
    return data


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---- model and server ---------------------------------------------------------------------------------------------
def load_client(ns):
    """`(client part, tokenizer)` from `--client-dir`, or by splitting `--model` at `(--a, --c)`."""
    import torch
    from transformers import AutoTokenizer

    from .modeling_fl_llama import FlLlamaClientModel, split_llama

    source = ns.client_dir or ns.model
    if ns.client_dir:
        if not (Path(ns.client_dir) / "config.json").is_file():
            raise ClientError(f"--client-dir {ns.client_dir} is not a saved FlLlamaClientModel (no config.json)")
        try:
            client = FlLlamaClientModel.from_pretrained(ns.client_dir)
            cfg = client.config
            client.set_partition(cfg.num_input_blocks if ns.a is None else ns.a,
                                 cfg.num_output_blocks if ns.c is None else ns.c)  # fmt: skip
        except (OSError, ValueError) as err:
            raise ClientError(f"--client-dir {ns.client_dir}: {err}") from None
    else:
        from transformers import LlamaForCausalLM

        try:
            model = LlamaForCausalLM.from_pretrained(ns.model, dtype=torch.float32)
            client, _ = split_llama(model, 1 if ns.a is None else ns.a, 1 if ns.c is None else ns.c,
                                    client_stored_blocks=ns.client_stored_blocks)  # fmt: skip
        except (OSError, ValueError) as err:
            raise ClientError(f"cannot split --model {ns.model}: {err}") from None
    if ns.noise_scale is not None:
        if not ns.noise_scale >= 0:
            raise ClientError(f"--noise-scale must be >= 0, got {ns.noise_scale}")
        client.config.noise_scale = float(ns.noise_scale)
    try:
        tokenizer = AutoTokenizer.from_pretrained(ns.tokenizer or source)
    except (OSError, ValueError, TypeError) as err:
        where = ns.tokenizer or source
        raise ClientError(f"no tokenizer in {where} ({type(err).__name__}); pass --tokenizer") from None
    return client, tokenizer


def connect(ns):
    """The gRPC transport to `--address`, after the server answered (else a [`ClientError`] saying so)."""
    from .auth import read_token
    from .transport import GrpcTransport, PeerDisconnected

    token = None
    if ns.token_file:
        try:
            token = read_token(ns.token_file)
        except (OSError, ValueError) as err:
            raise ClientError(f"cannot read --token-file: {err}") from None
    roots = Path(ns.tls_root_cert).read_bytes() if ns.tls_root_cert else None
    try:
        return GrpcTransport(ns.address, timeout=ns.timeout, wait_ready=ns.connect_timeout, token=token,
                             root_certificates=roots)  # fmt: skip
    except PeerDisconnected as err:
        raise ClientError(
            f"{err}: is `hf-ext fl_llama serve` running there (its READY line prints the port)?"
        ) from None


def handshake(split, address: str) -> dict:
    """The training `hello`, with the server's refusals turned into errors that say what to change."""
    from .transport import AccessDenied, PeerDisconnected, ProtocolError

    try:
        return split.handshake("train")
    except AccessDenied as err:
        raise ClientError(
            f"the server at {address} refused this client: {err}. Pass --token-file with a token made "
            "by `hf-ext fl_llama tokens` for the table the server runs with (--tokens)"
        ) from None
    except ProtocolError as err:
        raise ClientError(f"{err} (this client: --a/--c, --model/--client-dir, --max-steps)") from None
    except PeerDisconnected as err:
        raise ClientError(str(err)) from None


# ---- checkpoints --------------------------------------------------------------------------------------------------
def _prune(out: Path, limit: int) -> None:
    steps = sorted((int(p.name.split("-", 1)[1]), p) for p in out.glob("checkpoint-*") if p.name[11:].isdigit())
    for _, old in steps[: max(0, len(steps) - limit)]:
        shutil.rmtree(old, ignore_errors=True)


def save_both(split, out: Path, limit: int, state: dict) -> dict:
    """The server's `save`, then this client's checkpoint naming it: a checkpoint pair to resume from together."""
    from .transport import PeerDisconnected, ProtocolError, RemoteError

    try:
        server_ckpt = split.save_server()
    except (ProtocolError, RemoteError, PeerDisconnected) as err:
        raise ClientError(
            f"the server did not save at step {split.steps}: {err} (start `serve` with --output-dir)"
        ) from None
    saved = {**state, "server_checkpoint": server_ckpt, "server_steps": int(server_ckpt.split("-")[-1])}
    split.save_checkpoint(out / f"checkpoint-{split.steps}", saved)
    saved["steps"] = split.steps
    _prune(out, limit)
    print(f"saved checkpoint-{split.steps} (server: {server_ckpt})", flush=True)
    return saved


def lm_loss(split, data: dict, batch_size: int) -> float:
    """Token-weighted LM loss of `data` through the split model (no training state touched on either side; the
    noise generator is restored, so evaluating does not change the training run's noise)."""
    import torch

    noise = split.noise_generator.get_state()
    split.client.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for i in range(0, len(data["input_ids"]), batch_size):
                b = {k: v[i : i + batch_size] for k, v in data.items()}
                n = int((b["labels"][:, 1:] != -100).sum())
                total += float(split(b["input_ids"], b["attention_mask"], b["labels"]).loss) * n
                count += n
    finally:
        split.noise_generator.set_state(noise)
    return total / max(count, 1)


# ---- the command --------------------------------------------------------------------------------------------------
def _check_args(parser, ns) -> None:
    if not ns.token_file and not ns.insecure:
        parser.error(
            "pass --token-file (see `hf-ext fl_llama tokens`) or, for a loopback --insecure server, --insecure"
        )
    for name in ("max_steps", "batch_size", "save_total_limit"):
        if getattr(ns, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if (ns.max_length is not None and ns.max_length < 2) or ns.save_steps < 0 or not ns.learning_rate > 0:
        parser.error("--max-length must be >= 2, --save-steps >= 0 and --learning-rate > 0")


def main(argv: list[str] | None = None) -> dict:
    """Runs the client (see the module docstring); returns the per-step losses, the paths written and the
    metrics."""
    parser = make_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    ns = parser.parse_args(argv)
    _check_args(parser, ns)
    try:
        return _run(ns, argv)
    except ClientError as err:
        raise SystemExit(f"{PROG}: error: {err}") from None


def _run(ns, argv: list[str]) -> dict:
    import torch

    from hf_ext.core.records import metric

    from .arguments import FlLlamaTrainingArguments
    from .artifacts import save_part
    from .data import iter_batches
    from .split_model import FlLlamaSplitForCausalLM
    from .transport import AccessDenied, PeerDisconnected, ProtocolError, RemoteError

    torch.set_num_threads(ns.threads)  # intra-op threads spin-wait on a busy machine
    torch.manual_seed(ns.seed)
    client, tokenizer = load_client(ns)
    max_positions = int(client.config.llama_config.get("max_position_embeddings", 2048))
    ns.max_length = ns.max_length or min(128, max_positions)
    if ns.max_length > max_positions:
        raise ClientError(f"--max-length {ns.max_length} exceeds the model's max_position_embeddings={max_positions}")
    data = load_examples(ns.train_file, tokenizer, ns.max_length, ns.text_field)
    val = load_examples(ns.validation_file, tokenizer, ns.max_length, ns.text_field) if ns.validation_file else None
    args = FlLlamaTrainingArguments(learning_rate=ns.learning_rate, max_steps=ns.max_steps, seed=ns.seed,
                                    max_grad_norm=ns.max_grad_norm if ns.max_grad_norm > 0 else None)  # fmt: skip
    client_id = ns.client_id or (Path(ns.token_file).stem if ns.token_file else "0")
    split = FlLlamaSplitForCausalLM(client, connect(ns), args, client_id=client_id)
    out = Path(ns.output_dir)
    data_sha = file_sha256(ns.train_file)
    state = {"max_steps": ns.max_steps, "seed": ns.seed, "train_sha256": data_sha}
    resumed = {}
    if ns.resume_from:
        try:
            resumed = split.load_checkpoint(ns.resume_from)
        except (OSError, RuntimeError, KeyError) as err:
            raise ClientError(f"--resume-from {ns.resume_from}: {err}") from None
        if resumed.get("max_steps") != ns.max_steps or resumed.get("seed") != ns.seed:
            raise ClientError(
                f"--resume-from {ns.resume_from} was saved with --max-steps {resumed.get('max_steps')} "
                f"--seed {resumed.get('seed')}; resume with the same values"
            )
        if resumed.get("train_sha256") != data_sha:
            print(f"warning: {ns.train_file} differs from the file the checkpoint trained on", file=sys.stderr)
        if split.steps >= ns.max_steps:
            raise ClientError(f"--resume-from {ns.resume_from} is at step {split.steps} of --max-steps {ns.max_steps}")
    reply = handshake(split, ns.address)
    if ns.resume_from and int(reply.get("steps", 0)) < int(resumed.get("server_steps", 0)):
        raise ClientError(
            f"the server is at step {reply.get('steps')}, but {ns.resume_from} was saved with the server "
            f"at {resumed['server_checkpoint']}: restart `serve` with --resume-from "
            f"SERVER_OUTPUT_DIR/{resumed['server_checkpoint']}"
        )
    cfg = client.config
    print(
        f"connected to {ns.address} as {client_id!r}: a = {cfg.num_input_blocks}, c = {cfg.num_output_blocks}, "
        f"{len(data['input_ids'])} examples of <= {data['input_ids'].shape[1]} tokens, steps {split.steps + 1}.."
        f"{ns.max_steps}",
        flush=True,
    )
    out.mkdir(parents=True, exist_ok=True)
    losses, saved = [], resumed
    batches = iter_batches(data, ns.batch_size, seed=ns.seed, steps=ns.max_steps)
    with (out / "log.jsonl").open("a") as log:
        for step, batch in enumerate(batches, 1):
            if step <= split.steps:
                continue  # resuming: the same seeded order, the batches already trained on skipped
            try:
                loss = split.train_step(batch)
            except (AccessDenied, PeerDisconnected, ProtocolError, RemoteError) as err:
                last = f"; resume from {out / ('checkpoint-' + str(saved['steps']))}" if saved.get("steps") else ""
                raise ClientError(f"step {step} failed: {err}{last}") from None
            losses.append(loss)
            lr = split.head_optimizer.optimizer.param_groups[0]["lr"] if split.head_optimizer.optimizer else 0.0
            print(f"step {step}/{ns.max_steps}  loss {loss:.4f}  lr {lr:.3g}", flush=True)
            log.write(json.dumps({"step": step, "loss": loss, "learning_rate": lr}) + "\n")
            log.flush()
            if step == ns.max_steps or (ns.save_steps and step % ns.save_steps == 0):
                saved = save_both(split, out, ns.save_total_limit, state)
    metrics = [metric("final training loss", "loss", losses[-1], split="train", dataset=Path(ns.train_file).name,
                      higher_is_better=False)]  # fmt: skip
    if val is not None:
        loss = lm_loss(split, val, ns.batch_size)
        name = Path(ns.validation_file).name
        metrics += [metric("validation LM loss", "loss", loss, split="validation", dataset=name,
                           higher_is_better=False),
                    metric("validation perplexity", "perplexity", math.exp(min(loss, 50.0)), split="validation",
                           dataset=name, higher_is_better=False)]  # fmt: skip
    record = _record(ns, argv, split, data, val, metrics, saved)
    artifact = save_part(client, out / "client", tokenizer=tokenizer, record=record)
    print(
        f"final loss {losses[-1]:.4f} -> {artifact} (server part: {saved['server_checkpoint']} in the server's "
        "--output-dir)",
        flush=True,
    )
    return {
        "losses": losses,
        "steps": split.steps,
        "artifact": artifact,
        "checkpoint": out / f"checkpoint-{split.steps}",
        "server_checkpoint": saved["server_checkpoint"],
        "metrics": {m["name"]: m["value"] for m in metrics},
    }


def _record(ns, argv, split, data, val, metrics, saved) -> dict:
    """The training record's fields (see [`~hf_ext.core.records.save_training_record`]): this client's run."""
    cfg = split.client.config

    def described(path, examples, role):
        return {
            "name": Path(path).name,
            "hub_id": None,
            "description": f"{role}: {examples} examples from the user's file (sha256 "
            f"{file_sha256(path)[:16]}…), "
            f"tokenized by the client's tokenizer, <= {ns.max_length} tokens",
        }

    datasets = [described(ns.train_file, len(data["input_ids"]), "training")]
    if val is not None:
        datasets.append(described(ns.validation_file, len(val["input_ids"]), "validation"))
    secret = ("--token-file", "--tls-root-cert")  # where a client keeps its secrets does not go on a public card
    command = list(argv)
    for i, a in enumerate(command):
        if a in secret and i + 1 < len(command):
            command[i + 1] = "PATH"
        elif a.split("=", 1)[0] in secret:
            command[i] = a.split("=", 1)[0] + "=PATH"
    return {
        "command": f"{PROG} " + shlex.join(command),
        "datasets": datasets,
        "metrics": metrics,
        "config": {
            "a": cfg.num_input_blocks,
            "c": cfg.num_output_blocks,
            "noise_scale": cfg.noise_scale,
            "sigma": cfg.noise_std,
            "steps": split.steps,
            "batch_size": ns.batch_size,
            "max_length": ns.max_length,
            "training_arguments": split.args.to_dict(),
            "source": ns.client_dir or ns.model,
            "server_checkpoint": saved["server_checkpoint"],
            "server_steps": saved["server_steps"],
            "resumed_from": ns.resume_from,
            "transport": "gRPC",
        },
        "notes": (
            f"{split.steps} split-training steps against the server's part B; that part is the server's "
            f"checkpoint {saved['server_checkpoint']}, not in this repository"
        ),
    }


if __name__ == "__main__":
    main()
