"""The user's kinematics: one row per kinematic point of an N-point scalar process (N = 4, 5, 6), read through
[`~hf_ext.core.user_data.load_user_data`] (CSV, TSV, JSON/JSONL, Parquet, a folder, a Hub id) and turned into the
planar variables X_{i,j} every amplitude here is a function of.

A row gives its kinematics in one of three forms (the first complete one wins), in the conventions of
`kinematics.py` (labels 1-based, metric mostly minus, all momenta outgoing):

- **planar variables** `X13`, `X14`, ..., the N(N-3)/2 columns `kinematics.x_labels(N)`
  (X_{i,j} = (p_i + ... + p_{j-1})^2);
- **Mandelstams** `s12`, `s13`, ..., every `s<a><b>` with a < b, s_ab = 2 p_a.p_b (momentum conservation,
  sum_b s_ab = 0, is checked);
- **momenta** `p1_0`, `p1_1`, ..., `p<a>_<μ>` (μ = 0 the energy; any dimension D), massless and conserved (checked).

Rows of different N may share a table (a row leaves the other N's columns empty). The amplitudes converge, or are
continued, where every α′X > -1 off the poles α′X = 0 (see `continuation.py`); a row outside that region is named in
the error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hf_ext.core.user_data import Column, DataSchema, UserDataError

from .kinematics import momenta_to_planar, planar_from_mandelstams, planar_variables, x_labels

POINTS = (4, 5, 6)

KINEMATICS_SCHEMA = DataSchema(
    (
        Column("n", "int", "number of external points N (4, 5 or 6)"),
        Column(
            "alpha_prime",
            "float",
            "α′ of the row (> 0); without this column every `--alpha` value is used",
            required=False,
        ),  # fmt: skip
    ),
    description="one kinematic point per row: `n`, and its planar variables `X<i><j>`, Mandelstams `s<a><b>` or "
    "momenta `p<a>_<μ>`",
)


def mandelstam_labels(N: int) -> list[str]:
    """`s12`, `s13`, ... `s<N-1><N>`: the Mandelstam columns of an N-point row."""
    return [f"s{a}{b}" for a in range(1, N + 1) for b in range(a + 1, N + 1)]


def momentum_labels(N: int, dim: int) -> list[str]:
    """`p1_0` ... `p<N>_<dim-1>`: the momentum columns of an N-point row in `dim` dimensions."""
    return [f"p{a}_{mu}" for a in range(1, N + 1) for mu in range(dim)]


def _kinematic_columns(columns: list[str]) -> list[str]:
    labels = {lab for N in POINTS for lab in (*x_labels(N), *mandelstam_labels(N))}
    return [c for c in columns if c in labels or (c.startswith("p") and c[1:].replace("_", "", 1).isdigit())]


@dataclass(frozen=True)
class UserKinematics:
    """The user's rows as planar variables.

    Args:
        n (`np.ndarray` of shape `(rows,)`): N of each row.
        X (`list[np.ndarray]`): each row's N(N-3)/2 planar variables.
        alpha (`np.ndarray` of shape `(rows,)` or `None`): each row's α′ (`None`: the `--alpha` values).
        form (`list[str]`): which form each row was given in (`"planar"`, `"mandelstam"`, `"momenta"`).
    """

    n: np.ndarray
    X: list
    alpha: np.ndarray | None
    form: list

    def __len__(self) -> int:
        return len(self.n)


def read_kinematics(source, split: str | None = None) -> tuple[UserKinematics, object]:
    """Reads the user's kinematics (see the module docstring) and converts every row to planar variables.

    Args:
        source: a file, folder or Hub dataset id ([`~hf_ext.core.user_data.load_user_data`]).
        split (`str`, *optional*): one split; default: every split, concatenated in order.

    Returns:
        `(kinematics, data)`: the [`UserKinematics`] and the `datasets` object read (for the record's fingerprint).

    Raises:
        `UserDataError` naming the column or the row: a missing `n`, a non-numeric kinematic column, an N outside
        4-6, a row without a complete form, broken momentum conservation or masslessness, α′ <= 0.
    """
    from datasets import concatenate_datasets

    from hf_ext.core.user_data import load_user_data

    text = str(source)
    data = load_user_data(source, schema=KINEMATICS_SCHEMA, split=split)
    table = data if split else concatenate_datasets(list(data.values()))
    if len(table) == 0:
        raise UserDataError(f"{text} has no rows")
    kin_cols = _kinematic_columns(table.column_names)
    if not kin_cols:
        raise UserDataError(
            f"{text} has no kinematics column: give planar variables (X13, X14, ...), Mandelstams (s12, s13, ...) "
            f"or momenta (p1_0, p1_1, ...); it has columns {table.column_names}"
        )
    DataSchema(tuple(Column(c, "float") for c in kin_cols)).check(table, source=text)
    frame = table.to_pandas()
    n = frame["n"].to_numpy()
    bad = sorted({int(v) for v in n if v not in POINTS})
    if bad:
        rows = [i for i, v in enumerate(n) if v not in POINTS][:5]
        raise UserDataError(f"{text}: column 'n' must be 4, 5 or 6 (N points), got {bad} in rows {rows}")
    alpha = None
    if "alpha_prime" in frame:
        alpha = frame["alpha_prime"].to_numpy(dtype=np.float64)
        wrong = np.flatnonzero(~(np.isfinite(alpha) & (alpha > 0)))
        if wrong.size:
            raise UserDataError(f"{text}: column 'alpha_prime' must be a number > 0; rows {wrong[:5].tolist()}")
    dims = sorted({int(c.split("_")[1]) for c in kin_cols if c.startswith("p")})
    dim = dims[-1] + 1 if dims else 0
    X, forms = [], []
    for r in range(len(frame)):
        N = int(n[r])

        def values(labels, r=r):
            if not all(lab in frame for lab in labels):
                return None
            v = frame.loc[r, labels].to_numpy(dtype=np.float64)
            return v if np.isfinite(v).all() else None

        try:
            if (x := values(x_labels(N))) is not None:
                X.append(x)
                forms.append("planar")
            elif (s := values(mandelstam_labels(N))) is not None:
                m = np.zeros((N, N))
                m[np.triu_indices(N, 1)] = s
                X.append(planar_from_mandelstams(m + m.T))
                forms.append("mandelstam")
            elif dim and (p := values(momentum_labels(N, dim))) is not None:
                X.append(momenta_to_planar(p.reshape(N, dim)))
                forms.append("momenta")
            else:
                raise UserDataError(
                    f"{text}: row {r} (n = {N}) has no complete kinematics: planar variables "
                    f"{', '.join(x_labels(N))}, or Mandelstams {', '.join(mandelstam_labels(N))}, or momenta "
                    f"p<a>_<μ> for a = 1..{N}"
                )
        except UserDataError:
            raise
        except ValueError as err:  # conservation, masslessness, symmetry: the library names the constraint
            raise UserDataError(f"{text}: row {r} (n = {N}): {err}") from None
    assert all(len(x) == len(planar_variables(int(N))) for x, N in zip(X, n))
    return UserKinematics(n=n.astype(np.int64), X=X, alpha=alpha, form=forms), data


def write_example_kinematics(path, *, seed: int = 0) -> str:
    """Writes a tiny kinematics CSV in all three forms: two 4-point rows as planar variables, one 5-point row as
    Mandelstams (from random Euclidean-region planar variables) and one 4-point row as 4-d momenta (a physical
    2 → 2 point, where some X < 0: the amplitude is continued there). Returns the path."""
    import csv
    from pathlib import Path

    from .kinematics import mandelstams, random_massless_momenta

    rng = np.random.default_rng(seed)
    x5 = rng.uniform(0.3, 2.0, 5)
    s5 = mandelstams(x5, 5)[np.triu_indices(5, 1)]
    p4 = random_massless_momenta(4, rng, energy=0.3)
    header = ["n", *x_labels(4), *mandelstam_labels(5), *momentum_labels(4, 4)]
    rows = [
        {"n": 4, "X13": 0.7, "X24": 1.3},
        {"n": 4, "X13": 2.5, "X24": 0.4},
        {"n": 5, **dict(zip(mandelstam_labels(5), s5.round(12)))},
        {"n": 4, **dict(zip(momentum_labels(4, 4), p4.ravel().round(15)))},
    ]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
    return str(path)


__all__ = [
    "KINEMATICS_SCHEMA",
    "UserKinematics",
    "mandelstam_labels",
    "momentum_labels",
    "read_kinematics",
    "write_example_kinematics",
]
