"""Tests of hf_ext.core.federated: conversions, reply checks, FedAvg, and the three runners (the guarded strategy
and the run-config parser: `test_federated_strategy.py`).

The runner tests share one numpy-only Flower app (`flower_app/hfext_fedtest`) whose FedAvg result has a closed form
(`task.expected_global`), so LocalGrid, the Ray simulation engine and the loopback deployment engine are all checked
against the same exact numbers.
"""

import os

# Before anything imports flwr: Flower reads FLWR_TELEMETRY_ENABLED once, at import.
os.environ.update({"HF_HUB_OFFLINE": "1", "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"})

import importlib  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from flwr.app import Array, ArrayRecord, Context, Error, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402

from hf_ext.core import federated as fed  # noqa: E402

APP_DIR = Path(__file__).parent / "flower_app"


@pytest.fixture(scope="module")
def app():
    """The test app's modules (its folder stays on sys.path for the module: Ray workers import it too)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(APP_DIR))
        task = importlib.import_module("hfext_fedtest.task")
        yield SimpleNamespace(
            server=importlib.import_module("hfext_fedtest.server_app").app,
            client=importlib.import_module("hfext_fedtest.client_app").app,
            task=task,
        )


def assert_expected(result, app, num_nodes, **run_config):
    expected = app.task.expected_global(num_nodes, app.task.FedTestConfig.from_run_config(run_config))
    arrays = result["arrays"]
    assert list(arrays.keys()) == ["w", "steps"]
    for key, value in expected.items():
        got = arrays[key].numpy()
        assert got.dtype == value.dtype, key
        np.testing.assert_array_equal(got, value, err_msg=key)  # exact: the weights are powers of two
    assert result["summary"]["num-nodes"] == num_nodes


# ---------------------------------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------------------------------


def _bits(t: torch.Tensor) -> bytes:
    t = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
    return t.contiguous().numpy().tobytes()


def test_state_dict_round_trip_is_bitwise():
    special = torch.tensor([float("nan"), float("inf"), -0.0, 1e-45, -3.5])
    sd = {
        "f32": torch.cat([torch.randn(7), special]).reshape(3, 4),
        "f16": torch.randn(2, 3).half(),
        "f64": torch.randn(4, dtype=torch.float64),
        "i64": torch.tensor([-(2**62), 0, 2**62 + 1]),
        "bool": torch.tensor([[True, False], [False, True]]),
        "bf16": torch.randn(5).bfloat16(),
        "scalar": torch.tensor(3.25),
        "param": torch.nn.Parameter(torch.randn(2)),
    }
    record = fed.state_dict_to_arrays(sd)
    assert list(record.keys()) == list(sd)
    assert record["bf16"].dtype == "float32"  # numpy has no bfloat16
    back = fed.arrays_to_state_dict(record, reference=sd)
    assert list(back) == list(sd)
    for key, value in sd.items():
        assert back[key].dtype == value.dtype and back[key].shape == value.shape, key
        assert _bits(back[key]) == _bits(value.detach()), key
    plain = fed.arrays_to_state_dict(record)  # without reference: the wire dtypes
    assert plain["bf16"].dtype == torch.float32 and torch.equal(plain["bf16"], sd["bf16"].float())
    assert _bits(plain["f32"]) == _bits(sd["f32"]) and plain["i64"].dtype == torch.int64


def test_state_dict_to_arrays_keys_and_bad_values():
    sd = {"a": torch.zeros(2), "b": np.ones(3, dtype=np.int64), "c": torch.ones(1)}
    record = fed.state_dict_to_arrays(sd, keys=["c", "a"])
    assert list(record.keys()) == ["c", "a"]
    with pytest.raises(ValueError, match="'nope'"):
        fed.state_dict_to_arrays(sd, keys=["nope"])
    with pytest.raises(ValueError, match="'extra'"):
        fed.state_dict_to_arrays({"extra": None})
    with pytest.raises(ValueError, match="'s'"):
        fed.state_dict_to_arrays({"s": np.array(["x"])})


@pytest.mark.parametrize(
    "mutate, strict, match",
    [
        (lambda r: r.pop("bias"), True, "missing key 'bias'"),
        (lambda r: r.__setitem__("intruder", Array(np.zeros(1, np.float32))), True, "unexpected key 'intruder'"),
        (lambda r: r.__setitem__("weight", Array(np.zeros((3, 2), np.float32))), True, r"'weight': shape \(3, 2\)"),
        (lambda r: r.__setitem__("weight", Array(np.zeros((2, 3), np.float64))), True, "'weight': dtype float64"),
        (lambda r: r.__setitem__("count", Array(np.zeros((), np.int32))), True, "'count': dtype int32"),
        (lambda r: r.__setitem__("intruder", Array(np.zeros(1, np.float32))), False, "unexpected key 'intruder'"),
    ],
    ids=["missing", "unexpected", "shape", "dtype", "int-dtype", "unexpected-nonstrict"],
)
def test_reference_validation_names_the_key(mutate, strict, match):
    reference = {"weight": torch.zeros(2, 3), "bias": torch.zeros(2), "count": torch.tensor(0)}
    record = fed.state_dict_to_arrays(reference)
    mutate(record)
    with pytest.raises(ValueError, match=match):
        fed.arrays_to_state_dict(record, reference=reference, strict=strict)


def test_reference_partial_and_corrupt_records():
    reference = {"weight": torch.zeros(2, 3), "bias": torch.zeros(2)}
    partial = fed.state_dict_to_arrays({"bias": torch.ones(2)})
    assert list(fed.arrays_to_state_dict(partial, reference=reference, strict=False)) == ["bias"]
    # A peer controls the metadata and the bytes: contradicting ones are refused.
    lying = ArrayRecord({"bias": Array(dtype="float32", shape=(5,), stype="numpy.ndarray", data=partial["bias"].data)})
    with pytest.raises(ValueError, match="'bias': array data .* contradicts its metadata"):
        fed.arrays_to_state_dict(lying, reference=reference, strict=False)
    garbage = ArrayRecord({"bias": Array(dtype="float32", shape=(2,), stype="numpy.ndarray", data=b"junk")})
    with pytest.raises(ValueError, match="'bias': array data cannot be decoded"):
        fed.arrays_to_state_dict(garbage)


def test_adapter_round_trip_sends_only_lora_weights():
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1,
    )  # fmt: skip

    def make(seed):
        torch.manual_seed(seed)
        lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        return get_peft_model(LlamaForCausalLM(config), lora)

    sender, receiver = make(0), make(1)
    record = fed.adapter_state_to_arrays(sender)
    assert len(record) == 2 * 2 * 2  # layers x modules x (A, B)
    assert all(".lora_A." in k or ".lora_B." in k for k in record), list(record)
    before = {k: v.clone() for k, v in receiver.base_model.model.state_dict().items() if "lora" not in k}
    fed.load_adapter_arrays(receiver, record)
    sent, got = get_peft_model_state_dict(sender), get_peft_model_state_dict(receiver)
    assert list(sent) == list(got) and all(torch.equal(sent[k], got[k]) for k in sent)
    after = receiver.base_model.model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items())  # base weights untouched

    key = next(k for k in record if ".lora_A." in k)
    record[key] = Array(np.zeros((3, 16), np.float32))
    with pytest.raises(ValueError, match=f"'{key}': shape"):
        fed.load_adapter_arrays(receiver, record)


# ---------------------------------------------------------------------------------------------------------------
# Replies and aggregation
# ---------------------------------------------------------------------------------------------------------------


def test_weighted_average_and_mismatches():
    a = ArrayRecord({"w": Array(np.array([1.0, 2.0], np.float32)), "n": Array(np.array([1, 4], np.int64))})
    b = ArrayRecord({"w": Array(np.array([3.0, 6.0], np.float32)), "n": Array(np.array([2, 5], np.int64))})
    avg = fed.weighted_average([a, b], [1, 3])
    np.testing.assert_array_equal(avg["w"].numpy(), np.array([2.5, 5.0], np.float32))
    assert avg["w"].numpy().dtype == np.float32
    np.testing.assert_array_equal(avg["n"].numpy(), np.array([2, 5]))  # 1.75 -> 2, 4.75 -> 5
    assert avg["n"].numpy().dtype == np.int64

    c = ArrayRecord({"w": Array(np.zeros(2, np.float32)), "m": Array(np.zeros(2, np.int64))})
    with pytest.raises(ValueError, match="key 'n' is missing from record 1"):
        fed.weighted_average([a, c], [1, 1])
    d = ArrayRecord({"w": Array(np.zeros(3, np.float32)), "n": Array(np.zeros(2, np.int64))})
    with pytest.raises(ValueError, match="'w': record 1 has shape"):
        fed.weighted_average([a, d], [1, 1])
    e = ArrayRecord({"w": Array(np.zeros(2, np.float64)), "n": Array(np.zeros(2, np.int64))})
    with pytest.raises(ValueError, match="'w': record 1 has dtype float64"):
        fed.weighted_average([a, e], [1, 1])
    with pytest.raises(ValueError, match="weights"):
        fed.weighted_average([a, b], [0, 0])


def _reply(content=None, error=None):
    instruction = Message(RecordDict(), dst_node_id=101, message_type="train")
    instruction.metadata.__dict__["_message_id"] = "m1"
    if error is not None:
        return Message(error, reply_to=instruction)
    return Message(RecordDict(content), reply_to=instruction)


def test_reply_checks_name_what_is_wrong():
    """The one reply-check API (`reply_arrays`, `reply_metric`): every malformed reply is a ValueError naming it."""
    fed.LocalGrid(ClientApp(), 1)  # sets Flower's task identity, which Message() needs
    arrays = ArrayRecord({"w": Array(np.zeros(2, np.float32))})
    reference = {"w": np.zeros(2, np.float32)}
    good = _reply({"arrays": arrays, "metrics": MetricRecord({"num-examples": 3})})
    assert fed.reply_metric(good, "num-examples", integer=True) == 3
    np.testing.assert_array_equal(fed.reply_arrays(good, reference)["w"], np.zeros(2, np.float32))
    cases = [
        (_reply({"metrics": MetricRecord({"num-examples": 3})}), "has no 'arrays' record"),
        (_reply({"arrays": arrays, "metrics": MetricRecord({"loss": 1.0})}), "metric 'num-examples' is missing"),
        (_reply({"arrays": arrays}), "has no MetricRecord 'metrics'"),
        (_reply({"arrays": arrays, "metrics": MetricRecord({"num-examples": float("nan")})}), "finite number"),
        (_reply(error=Error(code=2, reason="boom")), r"replied with an error \(code 2\): boom"),
    ]
    for message, match in cases:
        with pytest.raises(ValueError, match=match):
            fed.reply_arrays(message, reference)
            fed.reply_metric(message, "num-examples")


# ---------------------------------------------------------------------------------------------------------------
# LocalGrid
# ---------------------------------------------------------------------------------------------------------------


def test_local_grid_fedavg_three_clients_two_rounds(app):
    config = {"num-server-rounds": 2, "client-step": 0.5, "min-nodes": 3}
    result = fed.run_local(app.server, app.client, num_nodes=3, run_config=config)
    assert_expected(result, app, 3, **config)
    # The closed form by hand: weights 1, 1, 2 -> each round moves w by 0.5 * (1*1 + 1*2 + 2*3) / 4 = 1.125.
    np.testing.assert_array_equal(result["arrays"]["w"].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3) + 2.25)


@pytest.mark.parametrize(
    "mode, match", [("no-arrays", "has no 'arrays' record"), ("no-num-examples", "metric 'num-examples' is missing")]
)
def test_local_grid_malformed_replies_raise(app, mode, match):
    with pytest.raises(ValueError, match=match):
        fed.run_local(app.server, app.client, num_nodes=2, run_config={"reply-mode": mode})


def test_local_grid_client_exceptions_surface(app):
    with pytest.raises(fed.ClientAppError, match=r"node 101 \(partition-id 0\).*'train'.*told to fail") as info:
        fed.run_local(app.server, app.client, num_nodes=2, run_config={"reply-mode": "raise"})
    assert isinstance(info.value.__cause__, RuntimeError)
    # As on Flower's runtimes: the failure comes back as an error reply, which the guarded strategy records as failed
    # (the toy ServerApp then raises, naming it).
    with pytest.raises(ValueError, match=r"node 101: error reply \(code 2\).*told to fail"):
        fed.run_local(app.server, app.client, num_nodes=2, run_config={"reply-mode": "raise"}, client_errors="reply")


def test_local_grid_isolates_messages_and_keeps_node_state():
    client = ClientApp()

    @client.train()
    def train(msg, context):
        msg.content["arrays"]["w"] = Array(np.full(2, -1.0, np.float32))  # must not leak to the server or peers
        context.state["seen"] = MetricRecord({"n": context.state["seen"]["n"] + 1 if "seen" in context.state else 1})
        return Message(RecordDict({"metrics": MetricRecord({"n": context.state["seen"]["n"]})}), reply_to=msg)

    grid = fed.LocalGrid(client, 2, node_configs=[{"name": "a"}, {"name": "b"}], run_config={"k": 1})
    sent = ArrayRecord({"w": Array(np.zeros(2, np.float32))})
    for expected in (1, 2):
        out = [Message(RecordDict({"arrays": sent}), dst_node_id=n, message_type="train") for n in grid.get_node_ids()]
        replies = grid.send_and_receive(out)
        assert [r.content["metrics"]["n"] for r in replies] == [expected, expected]
        assert [r.metadata.reply_to_message_id for r in replies] == [m.metadata.message_id for m in out]
    np.testing.assert_array_equal(sent["w"].numpy(), np.zeros(2, np.float32))
    assert grid.contexts[102].node_config == {"partition-id": 1, "num-partitions": 2, "name": "b"}


def test_save_and_load_result(tmp_path, monkeypatch):
    context = Context(run_id=7, node_id=0, node_config={}, state=RecordDict(), run_config={})
    monkeypatch.setenv(fed.RESULT_DIR_ENV, str(tmp_path))
    fed.save_result(context, {"arrays": ArrayRecord({"w": Array(np.arange(3.0))}), "m": MetricRecord({"x": 1})})
    loaded = fed.load_result(tmp_path / "result-7.pb")
    np.testing.assert_array_equal(loaded["arrays"]["w"].numpy(), np.arange(3.0))
    assert loaded["m"]["x"] == 1 and set(loaded) == set(context.state.keys())


# ---------------------------------------------------------------------------------------------------------------
# Flower's engines
# ---------------------------------------------------------------------------------------------------------------


def test_ray_simulation_fedavg(app):
    # run_config travels to the nodes (client-step) and to the server (num-server-rounds, min-nodes).
    config = {"num-server-rounds": 2, "client-step": 0.5, "min-nodes": 2}
    result = fed.run_simulation(app.server, app.client, num_supernodes=2, run_config=config)
    assert_expected(result, app, 2, **config)


def test_loopback_deployment_fedavg(app):
    config = {"num-server-rounds": 1, "client-step": 2.0, "min-nodes": 2}
    with fed.LoopbackFederation(num_supernodes=2) as federation:
        result = federation.run(APP_DIR, run_config=config, timeout=240)
        workdir, pids = federation.workdir, federation.pids
        children = [child for pid in pids for child in fed._descendants(pid)]
    assert_expected(result, app, 2, **config)
    # Everything it started is gone (flower-superexec included), and so is its private FLWR_HOME.
    assert children and not any(fed._alive(*child) for child in children)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    assert not workdir.exists()


@pytest.mark.slow
def test_loopback_deployment_reports_failures():
    # `flwr run` exits 0 here; the failure must still surface, with the ClientApp's message.
    with pytest.raises(RuntimeError, match=r"`flwr run` failed(.|\n)*told to fail"):
        fed.run_deployment(APP_DIR, num_supernodes=2, run_config={"reply-mode": "raise"}, timeout=240)
