"""The stringy Tr(φ³) amplitude A_N[X] as a curve (worldsheet) integral, with vectorised and mpmath evaluators.

A_N[X] := ∫_{R_+^{N-3}} prod dy/y prod_X u_X(y)^{α′X}
        = ∫_{z_1 < ... < z_N} d^N z / vol SL(2,R) PT(1..N) prod_{a<b} z_ab^{α′ s_ab}        (spec §2.3)

in the normalisation without α′ powers (α′^{N-3} A_N → field theory). It converges iff every α′X > 0.

Vectorised path ("curve"): y = exp(t), t = c sinh(τ), trapezoid rule in τ on a tensor grid (a double-exponential
rule: the integrand in t decays exponentially in every direction, the sinh map makes that double-exponential).
Every log u_X is computed once per grid as a stable log-sum-exp of z-differences, so a batch of kinematic points
is one matrix product `exp(log_u @ (α′X)^T)` and a weighted sum. The error estimate compares the rule at steps
h, 2h and 4h (nested grids, no extra evaluations): err ≈ D1^2 / D2 with D1 = |I_h - I_2h|, D2 = |I_2h - I_4h|,
the usual estimate for double-exponential rules.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import closed_forms
from .kinematics import as_planar_array, check_points, planar_variables

MAX_CURVE_POINTS = 6  # a 3-dimensional grid; N = 7 would need a 4-dimensional one (~10^8 nodes)
MAX_MPMATH_POINTS = 5
METHODS = ("auto", "closed_form", "curve", "mpmath_curve", "mpmath_worldsheet", "mpmath_closed_form")
EPS = np.finfo(np.float64).eps
_TAIL = 40.0  # the grid reaches |t| with min(α′X)|t| >= 40: the integrand has decayed below e^{-40}


@dataclass(frozen=True)
class Evaluation:
    """Values of an amplitude with an error estimate.

    Args:
        value (`np.ndarray`): the amplitudes (batch shape of the input).
        error (`np.ndarray`): estimated absolute error of each value.
        method (`str`): how they were computed.
    """

    value: np.ndarray
    error: np.ndarray
    method: str


def infer_points(X, N: int | None = None) -> int:
    """N from the number of planar variables N(N-3)/2 on the last axis (or checks a given N)."""
    if N is not None:
        return check_points(N)
    if isinstance(X, dict):
        raise ValueError("pass N together with a mapping of planar variables")
    n = np.shape(X)[-1] if np.ndim(X) else 0
    N = int(round((3 + math.sqrt(9 + 8 * n)) / 2))
    if N * (N - 3) // 2 != n or n < 2:
        raise ValueError(f"{n} values is not N(N-3)/2 planar variables for any N >= 4")
    return check_points(N)


def check_alpha(alpha) -> np.ndarray:
    """α′ must be a finite number (or array) > 0."""
    a = np.asarray(alpha, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alpha (α′) must be finite and > 0, got {alpha!r}")
    return a


def check_convergent(aX: np.ndarray, N: int, what: str = "the curve integral") -> None:
    """Raises a ValueError naming the planar variables with α′X <= 0 (outside the convergent region)."""
    bad = np.argwhere(np.asarray(aX) <= 0)
    if bad.size:
        names = sorted({"X%d%d" % planar_variables(N)[k] if N < 10 else str(planar_variables(N)[k])
                        for k in bad[:, -1]})
        raise ValueError(f"{what} converges only where every α′X > 0 (Euclidean region); α′X <= 0 for "
                         f"{', '.join(names)}. Use method='closed_form' (N <= 5) for the analytic continuation.")


# ----------------------------------------------------------------------------------------------- u-variables
def log_u_curve(t: np.ndarray, N: int) -> np.ndarray:
    """log u_X on the positive chart z_1 = 0, z_2 = 1, z_{k+2} = z_{k+1} + y_1...y_k (y = e^t), z_N = ∞.

    Args:
        t (`np.ndarray` of shape (..., N-3)): log y.
        N (`int`): number of points.

    Returns:
        `np.ndarray` of shape (..., N(N-3)/2), in the order of `planar_variables(N)`; every entry is <= 0.
    """
    t = np.asarray(t, dtype=np.float64)
    T = np.concatenate([np.zeros(t.shape[:-1] + (1,)), np.cumsum(t, axis=-1)], axis=-1)

    @functools.lru_cache(maxsize=None)
    def log_z(a: int, b: int) -> np.ndarray:  # log(z_b - z_a) for 1 <= a < b <= N-1
        return np.logaddexp.reduce(T[..., a - 1: b - 1], axis=-1)

    out = []
    for i, j in planar_variables(N):
        if i == 1:  # the factors with z_N cancel pairwise (z_N = ∞)
            out.append(log_z(1, j - 1) - log_z(1, j))
        elif j == N:
            out.append(log_z(i, N - 1) - log_z(i - 1, N - 1))
        else:
            out.append(log_z(i, j - 1) + log_z(i - 1, j) - log_z(i, j) - log_z(i - 1, j - 1))
    return np.minimum(np.stack(out, axis=-1), 0.0)


def u_curve(y: np.ndarray, N: int) -> np.ndarray:
    """u_X at chart points y > 0 of shape (..., N-3) (e.g. N = 4: u13 = 1/(1+y), u24 = y/(1+y))."""
    return np.exp(log_u_curve(np.log(y), N))


# ----------------------------------------------------------------------------------------------- the grid rule
@dataclass(frozen=True)
class CurveRule:
    """Tensor-product sinh-trapezoid rule on R^{N-3}: t = scale sinh(τ), τ = k h, |k| <= K (K a multiple of 4).

    Args:
        N (`int`): number of points (4 <= N <= 6).
        step (`float`): h.
        scale (`float`): c.
        half_width (`int`): K.
    """

    N: int
    step: float
    scale: float
    half_width: int

    @classmethod
    def for_kinematics(cls, N: int, aX_min: float, step: float | None = None, scale: float | None = None):
        """The default rule for N points whose smallest α′X is `aX_min` (sets the reach of the grid)."""
        step = step or {4: 0.05, 5: 0.05, 6: 0.1}[N]
        scale = scale or {4: 1.0, 5: 1.0, 6: 2.0}[N]
        tau_max = math.asinh(_TAIL / (scale * aX_min))
        return cls(N, step, scale, 4 * math.ceil(tau_max / step / 4))

    @functools.cached_property
    def _axis(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = np.arange(-self.half_width, self.half_width + 1)
        tau = k * self.step
        return self.scale * np.sinh(tau), self.step * self.scale * np.cosh(tau), k

    @property
    def size(self) -> int:
        return (2 * self.half_width + 1) ** (self.N - 3)

    def nodes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(t of shape (M, d), weights (M,), level (M,)): level 2 nodes also belong to the 4h grid, level 1 to the
        2h grid, level 0 only to the h grid."""
        t1, w1, k = self._axis
        d = self.N - 3
        grids = np.meshgrid(*([np.arange(t1.size)] * d), indexing="ij")
        idx = np.stack([g.ravel() for g in grids], axis=-1)
        levels = np.where(k % 4 == 0, 2, np.where(k % 2 == 0, 1, 0))
        return t1[idx], np.prod(w1[idx], axis=-1), levels[idx].min(axis=-1)


@functools.lru_cache(maxsize=16)
def _rule_tables(rule: CurveRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t, w, level = rule.nodes()
    return log_u_curve(t, rule.N), w, level


def curve_integral(aX, N: int, *, step: float | None = None, scale: float | None = None,
                   chunk: int = 2 ** 22) -> Evaluation:
    """Vectorised A_N for a batch of points α′X (shape (..., N(N-3)/2)), with error estimates.

    Args:
        aX (`np.ndarray`): α′ times the planar variables; every entry must be > 0.
        N (`int`): number of points, 4 <= N <= 6.
        step (`float`, *optional*): τ step h (default 0.05 for N <= 5, 0.1 for N = 6).
        scale (`float`, *optional*): c in t = c sinh(τ).
        chunk (`int`): bound on grid-nodes x points held in memory at once.

    Raises:
        ValueError: N > 6 (the grid would be 4-dimensional or more), or some α′X <= 0.
    """
    N = check_points(N)
    if N > MAX_CURVE_POINTS:
        raise ValueError(f"the vectorised curve integral supports N <= {MAX_CURVE_POINTS} points (an "
                         f"(N-3)-dimensional grid); got N = {N}")
    aX = np.asarray(aX, dtype=np.float64)
    check_convergent(aX, N)
    batch = aX.reshape(-1, aX.shape[-1])
    rule = CurveRule.for_kinematics(N, float(batch.min()), step, scale)
    log_u, w, level = _rule_tables(rule)
    sums = np.zeros((3, len(batch)))
    per = max(1, chunk // len(w))
    for start in range(0, len(batch), per):
        f = np.exp(log_u @ batch[start: start + per].T)  # (M, b)
        for lev in range(3):
            mask = level >= lev
            sums[lev, start: start + per] = (w[mask] * 2.0 ** (lev * (N - 3))) @ f[mask]
    I_h, I_2h, I_4h = sums
    d1, d2 = np.abs(I_h - I_2h), np.abs(I_2h - I_4h)
    est = np.where(d2 > d1, d1 * d1 / np.maximum(d2, 1e-300), d1)
    est = np.maximum(est, 16 * EPS * np.abs(I_h) * math.sqrt(rule.size ** (1 / (N - 3))))
    return Evaluation(I_h.reshape(aX.shape[:-1]), est.reshape(aX.shape[:-1]), "curve")


# ----------------------------------------------------------------------------------------------- mpmath paths
def curve_integral_mp(aX, N: int, dps: int = 20):
    """A_N by mpmath `quad` in the y-chart (N = 4: one dimension, N = 5: two); one point, slow."""
    import mpmath as mp

    N = check_points(N)
    if N > MAX_MPMATH_POINTS:
        raise ValueError(f"mpmath curve integrals support N <= {MAX_MPMATH_POINTS}; got N = {N}")
    check_convergent(np.asarray(aX, dtype=np.float64), N)
    with mp.workdps(dps):
        a = [mp.mpf(float(v)) for v in aX]
        if N == 4:
            return mp.quad(lambda y: y ** (a[1] - 1) * (1 + y) ** (-a[0] - a[1]), [0, 1, mp.inf])

        def f(y1, y2):  # N = 5: u13, u14, u24, u25, u35 (spec §2.3), divided by y1 y2
            z3, z4 = 1 + y1, 1 + y1 + y1 * y2
            u = (1 / z3, z3 / z4, z4 / ((1 + y2) * z3), y1 * (1 + y2) / z4, y2 / (1 + y2))
            return mp.fprod(ui ** ai for ui, ai in zip(u, a)) / (y1 * y2)

        return mp.quad(f, [0, 1, mp.inf], [0, 1, mp.inf])


def worldsheet_five_point_mp(aX, dps: int = 20):
    """A_5 in the worldsheet gauge (0, xy, y, 1, ∞) by 2-dimensional mpmath `quad` (spec §2.7 item 3):
    ∫∫ x^{A13-1}(1-x)^{A24-1} y^{A14-1}(1-y)^{A35-1}(1-xy)^{A25-A24-A35} dx dy over [0, 1]^2."""
    import mpmath as mp

    check_convergent(np.asarray(aX, dtype=np.float64), 5, "the worldsheet integral")
    with mp.workdps(dps):
        A13, A14, A24, A25, A35 = (mp.mpf(float(v)) for v in aX)
        return mp.quad(lambda x, y: x ** (A13 - 1) * (1 - x) ** (A24 - 1) * y ** (A14 - 1) * (1 - y) ** (A35 - 1)
                       * (1 - x * y) ** (A25 - A24 - A35), [0, 1], [0, 1])


def _mp_batch(fn, aX: np.ndarray, dps: int, method: str) -> Evaluation:
    import mpmath as mp

    batch = aX.reshape(-1, aX.shape[-1])
    vals, errs = [], []
    for row in batch:
        v = fn(row)
        vals.append(float(v))
        errs.append(float(abs(v)) * 10.0 ** (-(dps - 5)) + abs(float(v) - float(mp.mpf(float(v)))))
    return Evaluation(np.array(vals).reshape(aX.shape[:-1]), np.array(errs).reshape(aX.shape[:-1]), method)


# ----------------------------------------------------------------------------------------------- dispatcher
def stringy_amplitude(X, alpha, N: int | None = None, method: str = "auto", dps: int = 20,
                      **rule_kwargs) -> Evaluation:
    """The stringy Tr(φ³) amplitude A_N[X] (no α′^{N-3} prefactor) for a batch of kinematic points.

    Args:
        X (`np.ndarray` of shape (..., N(N-3)/2), or a mapping `{"X13": ...}`): planar variables.
        alpha (`float` or `np.ndarray`): α′ (> 0), broadcast against the batch shape of X.
        N (`int`, *optional*): number of points (inferred from X).
        method (`str`, defaults to `"auto"`): `"closed_form"` (N = 4: Beta; N = 5: 3F2; vectorised, analytic
            continuation), `"curve"` (vectorised curve quadrature, N <= 6, convergent region only),
            `"mpmath_curve"`, `"mpmath_worldsheet"` (N = 5), `"mpmath_closed_form"` (mpmath Beta / hyp3f2);
            `"auto"` is the closed form for N <= 5 and the curve integral for N = 6.
        dps (`int`): mpmath working precision.
        rule_kwargs: `step`, `scale` of the curve rule.

    Returns:
        [`Evaluation`] with values, estimated absolute errors and the method used.

    Raises:
        ValueError: bad kinematics, α′ <= 0, a method that does not support N, or kinematics outside the
            region the method covers (every message names the constraint).
    """
    N = infer_points(X, N)
    X = as_planar_array(X, N)
    if X.dtype.kind == "c":
        raise ValueError("complex planar variables are not supported; pass real X")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    alpha = check_alpha(alpha)
    aX = np.asarray(alpha)[..., None] * X if alpha.ndim else alpha * X
    if method == "auto":
        method = "closed_form" if N <= 5 else "curve"
    if method == "curve":
        return curve_integral(aX, N, **rule_kwargs)
    if method == "closed_form":
        if N == 4:
            value = closed_forms.beta_amplitude(aX[..., 0], aX[..., 1])
            cond = 1 + np.abs(aX).sum(axis=-1)
        elif N == 5:
            value = closed_forms.five_point_closed_form(aX)
            cond = 1 + np.abs(aX).sum(axis=-1) + 1 / np.max(aX, axis=-1)
        else:
            raise ValueError(f"closed forms exist here for N = 4 and 5 only; got N = {N} (use method='curve')")
        # rounding of log-gamma sums and of the 3F2 tail; measured <= 1e-14 relative against mpmath in tests
        return Evaluation(value, 64 * EPS * np.abs(value) * cond, "closed_form")
    if N > MAX_MPMATH_POINTS:
        raise ValueError(f"mpmath evaluators support N <= {MAX_MPMATH_POINTS}; got N = {N}")
    if method == "mpmath_curve":
        return _mp_batch(lambda r: curve_integral_mp(r, N, dps), aX, dps, method)
    if method == "mpmath_worldsheet":
        if N == 4:
            return _mp_batch(lambda r: curve_integral_mp(r, 4, dps), aX, dps, method)  # the 1-d integrals agree
        return _mp_batch(lambda r: worldsheet_five_point_mp(r, dps), aX, dps, method)
    import mpmath as mp

    if N == 4:
        return _mp_batch(lambda r: mp.beta(mp.mpf(float(r[0])), mp.mpf(float(r[1]))), aX, dps, method)
    if np.any(aX[..., 3] <= 0):
        check_convergent(aX[..., 3:4], 5, "mpmath's 3F2 at unit argument (excess α′X25)")
    return _mp_batch(lambda r: closed_forms.five_point_closed_form_mp(r, dps), aX, dps, method)
