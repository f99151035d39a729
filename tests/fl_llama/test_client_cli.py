"""`hf-ext fl_llama client`: a client process trained against a `serve` process over gRPC equals the in-process
reference (losses, and the merged model's logits), resumes exactly, fails with clear errors, and leaves an artifact
whose training record `hf-ext push fl_llama --dry-run` renders as the card's `model-index` (no --allow-untrained);
`hf-ext fl_llama train` writes such a record into both parts."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_model
from transformers import AutoTokenizer

from hf_ext.core.cli import main as cli_main
from hf_ext.core.records import load_training_record
from hf_ext.fl_llama import FlLlamaClientModel, FlLlamaServerModel, merge_parts
from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.artifacts import main as split_main
from hf_ext.fl_llama.auth import TokenStore, generate_tokens
from hf_ext.fl_llama.client_command import load_examples
from hf_ext.fl_llama.client_command import main as client_main
from hf_ext.fl_llama.data import iter_batches, train_tokenizer
from hf_ext.fl_llama.modeling_fl_llama import position_ids_from_mask
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.server import SplitServer
from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
from hf_ext.fl_llama.testing import start_serve
from hf_ext.fl_llama.transport import InProcessTransport, serve_grpc

LR, STEPS, BATCH, SEED, NOISE = 1e-2, 4, 4, 3, 0.01
ANIMALS = "cat dog owl fox hen cow pig ant bee elk yak emu".split()
LINES = [f"the {a} sat on the mat and the {b} ran to door {i}" for i, (a, b) in
         enumerate(zip(ANIMALS * 3, ANIMALS[3:] * 3 + ANIMALS[:3] * 3))]  # fmt: skip


def _base(path: Path, tok, seed: int) -> Path:
    model = tiny_llama(vocab_size=len(tok), hidden_size=32, num_layers=4, max_positions=64, seed=seed,
                       pad_token_id=tok.pad_token_id)  # fmt: skip
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A saved tiny Llama (and a second one, other weights), its parts from `hf-ext fl_llama split`, tokens, text."""
    root = tmp_path_factory.mktemp("fl_llama_client")
    tok = train_tokenizer(LINES * 5, vocab_size=200)
    _base(root / "base", tok, seed=0)
    _base(root / "other", tok, seed=1)
    split_main([str(root / "base"), str(root / "parts"), "--a", "1", "--c", "1", "--client-stored-blocks", "2"])
    generate_tokens(root / "tokens", ["alice"])
    (root / "train.txt").write_text("\n".join(LINES[:24]) + "\n\n")
    (root / "val.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in LINES[24:]))
    (root / "empty.txt").write_text("\n  \n\n")
    (root / "forged.token").write_text("not-a-token\n")
    return root


def _args(work: Path, address: str, out: Path, *extra) -> list[str]:
    return [
        "--address",
        address,
        "--token-file",
        str(work / "tokens" / "clients" / "alice.token"),
        "--client-dir",
        str(work / "parts" / "client"),
        "--train-file",
        str(work / "train.txt"),
        "--max-steps",
        str(STEPS),
        "--batch-size",
        str(BATCH),
        "--learning-rate",
        str(LR),
        "--seed",
        str(SEED),
        "--noise-scale",
        str(NOISE),
        "--output-dir",
        str(out),
        "--connect-timeout",
        "20",
        *map(str, extra),
    ]


@contextlib.contextmanager
def _served(work: Path, output_dir: Path | None = None, resume: Path | None = None):
    """`serve`'s server in this process (gRPC on loopback, the same tokens): for the in-process client runs."""
    server = SplitServer(FlLlamaServerModel.from_pretrained(work / "parts" / "server"),
                         FlLlamaTrainingArguments(learning_rate=LR), output_dir=output_dir)  # fmt: skip
    if resume is not None:
        server.load_checkpoint(resume)
    grpc_server, port = serve_grpc(server.handle_bytes, tokens=TokenStore.load(work / "tokens" / "server_tokens.json"))
    try:
        yield server, f"127.0.0.1:{port}"
    finally:
        grpc_server.stop(grace=0.5)


def _reference(work: Path):
    """The same training in one process: the saved parts, the same seeded data order and noise, in-process wire."""
    args = FlLlamaTrainingArguments(learning_rate=LR, max_steps=STEPS, seed=SEED)
    server = SplitServer(FlLlamaServerModel.from_pretrained(work / "parts" / "server"), args)
    client = FlLlamaClientModel.from_pretrained(work / "parts" / "client")
    client.config.noise_scale = NOISE
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(server.handle_bytes), args)
    data = load_examples(work / "train.txt", AutoTokenizer.from_pretrained(work / "parts" / "client"), 64)
    losses = [split.train_step(b) for b in iter_batches(data, BATCH, seed=SEED, steps=STEPS)]
    return losses, merge_parts(client, server.model), data


def _merged(client_dir: Path, server_dir: Path, checkpoint: Path):
    server = FlLlamaServerModel.from_pretrained(server_dir)
    load_model(server, str(checkpoint / "server.safetensors"))
    return merge_parts(FlLlamaClientModel.from_pretrained(client_dir), server)


def _logits(model, data):
    with torch.no_grad():
        mask = data["attention_mask"][:6]
        return model(input_ids=data["input_ids"][:6], attention_mask=mask,
                     position_ids=position_ids_from_mask(mask)).logits[mask.bool()]  # fmt: skip


def test_client_process_against_serve_process_equals_the_in_process_reference(work, tmp_path):
    proc, port = start_serve(
        work / "parts" / "server",
        "--lr",
        LR,
        "--tokens",
        work / "tokens" / "server_tokens.json",
        "--output-dir",
        tmp_path / "server_out",
    )
    try:
        run = subprocess.run([sys.executable, "-m", "hf_ext.core.cli", "fl_llama", "client",
                              *_args(work, f"127.0.0.1:{port}", tmp_path / "client_out")],
                             capture_output=True, text=True, timeout=600,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"step {STEPS}/{STEPS}  loss" in run.stdout
    out = tmp_path / "client_out"
    logged = [json.loads(line)["loss"] for line in (out / "log.jsonl").read_text().splitlines()]
    ref_losses, ref_model, data = _reference(work)
    assert logged == pytest.approx(ref_losses, abs=1e-5)
    assert logged[-1] < logged[0]  # it learns the repeated lines
    checkpoint = tmp_path / "server_out" / f"checkpoint-{STEPS}"
    assert (out / "client" / "model.safetensors").is_file() and (checkpoint / "server.safetensors").is_file()
    assert (out / f"checkpoint-{STEPS}" / "client.safetensors").is_file()
    # both sides moved: the client's saved parts and the server's checkpoint differ from the parts they started from
    start_c = FlLlamaClientModel.from_pretrained(work / "parts" / "client").state_dict()
    end_c = FlLlamaClientModel.from_pretrained(out / "client").state_dict()
    assert not torch.equal(start_c["head_layers.0.mlp.up_proj.weight"], end_c["head_layers.0.mlp.up_proj.weight"])
    start_s = FlLlamaServerModel.from_pretrained(work / "parts" / "server")
    end_s = _merged(out / "client", work / "parts" / "server", checkpoint)
    assert not torch.equal(start_s.layers[0].mlp.up_proj.weight, end_s.model.layers[1].mlp.up_proj.weight)
    # the merged model (client artifact + server checkpoint) is the reference's: part A trained on the server's g_A,
    # part B on the client's g_B, and both saves hold the final weights
    torch.testing.assert_close(_logits(end_s, data), _logits(ref_model, data), rtol=0, atol=1e-5)


def test_resume_continues_exactly_and_the_record_renders_the_pushed_card(work, tmp_path, capsys):
    with _served(work, tmp_path / "s1") as (_, address):
        full = client_main(_args(work, address, tmp_path / "c1", "--save-steps", 2,
                                 "--validation-file", work / "val.jsonl"))  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "c1").iterdir()) == ["checkpoint-2", "checkpoint-4", "client",
                                                                   "log.jsonl"]  # fmt: skip
    state = json.loads((tmp_path / "c1" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["server_checkpoint"] == "checkpoint-2" and state["steps"] == 2
    with _served(work, tmp_path / "s2", resume=tmp_path / "s1" / "checkpoint-2") as (_, address):
        resumed = client_main(_args(work, address, tmp_path / "c2", "--resume-from", tmp_path / "c1" / "checkpoint-2",
                                    "--validation-file", work / "val.jsonl"))  # fmt: skip
    assert resumed["losses"] == pytest.approx(full["losses"][2:], abs=1e-6)
    with _served(work) as (_, address):  # a server that was not resumed is behind the client's checkpoint
        msg = _error(_args(work, address, tmp_path / "c3", "--resume-from", tmp_path / "c1" / "checkpoint-2"))
    assert "restart `serve` with --resume-from SERVER_OUTPUT_DIR/checkpoint-2" in msg
    a = _merged(tmp_path / "c1" / "client", work / "parts" / "server", tmp_path / "s1" / "checkpoint-4")
    b = _merged(tmp_path / "c2" / "client", work / "parts" / "server", tmp_path / "s2" / "checkpoint-4")
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6, msg=name)

    record = load_training_record(tmp_path / "c1" / "client")
    assert record["method"] == "fl_llama" and record["trained"] and record["config"]["steps"] == STEPS
    assert record["datasets"][0]["name"] == "train.txt" and "PATH" in record["command"]  # no token path on a card
    assert {m["name"] for m in record["metrics"]} == {"final training loss", "validation LM loss",
                                                      "validation perplexity"}  # fmt: skip
    assert record["metrics"][0]["value"] == pytest.approx(full["losses"][-1])
    _assert_card_equals_record(tmp_path / "c1" / "client", tmp_path / "push", record)


def _assert_card_equals_record(artifact: Path, out: Path, record: dict) -> None:
    assert cli_main(["push", "fl_llama", "--repo-id", "tester/fl-llama", "--from", str(artifact), "--dry-run",
                     "--out", str(out)]) == 0  # fmt: skip
    card = ModelCard.load(out / "README.md")
    got = [
        (r.metric_name, r.metric_type, r.metric_value, r.dataset_split, r.dataset_name) for r in card.data.eval_results
    ]
    want = [(m["name"], m["type"], m["value"], m["split"], m["dataset"]) for m in record["metrics"]]
    assert got == want and "untrained" not in card.data.tags
    assert (out / "training_record.json").is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _from_model(argv: list[str], model: Path) -> list[str]:
    """`argv` with `--model MODEL` (split by the client itself) in place of `--client-dir`."""
    i = argv.index("--client-dir")
    return argv[:i] + ["--model", str(model)] + argv[i + 2 :]


def _error(argv) -> str:
    with pytest.raises(SystemExit) as info:
        client_main(argv)
    return str(info.value.code)


def test_clear_errors(work, tmp_path):
    msg = _error(_args(work, f"127.0.0.1:{_free_port()}", tmp_path / "x")[:-2] + ["--connect-timeout", "1"])
    assert "no FL-LLaMA server answered" in msg and "hf-ext fl_llama serve" in msg
    assert "holds no training text" in _error(_args(work, "127.0.0.1:1", tmp_path / "x", "--train-file",
                                                    work / "empty.txt"))  # fmt: skip
    with _served(work) as (server, address):
        forged = _args(work, address, tmp_path / "x", "--token-file", work / "forged.token")
        msg = _error(forged)
        assert "refused this client" in msg and "UNAUTHENTICATED" in msg and "--token-file" in msg
        msg = _error(_args(work, address, tmp_path / "x", "--a", 2))
        assert "handshake refused" in msg and "a is 2, this server's is 1" in msg
        msg = _error(_from_model(_args(work, address, tmp_path / "x"), work / "other"))
        assert "handshake refused" in msg and "model_hash" in msg
        assert server.steps == 0  # nothing was trained by the refused clients
        msg = _error(_args(work, address, tmp_path / "x", "--max-steps", 1))
        assert "the server did not save at step 1" in msg and "--output-dir" in msg  # this server has none
    # the same model split here from another folder than the server's passes the handshake and trains
    with _served(work, tmp_path / "s") as (server, address):
        result = client_main(_from_model(_args(work, address, tmp_path / "y", "--max-steps", 1),
                                         (work / "base").resolve()))  # fmt: skip
    assert result["steps"] == 1 and server.steps == 1


def test_train_command_writes_records_that_push_renders(tmp_path):
    out = tmp_path / "artifact"
    cli_main(["fl_llama", "train", "--steps", "2", "--batch-size", "2", "--out", str(out)])
    for part in ("client", "server"):
        record = load_training_record(out / part)
        assert record is not None and record["trained"] and record["config"]["steps"] == 2
        assert record["datasets"][0]["name"] == "multirc"
        assert {"final training loss", "validation accuracy"} <= {m["name"] for m in record["metrics"]}
        assert f"The {part}'s part" in record["notes"]
        _assert_card_equals_record(out / part, tmp_path / f"push-{part}", record)


def test_push_of_the_train_output_publishes_both_parts_as_the_space_loads_them(tmp_path, monkeypatch):
    """`hf-ext push fl_llama` without --from takes `hf-ext train fl_llama`'s default output (client/ + server/, no
    root config): both parts are checked and uploaded, and the card comes from their training record."""
    from hf_ext.core.hub import artifact_parts

    monkeypatch.setenv("HF_EXT_HOME", str(tmp_path / "work"))
    cli_main(["fl_llama", "train", "--steps", "2", "--batch-size", "2"])
    from hf_ext.core.paths import work_dir

    artifact = work_dir("fl_llama", "artifact")
    assert [p.name for p in artifact_parts(artifact)] == ["client", "server"]
    out = tmp_path / "push"
    assert cli_main(["push", "fl_llama", "--repo-id", "tester/fl-llama", "--dry-run", "--out", str(out)]) == 0
    for part in ("client", "server"):
        assert (out / part / "config.json").is_file() and (out / part / "model.safetensors").is_file()
    record = load_training_record(artifact / "client")
    card = ModelCard.load(out / "README.md")
    assert [r.metric_value for r in card.data.eval_results] == [m["value"] for m in record["metrics"]]
    # a corrupt part is refused like a corrupt artifact
    (artifact / "server" / "model.safetensors").write_bytes(b"\0" * 16)
    with pytest.raises(SystemExit, match="server"):  # one line naming the part, no traceback
        cli_main(["push", "fl_llama", "--repo-id", "tester/fl-llama", "--dry-run", "--out", str(tmp_path / "p2")])


def test_the_space_loads_both_pushed_parts_by_repo_id(tmp_path, monkeypatch):
    """What `hf-ext push fl_llama` uploads (client/ + server/) is what the Space's `_parts()` loads from the repo its
    README links: fetched through the test Hub, and the same weights as the trained parts."""
    from helpers.hub_server import serving

    from hf_ext.core.demo import MODEL_REPO_ENV
    from hf_ext.core.hub import build_push_folder, push_folder
    from hf_ext.fl_llama import SPEC, demo
    from hf_ext.fl_llama.modeling_fl_llama import FlLlamaClientModel, FlLlamaServerModel

    out = tmp_path / "artifact"
    cli_main(["fl_llama", "train", "--steps", "2", "--batch-size", "2", "--out", str(out)])
    with serving(tmp_path / "hub") as hub:
        folder = build_push_folder(SPEC, out, tmp_path / "push", repo_id="tester/fl-llama-space")
        push_folder(SPEC, folder, "tester/fl-llama-space")
        monkeypatch.delenv(MODEL_REPO_ENV, raising=False)
        monkeypatch.chdir(folder / "spaces" / "fl_llama")  # the deployed Space: its README links the model repo
        demo._parts.cache_clear()
        try:
            client, server, _, source = demo._parts()
        finally:
            demo._parts.cache_clear()
        assert any("/tester/fl-llama-space/resolve/" in path and "server/" in path for _, path in hub.requests)
    assert source.startswith("model repo `tester/fl-llama-space`")
    for got, want in (
        (client, FlLlamaClientModel.from_pretrained(out / "client")),
        (server, FlLlamaServerModel.from_pretrained(out / "server")),
    ):
        ref = want.state_dict()
        for name, value in got.state_dict().items():
            torch.testing.assert_close(value, ref[name], rtol=0, atol=0, msg=name)
