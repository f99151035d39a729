"""Bad input for FL-LLaMA's public entry points: the server's wire methods (shapes, NaN/Inf, positions, sequence and
batch limits, sessions, meta fields), the partition, training arguments, server limits and client tokens. Each must
fail with a clear error naming the field or problem and its allowed range, with the server state untouched."""

from __future__ import annotations

import functools

import pytest
import torch

from hf_ext.core.testing import BadInput, assert_clear_error

D, MAX_POS = 32, 64


@functools.lru_cache(maxsize=1)
def _server():
    from hf_ext.fl_llama import split_llama
    from hf_ext.fl_llama.presets import tiny_llama
    from hf_ext.fl_llama.server import ServerLimits, SplitServer

    model = tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=MAX_POS, seed=0)
    from hf_ext.fl_llama.testing import hello_meta

    _, server_model = split_llama(model, 1, 1)
    server = SplitServer(server_model, limits=ServerLimits(max_batch=4, max_sessions_per_client=1))
    for owner in ("0", "g", "nobody"):  # the training handshake, so the cases below reach the checks they aim at
        server.handle("hello", {}, {**hello_meta(server_model), "client_id": owner})
    return server


def _hello(**override):
    from hf_ext.fl_llama.testing import hello_meta

    return _call("hello", meta={**hello_meta(_server().model), "client_id": "h", **override})


def _call(method, tensors=None, meta=None, principal=None):
    return _server().handle(method, tensors or {}, meta or {}, principal=principal)


def _fwd(b=2, length=5, **override):
    msg = {
        "hidden": torch.randn(b, length, D),
        "n_real": torch.full((b,), length),
        "position_ids": torch.arange(length).expand(b, -1).contiguous(),
    }
    msg.update(override)
    return msg


def _nan(shape, value=float("nan")):
    t = torch.randn(*shape)
    t.view(-1)[0] = value
    return t


def _decode_after_prefill(meta, hidden=None):
    _call("prefill", {"hidden": torch.randn(1, 3, D)}, {"session": "fuzz"})
    try:
        return _call(
            "decode", {"hidden": torch.randn(1, 1, D) if hidden is None else hidden}, {"session": "fuzz", **meta}
        )
    finally:
        _call("end", meta={"session": "fuzz"})


def _second_session():
    _call("prefill", {"hidden": torch.randn(1, 2, D)}, {"session": "one", "client_id": "q"})
    try:
        return _call("prefill", {"hidden": torch.randn(1, 2, D)}, {"session": "two", "client_id": "q"})
    finally:
        _call("end", meta={"session": "one", "client_id": "q"})


def _bob():
    from hf_ext.fl_llama.auth import Principal

    return Principal("bob")


def _args(**kw):
    from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments

    return FlLlamaTrainingArguments(**kw)


def _limits(**kw):
    from hf_ext.fl_llama.server import ServerLimits

    return ServerLimits(**kw)


def _tokens(names):
    import tempfile

    from hf_ext.fl_llama.auth import generate_tokens

    return generate_tokens(tempfile.mkdtemp(prefix="fl_llama_fuzz_"), names)


def _token_file(text):
    import tempfile
    from pathlib import Path

    from hf_ext.fl_llama.auth import TokenStore

    path = Path(tempfile.mkdtemp(prefix="fl_llama_fuzz_")) / "server_tokens.json"
    path.write_text(text)
    return TokenStore.load(path)


def _split(a, c):
    from hf_ext.fl_llama import split_llama
    from hf_ext.fl_llama.presets import tiny_llama

    return split_llama(tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=MAX_POS), a, c)


def _config(**kw):
    from hf_ext.fl_llama.configuration_fl_llama import FlLlamaServerConfig
    from hf_ext.fl_llama.testing import tiny_llama_config

    return FlLlamaServerConfig(**{"llama_config": tiny_llama_config(), **kw})


def _config_load(**fields):
    """A saved client config edited on disk, then loaded (the checks run on load as at construction)."""
    import json
    import tempfile
    from pathlib import Path

    from hf_ext.fl_llama.configuration_fl_llama import FlLlamaClientConfig
    from hf_ext.fl_llama.testing import tiny_config

    folder = Path(tempfile.mkdtemp(prefix="fl_llama_fuzz_"))
    tiny_config().save_pretrained(folder)
    data = json.loads((folder / "config.json").read_text())
    data.update(fields)
    (folder / "config.json").write_text(json.dumps(data))
    return FlLlamaClientConfig.from_pretrained(folder)


def _server_model_forward(hidden):
    from hf_ext.fl_llama import split_llama
    from hf_ext.fl_llama.presets import tiny_llama

    _, server = split_llama(tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=MAX_POS), 1, 1)
    return server(hidden)


def _client_forward(**kw):
    from hf_ext.fl_llama import split_llama
    from hf_ext.fl_llama.presets import tiny_llama

    client, _ = split_llama(tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=MAX_POS), 1, 1)
    args = {"input_ids": torch.tensor([[5, 6, 7]]), **kw}
    return client(**args)


def _split_forward(input_ids):
    from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
    from hf_ext.fl_llama.transport import InProcessTransport

    client, _ = _split(1, 1)
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(_server().handle_bytes))
    with torch.no_grad():
        return split(input_ids)


def _serve_cli(*flags):
    from hf_ext.fl_llama.serve import main

    return _exit_message(main, ["/nonexistent-server-dir", "--insecure", *flags])


def _exit_message(main, argv):
    """argparse exits with status 2 after printing the message; raise it as a ValueError for the fuzz harness."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            raise ValueError(err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else str(exc)) from None


def _reproduce_cli(*flags):
    from hf_ext.fl_llama.reproduce import main

    return _exit_message(main, list(flags))


def _token_entry(entry):
    import json

    return _token_file(
        json.dumps({"format": "hf_ext.fl_llama.tokens/1", "clients": {"a": {"sha256": "a" * 64, **entry}}})
    )


NEW_CASES = [
    # configs: types and ranges at construction, naming the field
    BadInput(
        "config noise_scale text",
        lambda: _config(noise_scale="0.1"),
        r"noise_scale must be a finite number",
        error=TypeError,
    ),  # fmt: skip
    BadInput(
        "config noise_scale None",
        lambda: _config(noise_scale=None),
        r"noise_scale must be a finite number",
        error=TypeError,
    ),  # fmt: skip
    BadInput("config noise_scale NaN", lambda: _config(noise_scale=float("nan")), r"noise_scale must be a finite"),
    BadInput("config noise_scale negative", lambda: _config(noise_scale=-1.0), r"noise_scale must be >= 0"),
    BadInput(
        "config a text", lambda: _config(num_input_blocks="1"), r"num_input_blocks must be an integer", error=TypeError
    ),  # fmt: skip
    BadInput(
        "config a float", lambda: _config(num_input_blocks=1.0), r"num_input_blocks must be an integer", error=TypeError
    ),  # fmt: skip
    BadInput(
        "config a bool", lambda: _config(num_input_blocks=True), r"num_input_blocks must be an integer", error=TypeError
    ),  # fmt: skip
    BadInput("config stored blocks zero", lambda: _config(client_stored_blocks=0), r"client_stored_blocks.*>= 1"),
    BadInput(
        "config lora_rank float", lambda: _config(lora_rank=2.5), r"lora_rank must be an integer", error=TypeError
    ),  # fmt: skip
    BadInput("config lora_alpha zero", lambda: _config(lora_alpha=0), r"lora_alpha must be > 0"),
    BadInput("config lora_dropout one", lambda: _config(lora_dropout=1.0), r"lora_dropout must be >= 0.0 and < 1.0"),
    BadInput(
        "config lora_parts text", lambda: _config(lora_parts="head"), r"lora_parts must be a list", error=TypeError
    ),  # fmt: skip
    BadInput(
        "config lora targets empty name",
        lambda: _config(lora_target_modules=[""]),
        r"lora_target_modules",
        error=TypeError,
    ),  # fmt: skip
    BadInput(
        "config llama_config list",
        lambda: _config(llama_config=[1, 2]),
        r"llama_config must be a dict",
        error=TypeError,
    ),  # fmt: skip
    BadInput(
        "config llama layers text",
        lambda: _config(
            llama_config={"num_hidden_layers": "4", "hidden_size": 8, "vocab_size": 8, "num_attention_heads": 2}
        ),
        r"llama_config\['num_hidden_layers'\]",
    ),  # fmt: skip
    BadInput(
        "config base hash int", lambda: _config(base_model_hash=5), r"base_model_hash must be a string", error=TypeError
    ),  # fmt: skip
    # ... and on load
    BadInput(
        "loaded config noise text",
        lambda: _config_load(noise_scale="high"),
        r"noise_scale must be a finite",
        error=TypeError,
    ),  # fmt: skip
    BadInput(
        "loaded config a null", lambda: _config_load(num_input_blocks=None), r"num_input_blocks", error=TypeError
    ),  # fmt: skip
    BadInput("loaded config dropout 2", lambda: _config_load(lora_dropout=2), r"lora_dropout must be"),
    # training arguments
    BadInput(
        "training lr text",
        lambda: _args(learning_rate="1e-3"),
        r"learning_rate must be a finite number",
        error=TypeError,
    ),  # fmt: skip
    BadInput("training lr None", lambda: _args(learning_rate=None), r"learning_rate", error=TypeError),
    BadInput("training lr inf", lambda: _args(learning_rate=float("inf")), r"learning_rate must be a finite"),
    BadInput("training beta2 one", lambda: _args(adam_beta2=1.0), r"adam_beta2 must be >= 0.0 and < 1.0"),
    BadInput("training eps zero", lambda: _args(adam_epsilon=0.0), r"adam_epsilon must be > 0"),
    BadInput("training weight decay negative", lambda: _args(weight_decay=-0.1), r"weight_decay must be >= 0"),
    BadInput("training clip text", lambda: _args(max_grad_norm="1"), r"max_grad_norm", error=TypeError),
    BadInput("training max_steps float", lambda: _args(max_steps=2.0), r"max_steps must be >= 1 \(an integer"),
    BadInput(
        "training dp flag text", lambda: _args(dp_gradient="yes"), r"dp_gradient must be True or False", error=TypeError
    ),  # fmt: skip
    BadInput("training dp clip zero", lambda: _args(dp_grad_clip=0), r"dp_grad_clip must be > 0"),
    BadInput("training seed negative", lambda: _args(seed=-1), r"seed must be an integer >= 0"),
    BadInput(
        "training global clip text", lambda: _args(global_clip=1), r"global_clip must be True or False", error=TypeError
    ),  # fmt: skip
    # server limits
    BadInput("server limit step_timeout zero", lambda: _limits(step_timeout=0), r"step_timeout must be a finite"),
    BadInput("server limit queue_timeout NaN", lambda: _limits(queue_timeout=float("nan")), r"queue_timeout"),
    BadInput("server limit max_pending text", lambda: _limits(max_pending="8"), r"max_pending must be an integer"),
    # token file types
    BadInput("token admin 'no'", lambda: _token_entry({"admin": "no"}), r"'admin' must be true or false, got 'no'"),
    BadInput("token expires text", lambda: _token_entry({"expires_at": "soon"}), r"'expires_at' must be seconds"),
    BadInput("token unknown field", lambda: _token_entry({"role": "admin"}), r"unknown field"),
    # forwards refuse NaN/Inf and out-of-range ids instead of passing them on
    BadInput("server part forward NaN", lambda: _server_model_forward(_nan((1, 3, D))), r"hidden_states.*NaN/Inf"),
    BadInput(
        "client forward NaN server hidden",
        lambda: _client_forward(server_hidden=_nan((1, 3, D), float("inf"))),
        r"server_hidden.*NaN/Inf",
    ),  # fmt: skip
    BadInput(
        "client forward id beyond vocab",
        lambda: _client_forward(input_ids=torch.tensor([[5, 64]])),
        r"input_ids must lie in \[0, 64\)",
    ),  # fmt: skip
    BadInput(
        "split forward negative id", lambda: _split_forward(torch.tensor([[-1, 5]])), r"input_ids must lie in \[0, 64\)"
    ),  # fmt: skip
    BadInput(
        "split forward float ids",
        lambda: _split_forward(torch.tensor([[1.0, 5.0]])),
        r"input_ids must be",
        error=TypeError,
    ),  # fmt: skip
    # CLI numbers: a range error naming the flag
    BadInput("serve --max-workers 0", lambda: _serve_cli("--max-workers", "0"), r"--max-workers must be >= 1"),
    BadInput("serve --port 70000", lambda: _serve_cli("--port", "70000"), r"--port must lie in \[0, 65535\]"),
    BadInput("serve --lr nan", lambda: _serve_cli("--lr", "nan"), r"--lr must be a finite number > 0"),
    BadInput("serve --step-timeout -1", lambda: _serve_cli("--step-timeout", "-1"), r"--step-timeout must be"),
    BadInput(
        "serve --output-dir under a file",
        lambda: _serve_cli("--output-dir", __file__ + "/sub"),
        r"--output-dir .*cannot write there",
    ),  # fmt: skip
    BadInput("serve --a 0", lambda: _serve_cli("--a", "0"), r"--a must be >= 1"),
    BadInput("reproduce --seed -1", lambda: _reproduce_cli("--seed", "-1"), r"--seed must be an integer >= 0"),
    BadInput("reproduce --steps 0", lambda: _reproduce_cli("--steps", "0"), r"--steps must be"),
]


CASES = [
    BadInput(
        "hidden of the wrong width",
        lambda: _call("forward", _fwd(hidden=torch.randn(2, 5, D + 1))),
        r"hidden.*expected size 32 in dim 2",
    ),
    BadInput(
        "hidden float64",
        lambda: _call("forward", _fwd(hidden=torch.randn(2, 5, D, dtype=torch.float64))),
        r"hidden.*dtype torch.float64",
    ),
    BadInput("hidden with NaN", lambda: _call("forward", _fwd(hidden=_nan((2, 5, D)))), r"hidden.*NaN/Inf"),
    BadInput(
        "hidden with Inf", lambda: _call("forward", _fwd(hidden=_nan((2, 5, D), float("inf")))), r"hidden.*NaN/Inf"
    ),
    BadInput("empty batch", lambda: _call("forward", _fwd(0, 5)), r"batch size 0 outside \[1, 4\]"),
    BadInput("batch above max_batch", lambda: _call("forward", _fwd(5, 2)), r"batch size 5 outside \[1, 4\]"),
    BadInput("empty sequence", lambda: _call("forward", _fwd(2, 0)), r"sequence length 0 outside \[1, 64\]"),
    BadInput(
        "sequence beyond the model max",
        lambda: _call("forward", _fwd(1, 12_000)),
        r"sequence length 12000 outside \[1, 64\]",
    ),
    BadInput(
        "negative positions",
        lambda: _call("forward", _fwd(position_ids=torch.full((2, 5), -1))),
        r"position_ids must lie in \[0, 64\)",
    ),
    BadInput(
        "positions of 1e9",
        lambda: _call("forward", _fwd(position_ids=torch.full((2, 5), 10**9))),
        r"position_ids must lie in \[0, 64\)",
    ),
    BadInput(
        "positions of the wrong shape",
        lambda: _call("forward", _fwd(position_ids=torch.zeros(2, 4, dtype=torch.long))),
        r"position_ids.*expected size 5 in dim 1",
    ),
    BadInput("n_real zero", lambda: _call("forward", _fwd(n_real=torch.tensor([0, 5]))), r"n_real must lie in"),
    BadInput(
        "mask with NaN",
        lambda: _call("forward_full", {"hidden": torch.randn(1, 3, D), "mask": _nan((1, 1, 3, 3))}),
        r"mask.*NaN",
    ),
    BadInput(
        "backward without forward",
        lambda: _call("backward", {"grad": torch.randn(2, 5, D)}, {"client_id": "nobody"}),
        r"without a pending forward",
    ),
    BadInput(
        "backward with NaN gradient",
        lambda: (
            _call("forward", _fwd(), {"client_id": "g"}),
            _call("backward", {"grad": _nan((2, 5, D))}, {"client_id": "g"}),
        ),
        r"grad.*NaN/Inf",
    ),
    BadInput(
        "prefill batch above max_batch",
        lambda: _call("prefill", {"hidden": torch.randn(5, 3, D)}),
        r"batch size 5 outside \[1, 4\]",
    ),
    BadInput(
        "prefill n_real of the wrong batch",
        lambda: _call("prefill", {"hidden": torch.randn(2, 3, D), "n_real": torch.tensor([3])}),
        r"n_real.*expected size 2 in dim 0",
    ),
    BadInput("hello with another partition", lambda: _hello(a=2), r"client's a is 2, this server's is 1"),
    BadInput("hello from another model", lambda: _hello(model_hash="0" * 64), r"client's model_hash"),
    BadInput(
        "hello with another schedule", lambda: _hello(max_steps=7), r"max_steps=None, the client's over max_steps=7"
    ),
    BadInput("hello with max_steps text", lambda: _hello(max_steps="7"), r"max_steps must be an integer"),
    BadInput(
        "training forward before hello",
        lambda: _call("forward", _fwd(), {"client_id": "stranger"}),
        r"'stranger' sent a training message before a training 'hello'",
    ),
    BadInput("save without an output dir", lambda: _call("save"), r"no output directory"),
    BadInput(
        "decode unknown session",
        lambda: _call("decode", {"hidden": torch.randn(1, 1, D)}, {"session": "never"}),
        r"unknown session",
    ),
    BadInput("decode position out of order", lambda: _decode_after_prefill({"position": 7}), r"does not follow"),
    BadInput(
        "decode position not an integer",
        lambda: _decode_after_prefill({"position": "3"}),
        r"'position' must be an integer",
    ),
    BadInput("decode NaN hidden", lambda: _decode_after_prefill({"position": 3}, _nan((1, 1, D))), r"hidden.*NaN/Inf"),
    BadInput(
        "session name too long",
        lambda: _call("prefill", {"hidden": torch.randn(1, 2, D)}, {"session": "x" * 500}),
        r"'session'.*128 characters",
    ),
    BadInput("too many sessions for one client", _second_session, r"max_sessions_per_client=1"),
    BadInput("meta not an object", lambda: _call("forward", _fwd(), ["not", "a", "dict"]), r"meta.*JSON object"),
    BadInput("unknown method", lambda: _call("steal_gradients"), r"unknown method 'steal_gradients'"),
    BadInput(
        "partition by a non-admin",
        lambda: _call("partition", meta={"a": 1, "c": 1}, principal=_bob()),
        r"partition.*admin",
        error=PermissionError,
    ),
    BadInput("partition a zero", lambda: _call("partition", meta={"a": 0, "c": 1}), r"a=0.*>= 1"),
    BadInput("partition a text", lambda: _call("partition", meta={"a": "two", "c": 1}), r"'a' must be an integer"),
    BadInput("split with c zero", lambda: _split(1, 0), r"num_output_blocks must be an integer >= 1, got 0"),
    BadInput("split leaving the server no block", lambda: _split(2, 2), r"a \+ c must be <"),
    BadInput("training learning_rate zero", lambda: _args(learning_rate=0.0), r"learning_rate must be > 0"),
    BadInput("training max_steps zero", lambda: _args(max_steps=0), r"max_steps must be >= 1"),
    BadInput("server limit max_batch zero", lambda: _limits(max_batch=0), r"max_batch must be an integer >= 1"),
    BadInput("server limit max_seq_len negative", lambda: _limits(max_seq_len=-1), r"max_seq_len.*>= 1"),
    BadInput("token client name with a slash", lambda: _tokens(["../evil"]), r"client name '../evil'"),
    BadInput("token names duplicated", lambda: _tokens(["a", "a"]), r"distinct"),
    BadInput("token file not JSON", lambda: _token_file("{nope"), r"cannot read the token file"),
    BadInput(
        "token file with a malformed hash",
        lambda: _token_file('{"format": "hf_ext.fl_llama.tokens/1", "clients": {"a": {"sha256": "xyz"}}}'),
        r"'sha256' must be 64",
    ),
    *NEW_CASES,
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gets_a_clear_error(case):
    before = {k: v.clone() for k, v in _server().model.state_dict().items()}
    assert_clear_error(case)
    assert all(torch.equal(v, _server().model.state_dict()[k]) for k, v in before.items())
