"""`--resume`: the reproduction's log of finished federations (`hf_ext.h2tune.federation_log`)."""

import dataclasses

from hf_ext.h2tune.federation_log import FEDERATION_LOG, FederationLog
from hf_ext.h2tune.presets import QUICK
from hf_ext.h2tune.task import RunConfig

RESULT = {"accuracy": {"client-0": [0.25, 0.5]}, "bytes_sent_per_round": 1024}


def test_a_logged_federation_is_reused_only_under_the_same_settings(tmp_path):
    run = RunConfig(cache_dir=str(tmp_path / "cache"), **QUICK)
    FederationLog(tmp_path, run, "inprocess").add("local-only", 0, RESULT, 12.0)
    assert (tmp_path / FEDERATION_LOG).is_file()
    # the seed and the folders are not settings: another seed's run config or cache folder finds the line
    same = FederationLog(tmp_path, dataclasses.replace(run, seed=7, cache_dir="elsewhere"), "inprocess", resume=True)
    assert same.get("local-only", 0) == RESULT and same.get("local-only", 1) is None and same.reused == 1
    assert same.get("h2tune", 0) is None  # another variant
    assert FederationLog(tmp_path, run, "inprocess").get("local-only", 0) is None  # no --resume: nothing reused
    changed = FederationLog(tmp_path, dataclasses.replace(run, local_steps=run.local_steps + 1), "inprocess", True)
    assert changed.get("local-only", 0) is None  # a knob that changes the numbers
    assert FederationLog(tmp_path, run, "simulation", resume=True).get("local-only", 0) is None  # another engine


def test_the_federation_that_saves_the_clients_is_rerun_when_they_are_gone(tmp_path):
    run = RunConfig(cache_dir=str(tmp_path / "cache"), **QUICK)
    FederationLog(tmp_path, run, "inprocess").add("h2tune", 0, RESULT, 30.0)
    log = FederationLog(tmp_path, run, "inprocess", resume=True)
    assert log.get("h2tune", 0, needs_clients=True) is None  # out/clients/<name>/adapter missing
    for spec in run.clients:
        (tmp_path / "clients" / spec.name / "adapter").mkdir(parents=True)
    assert log.get("h2tune", 0, needs_clients=True) == RESULT
