"""`hf_ext.core.run_log`: the append-only logs long reproductions resume from."""

import json

from hf_ext.core.run_log import append_record, read_records, settings_key


def test_records_come_back_in_order_and_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "logs" / "runs.jsonl"
    assert read_records(path) == []  # nothing yet: no file, no error
    append_record(path, {"seed": 0, "auc": 0.61})
    append_record(path, {"seed": 1, "auc": float("nan")})
    with open(path, "a") as f:  # a writer killed mid-line, and a line that is JSON but no object
        f.write('{"seed": 2, "au')
    with open(path, "a") as f:
        f.write("\n[1, 2]\n")
    records = read_records(path)
    assert [r["seed"] for r in records] == [0, 1]
    assert records[0]["auc"] == 0.61 and records[1]["auc"] != records[1]["auc"]  # NaN survives the round trip
    append_record(path, {"seed": 3})  # appending after a torn line still gives a readable record
    assert [r["seed"] for r in read_records(path)] == [0, 1, 3]


def test_settings_key_ignores_order_and_sees_every_value():
    a = {"steps": 40, "lr": 5e-4, "depths": [1, 3]}
    assert settings_key(a) == settings_key(dict(reversed(list(a.items()))))
    assert settings_key(a) != settings_key({**a, "steps": 41})
    assert settings_key(a) != settings_key({**a, "depths": [3, 1]})
    assert len(settings_key(a)) == 16 and json.dumps(a)  # a short hex digest of JSON settings


def _append_many(path, tag: str, n: int) -> None:
    from hf_ext.core.run_log import append_record

    for i in range(n):
        append_record(path, {"tag": tag, "i": i, "pad": "x" * 20_000})  # longer than any stream buffer


def test_processes_appending_to_one_log_never_interleave_lines(tmp_path):
    import multiprocessing

    path = tmp_path / "runs.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(path, tag, 30)) for tag in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    records = read_records(path)
    assert len(path.read_text().splitlines()) == len(records) == 60  # every line whole
    for tag in "ab":
        assert [r["i"] for r in records if r["tag"] == tag] == list(range(30))


def test_run_log_hands_back_a_run_only_under_its_settings_and_id(tmp_path):
    from hf_ext.core.run_log import RunLog

    path = tmp_path / "runs.jsonl"
    log = RunLog(path, {"steps": 40, "lr": 5e-4})
    log.add({"variant": "h2tune", "seed": 0}, result={"acc": 0.5}, seconds=3.0)
    again = RunLog(path, {"lr": 5e-4, "steps": 40})  # the same settings, in another order
    record = again.get(variant="h2tune", seed=0)
    assert record["result"] == {"acc": 0.5} and record["seconds"] == 3.0 and again.reused == 1
    assert again.get(variant="h2tune", seed=1) is None and again.get(variant="local-only", seed=0) is None
    assert RunLog(path, {"steps": 41, "lr": 5e-4}).get(variant="h2tune", seed=0) is None  # other settings
    assert RunLog(path, {"steps": 40, "lr": 5e-4}, reuse=False).get(variant="h2tune", seed=0) is None
