"""The FL-LLaMA gRPC server with client tokens: an unauthenticated client, a client acting on another's session or
pending forward, a non-admin `partition`, an oversized sequence or message, NaN hidden states and out-of-range
positions are each refused, with the server's state untouched."""

from __future__ import annotations

import json
import os
import stat

import pytest
import torch

from hf_ext.fl_llama import split_llama
from hf_ext.fl_llama.auth import TokenStore, generate_tokens, read_token
from hf_ext.fl_llama.auth import main as tokens_main
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.server import ServerLimits, SplitServer
from hf_ext.fl_llama.testing import hello_meta
from hf_ext.fl_llama.transport import AccessDenied, GrpcTransport, ProtocolError, serve_grpc

D, MAX_POS = 32, 64


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    root = tmp_path_factory.mktemp("fl_llama_tokens")
    tokens_main([str(root), "--clients", "alice", "bob", "--admins", "ops"])
    return root


@pytest.fixture
def served(tokens):
    model = tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=MAX_POS, seed=0)
    _, server_model = split_llama(model, 1, 1, noise_scale=0.0)
    server = SplitServer(
        server_model, limits=ServerLimits(max_batch=8, max_message_bytes=256 * 1024, max_sessions_per_client=2)
    )
    grpc_server, port = serve_grpc(
        server.handle_bytes,
        tokens=TokenStore.load(tokens / "server_tokens.json"),
        max_message_bytes=server.limits.max_message_bytes,
    )

    def client(name=None, token=None):
        transport = GrpcTransport(f"127.0.0.1:{port}", token=token, wait_ready=10)
        if name is not None:  # a named client authenticates and completes the training handshake
            token = read_token(tokens / "clients" / f"{name}.token")
            transport = GrpcTransport(f"127.0.0.1:{port}", token=token, wait_ready=10)
            transport.call("hello", meta=hello_meta(server_model))
        return transport

    yield server, client
    grpc_server.stop(grace=0.5)


def _fwd(b=2, length=5, pos=None):
    return {
        "hidden": torch.randn(b, length, D),
        "n_real": torch.full((b,), length),
        "position_ids": torch.arange(length).expand(b, -1).contiguous() if pos is None else pos,
    }


def _state(server):
    return {k: v.clone() for k, v in server.model.state_dict().items()}


def _same(server, before):
    return all(torch.equal(v, server.model.state_dict()[k]) for k, v in before.items())


def test_token_files(tokens):
    table = json.loads((tokens / "server_tokens.json").read_text())
    alice = read_token(tokens / "clients" / "alice.token")
    assert alice not in (tokens / "server_tokens.json").read_text()  # the server keeps hashes only
    assert table["clients"]["ops"]["admin"] and not table["clients"]["alice"]["admin"]
    assert stat.S_IMODE(os.stat(tokens / "clients" / "alice.token").st_mode) == 0o600
    store = TokenStore.load(tokens / "server_tokens.json")
    assert store.authenticate(alice).name == "alice" and store.authenticate("forged") is None
    with pytest.raises(ValueError, match="client name"):
        generate_tokens(tokens / "x", ["../evil"])


def test_unauthenticated_clients_are_refused(served):
    server, client = served
    before = _state(server)
    for anonymous in (client(), client(token="not-a-token")):
        with pytest.raises(AccessDenied, match="UNAUTHENTICATED"):
            anonymous.call("forward", _fwd(), {"client_id": "alice"})
    assert not server._pending and _same(server, before)


def test_a_client_cannot_act_on_another_clients_state(served):
    server, client = served
    alice, bob = client("alice"), client("bob")
    alice.call("forward", _fwd(), {"client_id": "alice"})
    alice.call("prefill", {"hidden": torch.randn(1, 4, D)}, {"session": "s"})
    before = _state(server)
    # bob names alice (and her session): it finds nothing of hers, and her state is intact
    with pytest.raises(ProtocolError, match="without a pending forward"):
        bob.call("backward", {"grad": torch.randn(2, 5, D)}, {"client_id": "alice"})
    with pytest.raises(ProtocolError, match="unknown session"):
        bob.call("decode", {"hidden": torch.randn(1, 1, D)}, {"session": "s", "position": 4})
    bob.call("end", meta={"session": "s"})  # ends bob's (non-existent) session "s", not alice's
    assert _same(server, before) and set(server._pending) == {"alice"} and ("alice", "s") in server._sessions
    out, _ = alice.call("decode", {"hidden": torch.randn(1, 1, D)}, {"session": "s", "position": 4})
    assert out["hidden"].shape == (1, 1, D)
    grad, _ = alice.call("backward", {"grad": torch.randn(2, 5, D)}, {"client_id": "somebody"})  # claim ignored
    assert grad["grad"].shape == (2, 5, D) and server.steps == 1


def test_partition_is_admin_only(served):
    server, client = served
    client("alice").call("forward", _fwd())
    with pytest.raises(AccessDenied, match="admin"):
        client("bob").call("partition", meta={"a": 1, "c": 1})
    assert set(server._pending) == {"alice"}  # bob's refused partition reset nobody
    _, meta = client("ops").call("partition", meta={"a": 1, "c": 1})  # an admin may (it resets every client)
    assert meta == {"a": 1, "c": 1} and not server._pending


def test_oversized_sequences_batches_and_messages_are_refused(served):
    server, client = served
    alice = client("alice")
    before = _state(server)
    with pytest.raises(ProtocolError, match=f"sequence length {MAX_POS + 1} outside \\[1, {MAX_POS}\\]"):
        alice.call("forward", _fwd(1, MAX_POS + 1))
    with pytest.raises(ProtocolError, match="batch size 9 outside"):
        alice.call("forward", _fwd(9, 2))
    with pytest.raises(ProtocolError, match="RESOURCE_EXHAUSTED|max_message_bytes"):  # 400 KB > the 256 KiB cap
        alice.call("forward", {**_fwd(1, 2), "padding": torch.zeros(100_000)})
    big = __import__("hf_ext.fl_llama.transport", fromlist=["encode"]).encode("forward", {"x": torch.zeros(70_000)})
    reply = __import__("hf_ext.fl_llama.transport", fromlist=["decode"]).decode(server.handle_bytes(big))
    assert reply[0] == "error" and "max_message_bytes" in reply[2]["message"]  # in-process: the same cap
    assert not server._pending and _same(server, before)


def test_nan_hidden_states_and_bad_positions_leave_the_state_untouched(served):
    server, client = served
    alice = client("alice")
    alice.call("prefill", {"hidden": torch.randn(1, 3, D)}, {"session": "g"})
    before, sessions = _state(server), dict(server._sessions)
    nan = _fwd()
    nan["hidden"][0, 0, 0] = float("nan")
    cases = [
        ("forward", nan, {}, "NaN/Inf"),
        ("forward", _fwd(pos=torch.full((2, 5), -1)), {}, r"position_ids must lie in \[0, 64\)"),
        ("forward", _fwd(pos=torch.full((2, 5), 10**9)), {}, r"position_ids must lie in \[0, 64\)"),
        ("decode", {"hidden": torch.full((1, 1, D), float("inf"))}, {"session": "g", "position": 3}, "NaN/Inf"),
        ("decode", {"hidden": torch.randn(1, 1, D)}, {"session": "g", "position": 10**9}, "does not follow"),
        ("decode", {"hidden": torch.randn(1, 1, D)}, {"session": "g", "position": "3"}, "must be an integer"),
        ("partition", {}, {"a": "x", "c": 1}, "admin"),
    ]
    for method, tensors, meta, match in cases:
        with pytest.raises((ProtocolError, AccessDenied), match=match):
            alice.call(method, tensors, meta)
    assert _same(server, before) and dict(server._sessions).keys() == sessions.keys() and not server._pending
    assert server._sessions[("alice", "g")][1].shape == (1, 3)  # the cached length did not move


def test_session_limits(served):
    server, client = served
    alice = client("alice")
    for name in ("a", "b"):
        alice.call("prefill", {"hidden": torch.randn(1, 2, D)}, {"session": name})
    with pytest.raises(ProtocolError, match="max_sessions_per_client=2"):
        alice.call("prefill", {"hidden": torch.randn(1, 2, D)}, {"session": "c"})
    alice.call("end", meta={"session": "a"})
    alice.call("prefill", {"hidden": torch.randn(1, 2, D)}, {"session": "c"})
    client("bob").call("prefill", {"hidden": torch.randn(1, 2, D)}, {"session": "a"})  # bob's own "a"
    assert set(server._sessions) == {("alice", "b"), ("alice", "c"), ("bob", "a")}


def test_an_unauthenticated_server_is_loopback_only():
    with pytest.raises(ValueError, match="client tokens"):
        serve_grpc(lambda data: data, host="0.0.0.0")
    with pytest.raises(ValueError, match="client tokens"):
        serve_grpc(lambda data: data)  # loopback, but insecure=True was not asked for


def _self_signed():
    import datetime
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), pem_key


def test_tls_channel_carries_the_token(tokens):
    """With `tls=` the token travels inside TLS; a client that does not trust the certificate cannot connect."""
    from hf_ext.fl_llama.transport import PeerDisconnected

    cert, key = _self_signed()
    model = tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=MAX_POS, seed=0)
    server = SplitServer(split_llama(model, 1, 1)[1])
    grpc_server, port = serve_grpc(
        server.handle_bytes, tokens=TokenStore.load(tokens / "server_tokens.json"), tls=(cert, key)
    )
    try:
        alice = GrpcTransport(
            f"127.0.0.1:{port}",
            token=read_token(tokens / "clients" / "alice.token"),
            root_certificates=cert,
            wait_ready=10,
        )
        out, _ = alice.call("forward", _fwd(), {"train": False})
        assert out["hidden"].shape == (2, 5, D)
        with pytest.raises(PeerDisconnected):  # plaintext client against the TLS port: no handshake
            GrpcTransport(f"127.0.0.1:{port}", token=read_token(tokens / "clients" / "alice.token"), wait_ready=3)
    finally:
        grpc_server.stop(grace=0.5)


def test_serve_refuses_to_start_without_tokens_and_tokens_is_a_command(capsys):
    from hf_ext.fl_llama import SPEC
    from hf_ext.fl_llama.serve import main as serve_main

    assert SPEC.commands["tokens"] == "hf_ext.fl_llama.auth:main"
    with pytest.raises(SystemExit):
        serve_main(["/nonexistent"])
    assert "--tokens" in capsys.readouterr().err


def _table(path, clients):
    path.write_text(json.dumps({"format": "hf_ext.fl_llama.tokens/1", "clients": clients}))
    return path


def test_token_file_types_are_strict(tmp_path):
    digest = "a" * 64
    bad = [
        ({"x": {"sha256": digest, "admin": "no"}}, r"'admin' must be true or false, got 'no'"),
        ({"x": {"sha256": digest, "admin": 1}}, r"'admin' must be true or false"),
        ({"x": {"sha256": digest, "expires_at": "tomorrow"}}, r"'expires_at' must be seconds"),
        ({"x": {"sha256": digest, "expires_at": True}}, r"'expires_at' must be seconds"),
        ({"x": {"sha256": digest, "role": "admin"}}, r"unknown field\(s\) \['role'\]"),
        ({"x": {"sha256": 7}}, r"'sha256' must be 64"),
        ({"x": ["a" * 64]}, r"must be an object"),
        ({"x": {"sha256": digest}, "y": {"sha256": digest}}, "share one token"),
    ]
    for clients, match in bad:
        with pytest.raises(ValueError, match=match):
            TokenStore.load(_table(tmp_path / "t.json", clients))
    with pytest.raises(ValueError, match="expires_in"):
        generate_tokens(tmp_path / "e", ["a"], expires_in=-1)


def test_a_removed_token_stops_working_without_a_restart(tmp_path):
    tokens = generate_tokens(tmp_path, ["alice", "bob"], ["ops"])
    store = TokenStore.load(tmp_path / "server_tokens.json")
    assert store.authenticate(tokens["alice"]).name == "alice"
    tokens_main([str(tmp_path), "--revoke", "alice"])  # the CLI rewrites the file atomically
    assert store.authenticate(tokens["alice"]) is None and store.authenticate(tokens["bob"]).name == "bob"
    table = json.loads((tmp_path / "server_tokens.json").read_text())
    table["clients"]["bob"]["admin"] = "no"  # a hand edit with a wrong type: everyone is locked out, nobody is admin
    (tmp_path / "server_tokens.json").write_text(json.dumps(table))
    assert store.authenticate(tokens["bob"]) is None and store.authenticate(tokens["ops"]) is None
    table["clients"]["bob"]["admin"] = False
    (tmp_path / "server_tokens.json").write_text(json.dumps(table) + " ")  # fixed: works again
    principal = store.authenticate(tokens["bob"])
    assert principal.name == "bob" and principal.admin is False
    with pytest.raises(SystemExit):
        tokens_main([str(tmp_path), "--revoke", "nobody"])


def test_tokens_expire(tmp_path):
    now = [1_000.0]
    tokens = generate_tokens(tmp_path, ["alice"], expires_in=60)
    table = json.loads((tmp_path / "server_tokens.json").read_text())
    table["clients"]["alice"]["expires_at"] = 1_060.0
    (tmp_path / "server_tokens.json").write_text(json.dumps(table))
    store = TokenStore.load(tmp_path / "server_tokens.json", clock=lambda: now[0])
    assert store.authenticate(tokens["alice"]).name == "alice"
    now[0] = 1_060.0
    assert store.authenticate(tokens["alice"]) is None


def test_revocation_over_grpc_takes_effect_at_the_next_call(tmp_path):
    tokens = generate_tokens(tmp_path, ["alice", "bob"])
    model = tiny_llama(vocab_size=64, hidden_size=D, num_layers=4, max_positions=MAX_POS, seed=0)
    _, server_model = split_llama(model, 1, 1)
    server = SplitServer(server_model)
    grpc_server, port = serve_grpc(server.handle_bytes, tokens=TokenStore.load(tmp_path / "server_tokens.json"))
    try:
        alice = GrpcTransport(f"127.0.0.1:{port}", token=tokens["alice"], wait_ready=10)
        alice.call("hello", meta=hello_meta(server_model))
        tokens_main([str(tmp_path), "--revoke", "alice"])
        with pytest.raises(AccessDenied, match="UNAUTHENTICATED"):
            alice.call("hello", meta=hello_meta(server_model))
        bob = GrpcTransport(f"127.0.0.1:{port}", token=tokens["bob"], wait_ready=10)
        bob.call("hello", meta=hello_meta(server_model))
    finally:
        grpc_server.stop(grace=0.5)
