"""The ORCA Space launched on 127.0.0.1 and driven with gradio_client, including a bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

import hf_ext
from hf_ext.core.cli import load_space_app


@pytest.fixture(scope="module")
def space_url():
    demo = load_space_app(hf_ext.get_method("orca")).build_demo()
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True,
                            share=False)
    yield url
    demo.close()


def test_space_compares_baseline_and_orca(space_url):
    from gradio_client import Client

    client = Client(space_url, verbose=False)
    table, image, reading = client.predict(3.0, 4000, "mmoe", 1, 0, None, api_name="/compare")
    assert reading.startswith("**Reading:**") and "baseline" in reading
    rows = {r[0]: r[1:] for r in table["data"]}
    assert "DT macro-F1 ↑" in rows and "CTR AUC ↑" in rows  # headers say whether higher is better
    assert all(isinstance(v, (int, float)) for v in rows["CTR AUC ↑"])
    assert 0.0 <= rows["true share in moderate bins 2–5"][0] <= 1.0
    assert Path(image).is_file() and Path(image).stat().st_size > 1000


def test_space_reports_bad_input_readably(space_url, tmp_path):
    from gradio_client import Client, handle_file

    client = Client(space_url, verbose=False)
    bad_csv = tmp_path / "qk.csv"
    bad_csv.write_text("user_id,item_id,click\n1,2,1\n")  # no read_time, gender, ... columns
    with pytest.raises(Exception, match="read_time|missing"):
        client.predict(3.0, 4000, "mmoe", 1, 0, handle_file(str(bad_csv)), api_name="/compare")
    with pytest.raises(Exception, match="less than minimum value 2000"):  # the slider's own bound, also readable
        client.predict(3.0, 100, "mmoe", 1, 0, None, api_name="/compare")
