"""The core's one base strategy (`GuardedStrategy`: replay protection, robust screening, round records) and its one
run-config parser (`FlowerRunConfig`: strict types, unknown keys refused by name)."""

import os

os.environ.update({"HF_HUB_OFFLINE": "1", "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"})

import importlib  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402

from hf_ext.core import federated as fed  # noqa: E402
from hf_ext.core.federated.strategy import GUARD_RECORD, NONCE_KEY  # noqa: E402

APP_DIR = Path(__file__).parent / "flower_app"


# --- run config -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Section:
    seed: int = 0
    dataset: str = "digits"


def _unseen(value):
    return None if int(value) < 0 else int(value)


def _unseen_dump(value):
    return -1 if value is None else value


@dataclass(frozen=True)
class _Config(fed.FlowerRunConfig):
    rounds: int = field(default=3, metadata={"run_config": "num-server-rounds"})
    learning_rate: float = field(default=1e-3, metadata={"run_config": "lr"})
    sparsify: bool = True
    layers: tuple[int, ...] = (5,)
    name: str = ""
    unseen: int | None = field(default=None, metadata={"run_config_parse": _unseen, "run_config_dump": _unseen_dump})
    data: _Section = field(default_factory=_Section, metadata={"run_config_keys": {"seed": "data-seed"}})
    internal: str = field(default="x", metadata={"run_config": None})


def test_run_config_round_trip_renames_sections_and_custom_conversions():
    config = _Config.from_run_config(
        {"num-server-rounds": "7", "lr": 1, "sparsify": "false", "layers": "4,5", "unseen": 3, "data-seed": 2.0}
    )
    assert config == _Config(7, 1.0, False, (4, 5), "", 3, _Section(seed=2))
    dumped = config.to_run_config()
    assert dumped["layers"] == "4,5" and dumped["data-seed"] == 2 and "internal" not in dumped
    assert _Config.from_run_config(dumped) == config
    assert _Config.from_run_config({"unseen": -1}).unseen is None
    assert _Config.from_run_config({}) == _Config()
    assert set(_Config.run_config_keys()) == {
        "num-server-rounds", "lr", "sparsify", "layers", "name", "unseen", "data-seed", "dataset",
    }  # fmt: skip


@dataclass
class _MutableConfig(fed.FlowerRunConfig):
    rounds: int = 3


@dataclass(frozen=True)
class _ListConfig(fed.FlowerRunConfig):
    layers: list = field(default_factory=list, metadata={"run_config": None})
    rounds: int = 3


def test_one_parse_per_run_config_is_shared_only_when_nobody_can_change_it():
    """Apps rebuild their settings from the same run config on every message: a frozen, hashable result is parsed
    once and shared; a mutable one (not frozen, or holding a list) is parsed afresh for every caller."""
    flat = {"num-server-rounds": 7, "sparsify": True}
    first = _Config.from_run_config(flat)
    assert _Config.from_run_config(dict(flat)) is first  # an equal mapping: the same object
    assert _Config.from_run_config({**flat, "num-server-rounds": 8}).rounds == 8
    # the key keeps each value's type: True == 1 in Python, but 1 is no bool
    with pytest.raises(ValueError, match="'sparsify' must be a bool"):
        _Config.from_run_config({**flat, "sparsify": 1})
    mutable = _MutableConfig.from_run_config({"rounds": 2})
    assert _MutableConfig.from_run_config({"rounds": 2}) is not mutable
    assert _ListConfig.from_run_config({"rounds": 2}) is not _ListConfig.from_run_config({"rounds": 2})


@pytest.mark.parametrize(
    "run_config, match",
    [
        (
            {"num-server-round": 3, "local-step": 1},
            r"unknown _Config run-config key\(s\) \['local-step', 'num-server-round'\]",
        ),
        ({"internal": "y"}, r"unknown .*\['internal'\]"),
        ({"num-server-rounds": True}, "'num-server-rounds' must be an integer"),
        ({"num-server-rounds": 2.5}, "'num-server-rounds' must be an integer"),
        ({"num-server-rounds": "many"}, "'num-server-rounds' must be an integer"),
        ({"lr": "fast"}, "'lr' must be a number"),
        ({"lr": False}, "'lr' must be a number"),
        ({"sparsify": "yes"}, "'sparsify' must be a bool"),
        ({"sparsify": 1}, "'sparsify' must be a bool"),
        ({"layers": "4,x"}, "'layers' must be comma-separated integers"),
        ({"name": True}, "'name' must be a string"),
        ({"unseen": "none"}, "run-config key 'unseen'"),
    ],
)
def test_run_config_refuses_unknown_keys_and_wrong_types_by_name(run_config, match):
    with pytest.raises(ValueError, match=match):
        _Config.from_run_config(run_config)


# --- strategy, by hand ------------------------------------------------------------------------------------------------

SHAPE = (4, 3)


def _strategy(ref=1.0, **kw):
    fed.LocalGrid(ClientApp(), 1)  # sets Flower's task identity, which Message() needs
    strategy = fed.GuardedStrategy(fraction_train=1.0, fraction_evaluate=0.0, **kw)
    strategy.reference = {"w": np.full(SHAPE, ref, np.float32)}  # what configure_train keeps: the global it sent
    return strategy


def _instruction(strategy, server_round, node):
    config = ConfigRecord({"server-round": server_round, NONCE_KEY: strategy.round_nonce(server_round, node)})
    message = Message(RecordDict({"config": config}), dst_node_id=node, message_type="train")
    message.metadata.__dict__["_message_id"] = f"m{server_round}-{node}"
    return message


def _reply(strategy, server_round, node, value, *, n=1, instruction=None):
    instruction = instruction or _instruction(strategy, server_round, node)
    content = {
        "arrays": ArrayRecord({"w": Array(np.full(SHAPE, value, np.float32))}),
        "metrics": MetricRecord({"num-examples": n}),
    }
    return fed.guarded_reply(instruction, content)


def test_guarded_reply_echoes_the_nonce_and_the_default_is_weighted_fedavg():
    strategy = _strategy()
    replies = [_reply(strategy, 1, 101, 1.0, n=1), _reply(strategy, 1, 102, 4.0, n=3)]
    assert replies[0].content[GUARD_RECORD][NONCE_KEY] == strategy.round_nonce(1, 101)
    arrays, metrics = strategy.aggregate_train(1, replies)
    np.testing.assert_allclose(arrays["w"].numpy(), (1.0 * 1 + 4.0 * 3) / 4)
    assert strategy.records[1].accepted == [101, 102] and strategy.aggregated == [1]
    assert metrics["num-accepted"] == 2 and metrics["num-rejected"] == 0


def test_a_replayed_reply_from_an_old_round_or_another_node_is_refused_and_named():
    strategy = _strategy()
    old = _reply(strategy, 1, 103, 7.0)
    strategy.aggregate_train(1, [_reply(strategy, 1, 101, 1.0), _reply(strategy, 1, 102, 2.0), old])
    assert strategy.records[1].accepted == [101, 102, 103]
    # round 2: node 103's reply is the one it sent in round 1 (same bytes, old nonce)
    strategy.round_nonce(2, 103)
    arrays, _ = strategy.aggregate_train(2, [_reply(strategy, 2, 101, 1.0), _reply(strategy, 2, 102, 3.0), old])
    np.testing.assert_allclose(arrays["w"].numpy(), 2.0)
    assert "stale or replayed" in strategy.records[2].rejected[103]
    # node 102 answers with node 101's instruction (its nonce): refused too
    strategy.round_nonce(3, 102)  # 102 was sent its own instruction
    stolen = _reply(strategy, 3, 102, 3.0, instruction=_instruction(strategy, 3, 101))
    stolen.metadata.__dict__["_src_node_id"] = 102
    strategy.aggregate_train(3, [_reply(strategy, 3, 101, 1.0), stolen])
    assert "stale or replayed" in strategy.rejected[3]["102"]
    # no nonce at all (a client that does not use guarded_reply)
    bare = _reply(strategy, 4, 101, 1.0)
    del bare.content[GUARD_RECORD]
    strategy.aggregate_train(4, [bare])
    assert "stale or replayed" in strategy.records[4].rejected[101] and strategy.aggregated == [1, 2, 3]


def test_values_just_under_the_absolute_bound_are_screened_out_relative_to_the_reference_and_peers():
    """The issue's attack: an update of 9.9e5 (under the 1e6 absolute cap) moved a 0.02 mean to 3e5. Now it is
    refused as an outlier, named, and the honest mean is what the honest clients alone give."""
    honest = [0.021, 0.019, 0.020]
    strategy = _strategy(ref=0.02)
    replies = [_reply(strategy, 1, 101 + i, v) for i, v in enumerate(honest)]
    attacker = _reply(strategy, 1, 104, 9.9e5)
    arrays, metrics = strategy.aggregate_train(1, [*replies, attacker])
    np.testing.assert_allclose(arrays["w"].numpy(), np.mean(honest), rtol=1e-6)
    assert set(strategy.records[1].rejected) == {104} and "outlier" in strategy.records[1].rejected[104]
    assert metrics["num-rejected"] == 1
    # without screening the same round is poisoned (the attack is real)
    unscreened = _strategy(ref=0.02, screen=False)
    replies = [_reply(unscreened, 1, 101 + i, v) for i, v in enumerate(honest)]
    arrays, _ = unscreened.aggregate_train(1, [*replies, _reply(unscreened, 1, 104, 9.9e5)])
    assert float(arrays["w"].numpy().mean()) > 1e5


def test_robust_screen_rules():
    ref = {"w": np.zeros(4)}
    ups = {1: {"w": np.full(4, 1.0)}, 2: {"w": np.full(4, 1.5)}, 3: {"w": np.full(4, 2.0)}, 4: {"w": np.full(4, 30.0)}}
    assert set(fed.robust_screen(ups, ref)) == {4}  # 30 > 10 x median distance 3.5
    assert fed.robust_screen({k: ups[k] for k in (1, 2, 3)}, ref) == {}  # honest spread passes
    # two updates: the median is no help; only the reference-relative bound applies
    two = {1: {"w": np.full(4, 1.0)}, 2: {"w": np.full(4, 500.0)}}
    assert fed.robust_screen(two, {"w": np.full(4, 0.0)}) == {}  # a zero reference gives no scale
    assert set(fed.robust_screen(two, {"w": np.full(4, 1.0)})) == {2}  # 499 > 100 x ||ref|| ... per element 1
    # without a reference: distance to the coordinate-wise median
    assert set(fed.robust_screen(ups, None)) == {4}
    # integer arrays and arrays of differing shapes are not compared
    assert fed.robust_screen({1: {"n": np.arange(3)}, 2: {"n": np.arange(3) * 100}}, None) == {}


def test_duplicates_failures_and_result_records():
    strategy = _strategy()
    from flwr.app import Error

    instruction = _instruction(strategy, 1, 103)
    failed = Message(Error(code=2, reason="boom"), reply_to=instruction)
    dup = [_reply(strategy, 1, 101, 1.0), _reply(strategy, 1, 101, 9.0), _reply(strategy, 1, 102, 3.0), failed]
    arrays, metrics = strategy.aggregate_train(1, dup)
    np.testing.assert_allclose(arrays["w"].numpy(), 3.0)
    rec = strategy.records[1]
    assert "more than one reply" in rec.rejected[101] and rec.accepted == [102]
    assert rec.failed[103].startswith("error reply (code 2): boom") and metrics["num-failed"] == 1
    saved = strategy.result_records()
    assert dict(saved["accepted"]) == {"1": "102"} and "1:101" in saved["rejected"] and "1:103" in saved["failed"]
    # a round with nothing accepted keeps the global model (None) and does not count as aggregated
    arrays, _ = strategy.aggregate_train(2, [_reply(strategy, 2, 101, float("nan"))])
    assert arrays is None and strategy.aggregated == [1] and "NaN" in strategy.rejected[2]["101"]


def test_claimed_partition_is_bound_to_the_first_node():
    strategy = _strategy(num_partitions=2)

    def claim(node, pid):
        msg = _reply(strategy, 1, node, 1.0)
        msg.content["metrics"]["partition-id"] = pid
        return strategy.claimed_partition(msg)

    assert claim(101, 0) == 0 and claim(101, 0) == 0
    with pytest.raises(ValueError, match="which node 101 holds"):
        claim(102, 0)
    with pytest.raises(ValueError, match="earlier claimed 0"):
        claim(101, 1)
    with pytest.raises(ValueError, match=r"partition-id.*\[0, 1\]"):
        claim(103, 2)


# --- strategy on a grid (the toy app) ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app():
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(APP_DIR))
        yield SimpleNamespace(
            server=importlib.import_module("hfext_fedtest.server_app").app,
            client=importlib.import_module("hfext_fedtest.client_app").app,
            task=importlib.import_module("hfext_fedtest.task"),
        )


def test_nonces_travel_per_node_and_a_client_that_does_not_echo_them_is_named(app):
    state = fed.run_local(app.server, app.client, num_nodes=2, run_config={"min-nodes": 2})
    assert dict(state["accepted"]) == {"1": "101,102", "2": "101,102"} and not dict(state["rejected"])
    with pytest.raises(ValueError, match=r"round 1: node 101: node 101: stale or replayed"):
        fed.run_local(app.server, app.client, num_nodes=2, run_config={"reply-mode": "no-nonce"})


def test_the_toy_app_refuses_an_unknown_run_config_key(app):
    with pytest.raises(ValueError, match=r"unknown FedTestConfig run-config key\(s\) \['client-steps'\]"):
        fed.run_local(app.server, app.client, num_nodes=2, run_config={"client-steps": 1.0})
