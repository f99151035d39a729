"""`hf-ext reproduce amplitudes` and the Gradio demo."""

import json

import numpy as np
import pytest

from hf_ext.amplitudes import demo as D
from hf_ext.amplitudes import reproduce as R
from hf_ext.amplitudes.field_theory import field_theory_amplitude


def test_parser_defaults(monkeypatch, tmp_path):
    # the default output folder follows the work dir (HF_EXT_HOME when set, else ./runs)
    monkeypatch.delenv("HF_EXT_HOME", raising=False)
    args = R.make_parser().parse_args([])
    assert (args.full, args.out, args.seed, args.no_table) == (False, "runs/amplitudes", 0, False)
    monkeypatch.setenv("HF_EXT_HOME", str(tmp_path))
    assert R.make_parser().parse_args([]).out == str(tmp_path / "amplitudes")
    assert R.make_parser().parse_args(["--full"]).full


def test_quick_run_passes_every_identity(tmp_path, capsys):
    results = R.main(["--out", str(tmp_path)])
    assert results["all_passed"] and results["mode"] == "quick"
    names = " ".join(r["identity"] for r in results["identities"])
    for key in (
        "u_equations",
        "B(0.7, 1.3)",
        "A_5",
        "B(a-1,b+1)",
        "type I",
        "picture independence",
        "ζ(3)",
        "3 gluons",
        "4 gluons",
        "5 gluons",
        "MHV 4",
        "MHV 5",
        "Parke-Taylor",
        "cycle-class",
        "continued 5-gluon residue",
        "-4A_F³ bosonic",
        "n x n symmetric determinant",
    ):
        assert key in names
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["identities"] == results["identities"]
    assert (tmp_path / "table" / "config.json").is_file() and results["table"]["rows"] > 0
    out = capsys.readouterr().out
    assert "error" in out and "tol" in out and "4 gluons" in out


def test_demo_curves_approach_field_theory():
    data = D.amplitude_curves(5, D.DEFAULT_X[5], "alpha", 0.001, 2.0, 1.0)
    ft = field_theory_amplitude(np.array([0.9, 1.7, 1.2, 0.8, 1.4]))
    assert data["field_theory"][0] == pytest.approx(ft)
    assert abs(data["string"][0] / ft - 1) < 1e-5 and abs(data["string"][-1] / ft - 1) > 0.1
    scan = D.amplitude_curves(4, D.DEFAULT_X[4], "X13", -2.5, 3.0, 1.0)  # crosses the poles at X13 = 0, -1, -2
    assert scan["x"].min() < -2 and np.all(np.isfinite(scan["string"]))


def test_demo_errors_are_gradio_errors_and_the_app_builds():
    import gradio as gr

    with pytest.raises(gr.Error, match="needs 5 planar variables"):
        D.plot_amplitude(5, "1, 2", "alpha", 0.1, 1.0, 1.0)
    with pytest.raises(gr.Error, match="Euclidean region"):
        D.plot_amplitude(4, "0.7, -1.3", "alpha", 0.1, 1.0, 1.0, "curve")
    with pytest.raises(gr.Error, match="lo < hi"):
        D.plot_amplitude(4, "0.7, 1.3", "alpha", 1.0, 0.1, 1.0)
    with pytest.raises(gr.Error, match=r"α′ value must be in \[.*\], got -1"):
        D.build_table(["tr_phi3"], "-1", 1)
    fig, md = D.plot_amplitude(4, "0.7, 1.3", "X24", 0.2, 2.0, 0.5)
    assert fig.axes and "N = 4" in md
    frame = D.build_table(["tr_phi3", "gluon_super"], "1.0", 1)
    assert set(frame["theory"]) == {"tr_phi3", "gluon_super"}
    assert isinstance(D.build_demo(), gr.Blocks)


def test_demo_five_gluon_tab_reports_the_f3_order_and_refuses_bad_input(monkeypatch):
    import gradio as gr

    # what is checked is the report and the refusals, not the Space's 60-s request limit: on a loaded machine
    # (the suite's other worker busy) the fit can overrun it
    monkeypatch.setattr(D, "REQUEST_SECONDS", 600.0)
    md = D.five_gluon_report(3, 0.3, "bosonic")
    assert "-4A_F³" in md and "symmetric determinant" in md
    # the α′³ coefficient printed next to its Berends-Giele prediction agrees to the printed digits' tolerance
    line = md.split("α′³: ")[1]
    got, pred = float(line.split(" ")[0]), float(line.split("= ")[1].split(",")[0])
    assert got == pytest.approx(pred, rel=2e-5)
    for args, match in (((0, -1.0, "bosonic"), "α′"), ((0, 0.3, "heterotic"), "theory"), ((None, 0.3), "seed")):
        with pytest.raises(gr.Error, match=match):
            D.five_gluon_report(*args)
