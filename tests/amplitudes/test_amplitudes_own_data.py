"""Amplitudes on the user's own kinematics (issue 36): `hf-ext train amplitudes` tabulates the user's points (planar
variables, Mandelstams or momenta per row) as a Hub table with a training record → `AmplitudeTable.from_pretrained`
→ `hf-ext evaluate amplitudes` (a second, independent evaluator) → `hf-ext push --dry-run` with no extra flag; bad
kinematics fail naming the column or the row."""

import numpy as np
import pytest
from helpers.own_data import check_own_data_path

from hf_ext.amplitudes.closed_forms import beta_amplitude
from hf_ext.amplitudes.data import KINEMATICS_SCHEMA, read_kinematics, write_example_kinematics
from hf_ext.amplitudes.field_theory import field_theory_amplitude
from hf_ext.amplitudes.kinematics import mandelstams
from hf_ext.core.cli import main as cli
from hf_ext.core.user_data import UserDataError


def test_own_kinematics_to_a_table_evaluated_and_pushed(tmp_path):
    from hf_ext.amplitudes.tables import AmplitudeTable

    data = write_example_kinematics(tmp_path / "my data" / "kinematics.csv")
    out = tmp_path / "table"
    result = check_own_data_path(
        "amplitudes",
        tmp_path,
        data=data,
        artifact=out,
        train_argv=["--data", data, "--output_dir", str(out), "--alpha", "0.5", "1"],
        load=AmplitudeTable.from_pretrained,
        expect_metrics=["max relative residual vs a second evaluator", "max stated relative error"],
    )
    record, evaluation = result["record"], result["evaluation"]
    assert record["config"]["kinematics_forms"] == {"mandelstam": 1, "momenta": 1, "planar": 2}
    assert record["config"]["checked_rows"] == 8 and record["config"]["unchecked_rows"] == 8  # tr_phi3 / field theory
    assert {m["name"]: m["value"] for m in evaluation["metrics"]} == {m["name"]: m["value"] for m in record["metrics"]}
    assert all(m["value"] < 1e-9 for m in record["metrics"])
    rows = AmplitudeTable.from_pretrained(out).dataset
    assert len(rows) == 4 * 2 * 2  # rows x α′ x theories, in that order
    # closed forms: A_4 = B(α′X13, α′X24) (row 0 at α′ = 0.5), field theory 1/X13 + 1/X24 (row 1 at α′ = 1)
    assert rows[0]["theory"] == "tr_phi3" and rows[0]["alpha_prime"] == 0.5
    assert rows[0]["amplitude"] == pytest.approx(float(beta_amplitude(0.35, 0.65)), rel=1e-13)
    assert rows[7]["theory"] == "field_theory" and rows[7]["x"] == [2.5, 0.4]
    assert rows[7]["amplitude"] == pytest.approx(1 / 2.5 + 1 / 0.4, rel=1e-14)
    assert "Kinematics: the user's kinematics" in (out / "README.md").read_text()


def test_the_three_forms_give_the_same_planar_variables(tmp_path):
    rng = np.random.default_rng(1)
    x5 = rng.uniform(0.3, 2.0, 5)
    s = mandelstams(x5, 5)[np.triu_indices(5, 1)]
    path = tmp_path / "k.jsonl"
    import json

    path.write_text(
        json.dumps({"n": 5, **{f"X{i}{j}": v for (i, j), v in zip([(1, 3), (1, 4), (2, 4), (2, 5), (3, 5)], x5)}})
        + "\n"
        + json.dumps({"n": 5, **{f"s{a}{b}": float(v) for (a, b), v in zip(_pairs(5), s)}})
        + "\n"
    )
    kin, _ = read_kinematics(path)
    assert kin.form == ["planar", "mandelstam"]
    np.testing.assert_allclose(kin.X[1], kin.X[0], rtol=1e-12)
    assert field_theory_amplitude(kin.X[1][None], 5)[0] == pytest.approx(field_theory_amplitude(x5[None], 5)[0])


def _pairs(N):
    return [(a, b) for a in range(1, N + 1) for b in range(a + 1, N + 1)]


def test_schema_is_in_the_docs():
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs/methods/amplitudes.md").read_text()
    assert KINEMATICS_SCHEMA.to_markdown() in page


@pytest.mark.parametrize(
    "csv, message",
    [
        ("X13,X24\n1,2\n", r"has no column 'n'"),
        ("n,X13,X24\n4,1,abc\n", r"column 'X24' should be float, found (large_)?string"),
        ("n,X13\n4,1\n", r"row 0 \(n = 4\) has no complete kinematics"),
        ("n,X13,X24\n7,1,2\n", r"column 'n' must be 4, 5 or 6"),
        ("n,s12,s13,s14,s23,s24,s34\n4,1,2,3,1,2,3\n", r"row 0 \(n = 4\): momentum conservation violated"),
        ("n,X13,X24\n4,1,0\n", r"tr_phi3 at α′ = 1 for rows \[0\] \(n = 4\)"),
    ],
    ids=["missing n", "text column", "incomplete row", "bad n", "not conserved", "on a pole"],
)
def test_bad_kinematics_fail_naming_the_column_or_row(tmp_path, capsys, csv, message):
    path = tmp_path / "kin.csv"
    path.write_text(csv)
    if "pole" not in message and "tr_phi3" not in message:
        with pytest.raises(UserDataError, match=message):
            read_kinematics(path)
    assert cli(["train", "amplitudes", "--data", str(path), "--output_dir", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("hf-ext train: error:"), err
    import re

    assert re.search(message, err), err
    assert not (tmp_path / "never").exists()
