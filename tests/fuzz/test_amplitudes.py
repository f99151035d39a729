"""Amplitudes bad-input fuzz suite: kinematics, α′ (range and count), evaluators, gluon kinematics (real and
helicity), residues, Berends-Giele, the sector rule, table configs, saved tables and the demo's library calls
each refuse bad input with an error naming the field and the allowed range (never a hang or a crash)."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.core.testing import BadInput, assert_clear_error

X5 = np.array([0.9, 1.7, 1.2, 0.8, 1.4])


def _amp(*args, **kw):
    from hf_ext.amplitudes.stringy import stringy_amplitude

    return stringy_amplitude(*args, **kw)


def _config(**kw):
    from hf_ext.amplitudes.config import AmplitudeTableConfig

    return AmplitudeTableConfig(**kw)


def _gluons(n, **kw):
    from hf_ext.amplitudes.gluons import GluonKinematics

    return GluonKinematics.random(n, np.random.default_rng(0), -1.5, 1.5, **kw)


def _laurent(kin, alpha, **kw):
    from hf_ext.amplitudes.residues import laurent_coefficient

    return laurent_coefficient(kin, alpha, **kw)


def _spinors(n=5, real=False):
    from hf_ext.amplitudes.spinors import SpinorKinematics

    return SpinorKinematics.random(n, np.random.default_rng(1), real=real)


def _bg(k, e, **kw):
    from hf_ext.amplitudes.yang_mills import berends_giele

    return berends_giele(k, e, **kw)


def _from_vectors(k, e):
    from hf_ext.amplitudes.gluons import GluonKinematics

    return GluonKinematics.from_vectors(k, e)


def _helicity_kin(hel="--++"):
    from hf_ext.amplitudes.gluons import GluonKinematics

    return GluonKinematics.from_spinors(_spinors(4), hel)


def _demo_scan(lo, hi):
    from hf_ext.amplitudes.demo import amplitude_curves

    return amplitude_curves(5, "0.9, 1.7, 1.2, 0.8, 1.4", "alpha", lo, hi, 1.0)


def _corrupt_table_load():
    import tempfile
    from pathlib import Path

    from hf_ext.amplitudes.tables import AmplitudeTable

    with tempfile.TemporaryDirectory() as tmp:
        table = AmplitudeTable(_config(theories=("tr_phi3",), points=(4,), alphas=(1.0,), samples=2))
        folder = table.save_pretrained(Path(tmp) / "t")
        arrow = sorted((folder / "dataset").glob("*.arrow"))[0]
        raw = bytearray(arrow.read_bytes())
        raw[len(raw) // 2 : len(raw) // 2 + 32] = b"\xff" * 32
        arrow.write_bytes(bytes(raw))
        loaded = AmplitudeTable.from_pretrained(folder)
        return loaded.dataset["amplitude"]  # would segfault without the hash check


def _table_args(*argv):
    from hf_ext.amplitudes.table_cli import config_from_args, make_parser

    return config_from_args(make_parser().parse_args([*argv, "--output", "unused"]))


CASES = [
    # kinematics and the stringy evaluators
    BadInput("X wrong length", lambda: _amp(np.ones(3), 1.0), r"N\(N-3\)/2 planar variables"),
    BadInput("X nan", lambda: _amp(np.array([0.7, np.nan]), 1.0), r"planar variables must be finite"),
    BadInput("X strings", lambda: _amp(np.array(["a", "b"]), 1.0), r"planar variables must be numbers"),
    BadInput("X mapping missing a variable", lambda: _amp({"X13": 1.0}, 1.0, 4), r"missing planar variables.*X24"),
    BadInput("alpha 0", lambda: _amp(X5, 0.0), r"alpha \(α′\) must be finite and > 0"),
    BadInput("alpha nan", lambda: _amp(X5, float("nan")), r"alpha \(α′\) must be finite"),
    BadInput("alpha 1e300", lambda: _amp(X5, 1e300), r"alpha \(α′\) must lie in \[1e-08, 10000\]"),
    BadInput("alpha 1e-300", lambda: _amp(X5, 1e-300), r"alpha \(α′\) must lie in \[1e-08, 10000\]"),
    BadInput("alpha string", lambda: _amp(X5, "1"), r"alpha \(α′\) must be a real number"),
    BadInput("200,000 alpha values", lambda: _amp(X5, np.linspace(0.1, 1, 200_000)), r"at most 100000 per call"),
    BadInput("alpha X beyond 200", lambda: _amp(X5 * 500, 1.0), r"\|α′X\| must be <= 200"),
    BadInput("batch beyond the cap", lambda: _amp(np.ones((100_001, 2)), 1.0), r"exceed the limit of 100000"),
    BadInput(
        "mpmath batch beyond the cap",
        lambda: _amp(np.ones((1_001, 2)), 1.0, method="mpmath_curve"),
        r"exceed the limit of 1000",
    ),
    BadInput("unknown method", lambda: _amp(X5, 1.0, method="magic"), r"method must be one of"),
    BadInput(
        "curve outside the Euclidean region",
        lambda: _amp(-X5, 1.0, method="curve"),
        r"converges only where every α′X > 0",
    ),
    BadInput(
        "field theory at a pole",
        lambda: __import__("hf_ext.amplitudes.field_theory", fromlist=["x"]).field_theory_amplitude(
            np.array([0.0, 1.0])
        ),
        r"singular: some planar variable X is 0",
    ),
    BadInput(
        "superstring odd N",
        lambda: __import__("hf_ext.amplitudes.superstring", fromlist=["x"]).superstring_amplitude(X5, 1.0),
        r"even number of points 2n",
    ),
    # the demo's library calls (issue 17: an α′ scan from 1e-300 to 1e300 used to hang)
    BadInput(
        "demo alpha scan 1e-300 to 1e300",
        lambda: _demo_scan(1e-300, 1e300),
        r"alpha \(α′\) must lie in \[1e-08, 10000\]",
    ),
    BadInput("demo scan lo >= hi", lambda: _demo_scan(2.0, 1.0), r"scan range lo < hi"),
    # table configs (20,000 α′ values used to hang the table tab)
    BadInput(
        "table 20,000 alphas",
        lambda: _config(alphas=tuple(np.linspace(0.1, 1, 20_000))),
        r"alphas: at most 64 α′ values, got 20000",
    ),
    BadInput("table alpha 1e300", lambda: _config(alphas=(1e300,)), r"alphas must lie in \[0.001, 100\]"),
    BadInput(
        "table too many rows",
        lambda: _config(samples=100_000, alphas=(0.5, 1.0, 2.0)),
        r"rows .* exceed the limit of 200000",
    ),
    BadInput("table gluons 6", lambda: _config(theories=("gluon_super",), gluons=(6,)), r"gluons must hold 3, 4 or 5"),
    BadInput(
        "table type-I at 5 gluons",
        lambda: _config(theories=("gluon_type_i",), gluons=(5,)),
        r"gluon_type_i has closed forms for 3 and 4",
    ),
    BadInput("table negative seed", lambda: _config(seed=-1), r"seed must be an integer >= 0"),
    BadInput(
        "table command --alpha 0",
        lambda: _table_args("--n", "4", "--alpha", "0"),
        r"alphas must be non-empty finite numbers > 0",
    ),
    BadInput("corrupted dataset arrow", _corrupt_table_load, r"hash mismatch: dataset/.*\.arrow"),
    # gluon kinematics, residues
    BadInput("gluons n = 7", lambda: _gluons(7), r"n \(number of gluons\) must be an integer in \[2, 6\]"),
    BadInput(
        "gluon vectors as strings",
        lambda: _from_vectors(np.array([["a"] * 4] * 4), np.zeros((4, 4))),
        r"k and eps must be numeric arrays",
    ),
    BadInput(
        "gluon vectors shapes",
        lambda: _from_vectors(np.zeros((4, 4)), np.zeros((3, 4))),
        r"k and eps must both have shape \(n, D\)",
    ),
    BadInput(
        "gluon vectors nan",
        lambda: _from_vectors(np.full((4, 4), np.nan), np.zeros((4, 4))),
        r"k and eps must be finite",
    ),
    BadInput(
        "5-gluon residue below the tachyon bound",
        lambda: _laurent(_gluons(5, min_channel=0.1), 0.5),
        r"every α′s_\(i,i\+1\) > 1",
    ),
    BadInput("residue nodes 5", lambda: _laurent(_gluons(3), 1.0, nodes=5), r"nodes must be an integer in \[16, 200\]"),
    BadInput("residue alpha 1e5", lambda: _laurent(_gluons(3), 1e5), r"alpha \(α′\) must lie in|must be <= 1000"),
    BadInput("residue unknown theory", lambda: _laurent(_gluons(3), 1.0, theory="heterotic"), r"theory must be one of"),
    BadInput("residue of complex momenta", lambda: _laurent(_helicity_kin(), 1.0), r"real channel invariants"),
    BadInput(
        "residue 5 gluons mpmath",
        lambda: _laurent(_gluons(5, min_channel=1.2), 1.0, method="mpmath"),
        r"mpmath.* 4 gluons only",
    ),
    # spinor helicity and Berends-Giele
    BadInput(
        "spinors wrong shape",
        lambda: __import__("hf_ext.amplitudes.spinors", fromlist=["x"]).SpinorKinematics(
            np.ones((4, 3)), np.ones((4, 3))
        ),
        r"lam must be a numeric array of shape \(n, 2\)",
    ),
    BadInput(
        "spinors not conserved",
        lambda: __import__("hf_ext.amplitudes.spinors", fromlist=["x"]).SpinorKinematics(
            np.eye(2)[[0, 1, 0, 1]] + 0.1, np.eye(2)[[0, 1, 1, 0]]
        ),
        r"momentum conservation",
    ),
    BadInput("Parke-Taylor not MHV", lambda: _spinors().parke_taylor("---++"), r"exactly two negative helicities"),
    BadInput("helicity symbols", lambda: _spinors().polarisations("--x++"), r"string of '\+' and '-'"),
    BadInput("helicity count", lambda: _spinors().polarisations("--+"), r"need 5 helicities, got 3"),
    BadInput(
        "reference is the leg itself",
        lambda: _spinors().polarisations("--+++", refs=[0, 0, 0, 0, 0]),
        r"refs must give, for every leg, another leg",
    ),
    BadInput("3-point reference parallel", lambda: _spinors(3).polarisations("--+"), r"parallel to leg"),
    BadInput(
        "from_spinors wrong type",
        lambda: __import__("hf_ext.amplitudes.gluons", fromlist=["x"]).GluonKinematics.from_spinors("spinors", "--++"),
        r"spinors must be a SpinorKinematics",
    ),
    BadInput("Berends-Giele two legs", lambda: _bg(np.zeros((2, 4)), np.zeros((2, 4))), r"3 <= n <= 12"),
    BadInput("Berends-Giele shapes", lambda: _bg(np.zeros((4, 4)), np.zeros((4, 3))), r"shape \(n, d\)"),
    BadInput(
        "Berends-Giele order",
        lambda: _bg(_spinors(4).momenta(), _spinors(4).polarisations("--++"), order=[0, 0, 1, 2]),
        r"order must be a permutation of 0..3",
    ),
    BadInput(
        "Berends-Giele gram shape",
        lambda: _bg(np.ones((4, 4)), np.ones((4, 4)), gram=np.eye(3)),
        r"gram must have shape \(4, 4\)",
    ),
    # quadrature
    BadInput(
        "sector rule divergent edge",
        lambda: __import__("hf_ext.amplitudes.sectors", fromlist=["x"]).simplex_rule(1.0, (-1.5, 0, 0), (0, 0, 0)),
        r"edge exponent e_1 = -1.5 must be > -1",
    ),
    BadInput(
        "sector rule nodes",
        lambda: __import__("hf_ext.amplitudes.sectors", fromlist=["x"]).simplex_rule(
            1.0, (0, 0, 0), (0, 0, 0), nodes=10_000
        ),
        r"nodes must be an integer in \[2, 200\]",
    ),
    BadInput(
        "Z-integrals outside their region",
        lambda: __import__("hf_ext.amplitudes.five_gluons", fromlist=["x"]).z_integrals(-np.ones((5, 5)), 1.0),
        r"Z-integrals converge for α′s12, α′s34 > 0",
    ),
    # issue 42: the continued 5-gluon residue and the symmetric determinant
    BadInput("continued 5 gluons: α′ None", lambda: _continued5(None), r"alpha \(α′\) must be a number", TypeError),
    BadInput("continued 5 gluons: α′ string", lambda: _continued5("1"), r"alpha \(α′\) must be a number", TypeError),
    BadInput("continued 5 gluons: α′ NaN", lambda: _continued5(float("nan")), r"alpha \(α′\) must be finite"),
    BadInput("continued 5 gluons: α′ = 0", lambda: _continued5(0.0), r"alpha \(α′\) must be finite and nonzero"),
    BadInput("continued 5 gluons: 4 gluons", lambda: _continued5(1.0, n=4), r"needs GluonKinematics of 5 gluons"),
    BadInput("continued 5 gluons: delta", lambda: _continued5(1.0, delta=0.5), r"delta must be a number in"),
    BadInput("continued 5 gluons: panel None", lambda: _continued5(1.0, panel=None), r"panel must be an integer"),
    BadInput("determinant: empty batch", lambda: _sym_det(0.9, np.zeros((0, 3))), r"gaps is empty"),
    BadInput("determinant: NaN gap", lambda: _sym_det(0.9, np.array([[1.0, np.nan, 1]])), r"gaps must be finite"),
    BadInput(
        "determinant: α′ None", lambda: _sym_det(None, np.ones((1, 3))), r"alpha \(α′\) must be a real", TypeError
    ),
    BadInput("determinant: α′ NaN", lambda: _sym_det(float("nan"), np.ones((1, 3))), r"alpha \(α′\) must be finite"),
    BadInput("determinant: string gaps", lambda: _sym_det(0.9, [["a", "b", "c"]]), r"gaps must be real", TypeError),
    BadInput("determinant laurent: nodes", lambda: _det_laurent(nodes=3), r"nodes must be an integer in \[16, 200\]"),
    BadInput("determinant laurent: outside region", lambda: _det_laurent(alpha=0.1), r"converge|needs α′t"),
]


def _continued5(alpha, n=5, **kw):
    from hf_ext.amplitudes.five_gluons_continued import continued_five_gluon

    return continued_five_gluon(_gluons(n), alpha, **kw)


def _sym_det(alpha, gaps):
    from hf_ext.amplitudes.symmetric_determinant import symmetric_determinant_integrand

    return symmetric_determinant_integrand(_gluons(4), alpha, gaps)


def _det_laurent(alpha=1.25, nodes=40):
    from hf_ext.amplitudes.symmetric_determinant import determinant_laurent

    return determinant_laurent(_gluons(4, min_channel=1.1), alpha, nodes=nodes)


def test_empty_batches_give_empty_results_not_numpy_errors():
    from hf_ext.amplitudes.superstring import superstring_amplitude

    for N, width in ((4, 2), (5, 5), (6, 9)):
        ev = _amp(np.zeros((0, width)), 1.0, N)
        assert ev.value.shape == (0,) and ev.error.shape == (0,)
    assert _amp(np.ones((1, 2)), np.zeros(0), 4).value.shape == (0,)  # an empty α′ batch
    assert superstring_amplitude(np.zeros((0, 9)), 1.0, 3).value.shape == (0,)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case):
    assert_clear_error(case)
