"""Gluon kinematics on the scaffolding residues, field-strength traces and the closed-form gluon amplitudes.

On the residue X_{2i-1,2i+1} = 0 (all i) the 2n scalars become n gluons (spec §2.6):
k_i = p_{2i-1} + p_{2i} and ε_i ≅ p_{2i} (up to gauge and normalisation), so
ε_i.ε_j = s_{2i,2j}/2, ε_i.k_j = (s_{2i,2j-1} + s_{2i,2j})/2, k_i.k_j = (sum over the four s)/2, k_i^2 = ε_i.k_i = 0.
Conversely any transverse polarisations (k_i^2 = 0, ε_i.k_i = 0, sum k = 0) give a 2n-gon: p_{2i} = ε_i,
p_{2i-1} = k_i - ε_i and s_{2i-1,2i} := 0 (ε_i^2 never enters a gluon amplitude; with this choice the s matrix is
massless and conserved exactly when the polarisations are transverse).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .closed_forms import veneziano_factor
from .kinematics import as_planar_array, mandelstams, planar_from_mandelstams, x_label, x_value
from .stringy import check_alpha

MAX_GLUONS = 5  # residue integrals: 3 gluons (none), 4 (one integral), 5 (two, sector-decomposed)


def scaffold_variables(n: int) -> list[tuple[int, int]]:
    """The scaffolding variables X_{2i-1,2i+1} = k_i^2 of n gluons (1-based, the last one is X_{1,2n-1})."""
    return [tuple(sorted((2 * i - 1, (2 * i + 1 - 1) % (2 * n) + 1))) for i in range(1, n + 1)]


@dataclass(frozen=True)
class GluonKinematics:
    """n gluons as a point of the 2n-gon on the scaffolding residue.

    Args:
        n (`int`): number of gluons.
        X (`np.ndarray`): the 2n(2n-3)/2 planar variables of the 2n-gon (scaffolding ones = 0).
    """

    n: int
    X: np.ndarray

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or not 2 <= self.n <= 6:
            raise ValueError(f"n (number of gluons) must be an integer in [2, 6], got {self.n!r}")
        X = as_planar_array(self.X, 2 * self.n)
        if X.ndim != 1:
            raise ValueError("GluonKinematics holds one kinematic point (a 1-d array of planar variables)")
        if X.dtype.kind == "c" and not np.any(X.imag):
            X = X.real.copy()  # exactly real data stays real
        scale = max(1.0, float(np.max(np.abs(X))))
        for i, j in scaffold_variables(self.n):
            if abs(x_value(X, 2 * self.n, i, j)) > 1e-12 * scale:
                raise ValueError(
                    f"not on the scaffolding residue: {x_label(i, j)} = k^2 must be 0, got "
                    f"{scalar(x_value(X, 2 * self.n, i, j))!r}"
                )
        object.__setattr__(self, "X", X)

    # -------------------------------------------------------------------------------------------- constructors
    @classmethod
    def from_planar(cls, X, n: int | None = None) -> GluonKinematics:
        """From 2n-gon planar variables (array or mapping); raises unless every X_{2i-1,2i+1} is 0."""
        if n is None:
            from .stringy import infer_points

            N = infer_points(X)
            if N % 2:
                raise ValueError(f"gluon kinematics need a 2n-gon, got N = {N}")
            n = N // 2
        return cls(n, as_planar_array(X, 2 * n))

    @classmethod
    def from_vectors(cls, k, eps, rtol: float = 1e-9) -> GluonKinematics:
        """From momenta `k` and polarisations `eps` of shape (n, D), metric (+, -, ..., -), all outgoing.

        Complex momenta and polarisations (helicity vectors, see [`~hf_ext.amplitudes.spinors`]) are kept complex:
        every product is bilinear, never Hermitian, so the planar variables come out complex.

        Raises:
            ValueError: shapes differ, entries are not finite numbers, momentum is not conserved, k_i^2 != 0, or
                ε_i.k_i != 0 (the transversality every gluon polarisation must satisfy), each named with the leg.
        """
        k, eps = np.asarray(k), np.asarray(eps)
        if k.dtype.kind not in "fiuc" or eps.dtype.kind not in "fiuc":
            raise ValueError(f"k and eps must be numeric arrays, got dtypes {k.dtype} and {eps.dtype}")
        dtype = np.complex128 if "c" in (k.dtype.kind, eps.dtype.kind) else np.float64
        k, eps = k.astype(dtype), eps.astype(dtype)
        if k.ndim != 2 or k.shape != eps.shape:
            raise ValueError(f"k and eps must both have shape (n, D); got {k.shape} and {eps.shape}")
        if not (np.all(np.isfinite(k)) and np.all(np.isfinite(eps))):
            raise ValueError("k and eps must be finite")
        n, D = k.shape
        metric = np.diag([1.0] + [-1.0] * (D - 1))
        scale = max(1.0, float(np.max(np.abs(k))) * max(1.0, float(np.max(np.abs(eps)))), float(np.max(np.abs(k))) ** 2)
        if np.max(np.abs(k.sum(axis=0))) > rtol * np.sqrt(scale) * n:
            raise ValueError("momentum conservation violated: sum_i k_i must vanish")
        for i in range(n):
            if abs(k[i] @ metric @ k[i]) > rtol * scale:
                raise ValueError(f"gluon {i + 1} is not massless: k_{i + 1}^2 = {k[i] @ metric @ k[i]:.3g}")
            if abs(eps[i] @ metric @ k[i]) > rtol * scale:
                raise ValueError(
                    f"inconsistent polarisation: ε_{i + 1}.k_{i + 1} = {eps[i] @ metric @ k[i]:.3g} "
                    "must vanish (transversality)"
                )
        p = np.empty((2 * n, D), dtype=dtype)
        p[0::2], p[1::2] = k - eps, eps
        s = 2 * p @ metric @ p.T
        s[np.arange(2 * n), np.arange(2 * n)] = 0.0
        for i in range(n):  # ε_i^2 never enters: the massless, conserved choice (module docstring)
            s[2 * i, 2 * i + 1] = s[2 * i + 1, 2 * i] = 0.0
        return cls(n, planar_from_mandelstams(s))

    @classmethod
    def from_spinors(cls, spinors, helicities, refs=None) -> GluonKinematics:
        """Helicity states: momenta and Dixon's ε^± of [`~hf_ext.amplitudes.spinors.SpinorKinematics`] (complex
        in general; real planar variables for split-signature spinors)."""
        from .spinors import SpinorKinematics

        if not isinstance(spinors, SpinorKinematics):
            raise ValueError(f"spinors must be a SpinorKinematics, got {type(spinors).__name__}")
        return cls.from_vectors(spinors.momenta(), spinors.polarisations(helicities, refs))

    @classmethod
    def random(
        cls,
        n: int,
        rng: np.random.Generator | None = None,
        low: float = 0.3,
        high: float = 2.0,
        min_channel: float | None = None,
    ) -> GluonKinematics:
        """Random planar variables in [low, high] with the scaffolding ones set to 0.

        Args:
            min_channel (`float`, *optional*): for 4 and 5 gluons, draw the planar channels (k_i + k_{i+1})^2 in
                [min_channel, min_channel + high - low] (the residue integrals need every α′s_{i,i+1} > 1).
        """
        from .kinematics import planar_variables

        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n <= 6:
            raise ValueError(f"n (number of gluons) must be an integer in [2, 6], got {n!r}")
        rng = np.random.default_rng(0) if rng is None else rng
        pairs = planar_variables(2 * n)
        X = rng.uniform(low, high, len(pairs))
        scaffold = set(scaffold_variables(n))
        channels = set(planar_channels(n)) if n >= 4 else set()
        for k, pair in enumerate(pairs):
            if pair in scaffold:
                X[k] = 0.0
            elif min_channel is not None and pair in channels:
                X[k] = min_channel + X[k] - low
        return cls(n, X)

    # -------------------------------------------------------------------------------------------- invariants
    @property
    def s(self) -> np.ndarray:
        return mandelstams(self.X, 2 * self.n)

    @property
    def is_complex(self) -> bool:
        return self.X.dtype.kind == "c"

    def _basis(self):
        n = self.n
        e = np.zeros((n, 2 * n))
        kap = np.zeros((n, 2 * n))
        for i in range(n):
            e[i, 2 * i + 1] = 1.0
            kap[i, 2 * i] = kap[i, 2 * i + 1] = 1.0
        return kap, e, self.s / 2  # coefficient vectors of k_i, ε_i in the basis p_a, and the Gram matrix

    def dot_products(self) -> dict[str, np.ndarray]:
        """`{"kk": k_i.k_j, "ek": ε_i.k_j, "ee": ε_i.ε_j}` as n x n arrays (ε_i.ε_i is set to 0: it never enters)."""
        kap, e, G = self._basis()
        ee = e @ G @ e.T
        np.fill_diagonal(ee, 0.0)
        return {"kk": kap @ G @ kap.T, "ek": e @ G @ kap.T, "ee": ee}

    def field_strengths(self) -> np.ndarray:
        """F_i = k_i ε_i - ε_i k_i as linear maps x -> k_i (ε_i.x) - ε_i (k_i.x) on coefficient space, (n, 2n, 2n).

        A product of such maps is a sum of rank-one maps u (v.x), whose trace is v.u, so traces are Lorentz traces
        even though the p_a are linearly dependent."""
        kap, e, G = self._basis()
        return np.stack([np.outer(kap[i], e[i] @ G) - np.outer(e[i], kap[i] @ G) for i in range(self.n)])

    def trace(self, *legs: int):
        """tr(F_{l1} F_{l2} ... ) for 1-based legs (complex for complex kinematics)."""
        F = self.field_strengths()
        M = np.eye(2 * self.n, dtype=F.dtype)
        for leg in legs:
            M = M @ F[leg - 1]
        return scalar(np.trace(M))

    def polarisation_data(self) -> np.ndarray:
        """Flat polarisation data: ε_i.ε_j (i < j), then ε_i.k_j (i != j), row-major."""
        d = self.dot_products()
        n = self.n
        ee = [d["ee"][i, j] for i in range(n) for j in range(i + 1, n)]
        ek = [d["ek"][i, j] for i in range(n) for j in range(n) if i != j]
        return np.array(ee + ek)


def scalar(value):
    """A Python float, or a complex when the value has an imaginary part (complex kinematics)."""
    value = complex(value)
    return value.real if value.imag == 0 else value


def ym3(kin: GluonKinematics):
    """YM3 = (ε1.ε2)(ε3.k1) + (ε2.ε3)(ε1.k2) + (ε3.ε1)(ε2.k3)."""
    d = kin.dot_products()
    ee, ek = d["ee"], d["ek"]
    return scalar(ee[0, 1] * ek[2, 0] + ee[1, 2] * ek[0, 1] + ee[2, 0] * ek[1, 2])


def f3(kin: GluonKinematics):
    """F3 = (ε1.k2)(ε2.k3)(ε3.k1), the F³ 3-point structure."""
    ek = kin.dot_products()["ek"]
    return scalar(ek[0, 1] * ek[1, 2] * ek[2, 0])


def t8f4(kin: GluonKinematics):
    """t8F⁴ = 8[tr(F1F2F3F4) + tr(F1F3F2F4) + tr(F1F3F4F2)] - 2[tr(F1F2)tr(F3F4) + tr(F1F3)tr(F2F4)
    + tr(F1F4)tr(F2F3)] (spec §2.6)."""
    if kin.n != 4:
        raise ValueError(f"t8F⁴ is a 4-gluon structure; got n = {kin.n}")
    t = kin.trace
    return 8 * (t(1, 2, 3, 4) + t(1, 3, 2, 4) + t(1, 3, 4, 2)) - 2 * (
        t(1, 2) * t(3, 4) + t(1, 3) * t(2, 4) + t(1, 4) * t(2, 3)
    )


def four_gluon_channels(kin: GluonKinematics) -> tuple:
    """(s, t) = ((k1+k2)^2, (k2+k3)^2) = (X15, X37) (complex for complex momenta)."""
    if kin.n != 4:
        raise ValueError(f"expected 4 gluons, got n = {kin.n}")
    return scalar(x_value(kin.X, 8, 1, 5)), scalar(x_value(kin.X, 8, 3, 7))


def planar_channels(n: int) -> list[tuple[int, int]]:
    """The two-particle planar channels (k_i + k_{i+1})^2 = X_{2i-1,2i+3} of n gluons, as 2n-gon pairs (i = 1..n;
    at n = 4 the list repeats s and t)."""
    out = []
    for i in range(1, n + 1):
        a, b = 2 * i - 1, (2 * i + 3 - 1) % (2 * n) + 1
        out.append((min(a, b), max(a, b)))
    return out


def type_i_four_gluon(kin: GluonKinematics, alpha):
    """Closed form of the superstring Laurent coefficient at 4 gluons (type-I: A_YM times the Veneziano factor),
    -α′² (t8F⁴/(s t)) Γ(1+α′s)Γ(1+α′t)/Γ(1+α′s+α′t), analytic in α′s, α′t (spec §2.6)."""
    alpha = float(check_alpha(alpha))
    s, t = four_gluon_channels(kin)
    if isinstance(s, complex) or isinstance(t, complex):
        raise ValueError(
            f"type_i_four_gluon needs real channels s, t (the Γ-factor is evaluated for real "
            f"arguments); got s = {s}, t = {t}"
        )
    return scalar(-(alpha**2) * t8f4(kin) / (s * t) * veneziano_factor(alpha * s, alpha * t))
