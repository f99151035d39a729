"""Configuration of the amplitude-table builder (pure typed data, validated in one place).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Any

SCALAR_THEORIES = ("tr_phi3", "field_theory", "bosonic", "superstring")
GLUON_THEORIES = ("gluon_super", "gluon_bosonic", "gluon_type_i", "gluon_determinant", "gluon_continued")
THEORIES = SCALAR_THEORIES + GLUON_THEORIES
METHODS = ("auto", "closed_form", "curve", "worldsheet", "mpmath_curve", "mpmath_closed_form")
ALPHA_RANGE = (1e-3, 1e2)  # α′ of a table; beyond it the scaffolded / gluon rows need extreme kinematics
MAX_ALPHAS = 64
MAX_ROWS = 200_000  # theories x sizes x α′ values x samples
GLUON_SIZES = (3, 4, 5)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _short(values: tuple) -> str:
    """A readable excerpt of a long tuple for error messages."""
    return repr(values) if len(values) <= 8 else f"({', '.join(map(repr, values[:4]))}, ... {len(values)} values)"


@dataclass
class AmplitudeTableConfig:
    """What [`~hf_ext.amplitudes.tables.AmplitudeTable`] computes: one row per (theory, size, α′, sample).

    Args:
        theories (`tuple[str, ...]`, defaults to `("tr_phi3", "field_theory")`): any of `"tr_phi3"` (stringy
            A_N), `"field_theory"` (sum over cubic diagrams, the α′ → 0 limit of α′^{N-3} A_N), `"bosonic"` and
            `"superstring"` (scaffolded 2n scalars, even N only), `"gluon_super"`, `"gluon_bosonic"` (Laurent
            coefficients on the scaffolding residues), `"gluon_type_i"` (4-gluon closed form), `"gluon_determinant"`
            (the superstring coefficient integrated from the n x n symmetric-determinant form) and `"gluon_continued"`
            (the superstring coefficient continued to any α′, kinematics drawn without the tachyon bound; 5 gluons:
            about 20 s per row).
        points (`tuple[int, ...]`, defaults to `(4, 5)`): polygon sizes N (4..6) of the scalar theories.
        gluons (`tuple[int, ...]`, defaults to `(3, 4)`): gluon numbers (3, 4, 5) of the gluon theories (5 gluons:
            the 105-term residue, about 1-3 s per row; `gluon_type_i` has no 5-gluon closed form).
        alphas (`tuple[float, ...]`, defaults to `(0.5, 1.0, 2.0)`): at most 64 α′ values in [1e-3, 100].
        samples (`int`, defaults to 4): random kinematic points per (theory, size, α′); at most 200,000 rows in all.
        x_low (`float`, defaults to 0.2): lower end of the uniform X distribution (> 0: the Euclidean region).
        x_high (`float`, defaults to 3.0): upper end.
        method (`str`, defaults to `"auto"`): evaluator of the stringy integrals (see
            [`~hf_ext.amplitudes.stringy.stringy_amplitude`]).
        seed (`int`, defaults to 0): seed of the kinematic sampling.

    Scaffolded rows draw X_{o,o} in [x_low + 1/α′, x_high + 1/α′] and 4-gluon rows s, t in the same range, so every
    shifted integral converges (a shift -1 needs α′X > 1).
    """

    theories: tuple[str, ...] = ("tr_phi3", "field_theory")
    points: tuple[int, ...] = (4, 5)
    gluons: tuple[int, ...] = (3, 4)
    alphas: tuple[float, ...] = (0.5, 1.0, 2.0)
    samples: int = 4
    x_low: float = 0.2
    x_high: float = 3.0
    method: str = "auto"
    seed: int = 0

    def __post_init__(self):
        for name in ("theories", "points", "gluons", "alphas"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise ValueError(f"AmplitudeTableConfig.{name} must be a sequence, got {value!r}")
            setattr(self, name, tuple(value))
        if not self.theories or any(t not in THEORIES for t in self.theories):
            raise ValueError(
                f"AmplitudeTableConfig.theories must be a non-empty subset of {THEORIES}, got {self.theories!r}"
            )
        if len(set(self.theories)) != len(self.theories):
            raise ValueError(f"AmplitudeTableConfig.theories has duplicates: {self.theories!r}")
        if any(not _is_int(N) or not 4 <= N <= 6 for N in self.points):
            raise ValueError(
                f"AmplitudeTableConfig.points must hold integers in [4, 6] (the curve integrals go to "
                f"N = 6), got {self.points!r}"
            )
        if any(not _is_int(n) or n not in GLUON_SIZES for n in self.gluons):
            raise ValueError(
                f"AmplitudeTableConfig.gluons must hold 3, 4 or 5 (residues are implemented for 3 to 5 "
                f"gluons), got {self.gluons!r}"
            )
        if "gluon_type_i" in self.theories and 5 in self.gluons:
            raise ValueError(
                "AmplitudeTableConfig.gluons: gluon_type_i has closed forms for 3 and 4 gluons only "
                "(use gluon_super for 5)"
            )
        if any(t in SCALAR_THEORIES for t in self.theories) and not self.points:
            raise ValueError("AmplitudeTableConfig.points is empty but scalar theories are requested")
        if any(t in GLUON_THEORIES for t in self.theories) and not self.gluons:
            raise ValueError("AmplitudeTableConfig.gluons is empty but gluon theories are requested")
        if not self.alphas or any(not _is_real(a) or not math.isfinite(a) or a <= 0 for a in self.alphas):
            raise ValueError(
                f"AmplitudeTableConfig.alphas must be non-empty finite numbers > 0, got {_short(self.alphas)}"
            )
        if len(self.alphas) > MAX_ALPHAS:
            raise ValueError(f"AmplitudeTableConfig.alphas: at most {MAX_ALPHAS} α′ values, got {len(self.alphas)}")
        if any(not ALPHA_RANGE[0] <= a <= ALPHA_RANGE[1] for a in self.alphas):
            raise ValueError(
                f"AmplitudeTableConfig.alphas must lie in [{ALPHA_RANGE[0]:g}, {ALPHA_RANGE[1]:g}], "
                f"got {_short(self.alphas)}"
            )
        self.alphas = tuple(float(a) for a in self.alphas)
        if not _is_int(self.samples) or not 1 <= self.samples <= 100_000:
            raise ValueError(f"AmplitudeTableConfig.samples must be an integer in [1, 100000], got {self.samples!r}")
        for name in ("x_low", "x_high"):
            value = getattr(self, name)
            if not _is_real(value) or not math.isfinite(value) or value <= 0:
                raise ValueError(
                    f"AmplitudeTableConfig.{name} must be a finite number > 0 (the Euclidean region), got {value!r}"
                )
        if self.x_low >= self.x_high:
            raise ValueError(f"AmplitudeTableConfig.x_low must be < x_high, got {self.x_low!r} >= {self.x_high!r}")
        if self.method not in METHODS:
            raise ValueError(f"AmplitudeTableConfig.method must be one of {METHODS}, got {self.method!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"AmplitudeTableConfig.seed must be an integer >= 0, got {self.seed!r}")
        rows = (
            self.samples
            * len(self.alphas)
            * sum(len(self.gluons) if t in GLUON_THEORIES else len(self.points) for t in self.theories)
        )
        if rows > MAX_ROWS:
            raise ValueError(
                f"AmplitudeTableConfig: {rows} rows (theories x sizes x alphas x samples) exceed the "
                f"limit of {MAX_ROWS}; lower samples or the number of α′ values"
            )
        for name in ("x_low", "x_high"):
            if getattr(self, name) > 1e3:
                raise ValueError(f"AmplitudeTableConfig.{name} must be <= 1000, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AmplitudeTableConfig:
        """Inverse of [`to_dict`]; unknown keys raise a ValueError naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"AmplitudeTableConfig.from_dict expects a dict, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown AmplitudeTableConfig fields: {unknown}")
        return cls(**data)
