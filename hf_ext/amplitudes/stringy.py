"""The stringy Tr(φ³) amplitude A_N[X] as a curve (worldsheet) integral, with vectorised and mpmath evaluators.

A_N[X] := ∫_{R_+^{N-3}} prod dy/y prod_X u_X(y)^{α′X}
        = ∫_{z_1 < ... < z_N} d^N z / vol SL(2,R) PT(1..N) prod_{a<b} z_ab^{α′ s_ab}        (spec §2.3)

in the normalisation without α′ powers (α′^{N-3} A_N → field theory). It converges iff every α′X > 0.

Vectorised path ("curve"): y = exp(t), and R^{N-3} is split into the cones of the g-vector fan (one per
triangulation); in each cone t = sum_X r_X g_X with r_X = softplus(c sinh(τ)) and a trapezoid rule in τ (a
double-exponential rule, see [`CurveRule`]). A plain tensor grid in t loses accuracy far out along the rays, where the
walls between cones are not resolved (measured: 1e-3 relative at N = 5, α′X24 = 0.07); cone coordinates put the
walls on the boundaries, where the nodes cluster. Every log u_X is computed once per rule as a stable log-sum-exp
of z-differences, so a batch of kinematic points is one matrix product `exp(log_u @ (α′X)^T)` and a weighted sum.
The error estimate compares the rule at steps h, 2h and 4h (nested, no extra evaluations): err ≈ D1^2 / D2 with
D1 = |I_h - I_2h|, D2 = |I_2h - I_4h|, the usual estimate for double-exponential rules.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from . import closed_forms
from .field_theory import triangulations
from .kinematics import as_planar_array, check_points, planar_variables

MAX_CURVE_POINTS = 6  # a 3-dimensional grid; N = 7 would need a 4-dimensional one (~10^8 nodes)
MAX_MPMATH_POINTS = 5
METHODS = ("auto", "closed_form", "curve", "continued", "worldsheet", "mpmath_curve", "mpmath_closed_form")
EPS = np.finfo(np.float64).eps
_TAIL = 40.0  # the grid reaches |t| with min(α′X)|t| >= 40: the integrand has decayed below e^{-40}
MIN_ALPHA, MAX_ALPHA = 1e-8, 1e4  # α′ range accepted anywhere in the library
MAX_AX = 200.0  # |α′X| beyond this: the amplitude is below e^-200 or the 3F2 cancels catastrophically
MAX_BATCH = 100_000  # kinematic points (or α′ values) per call
MAX_MP_BATCH = 1_000  # the same for the mpmath evaluators (each point takes ~0.1-1 s)


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
    """α′ must be a real number (or array) in [MIN_ALPHA, MAX_ALPHA] (finite, > 0; outside that range the
    integrands under- or overflow in float64 and the quadrature rules would need unbounded node counts)."""
    if isinstance(alpha, (bool, np.bool_)) or np.asarray(alpha).dtype.kind not in "fiu":
        raise ValueError(f"alpha (α′) must be a real number, got {alpha!r}")
    a = np.asarray(alpha, dtype=np.float64)
    if a.size > MAX_BATCH:
        raise ValueError(f"alpha (α′) has {a.size} values; at most {MAX_BATCH} per call")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alpha (α′) must be finite and > 0, got {alpha!r}")
    if np.any(a < MIN_ALPHA) or np.any(a > MAX_ALPHA):
        raise ValueError(
            f"alpha (α′) must lie in [{MIN_ALPHA:g}, {MAX_ALPHA:g}], got values from {a.min():g} to {a.max():g}"
        )
    return a


def check_convergent(aX: np.ndarray, N: int, what: str = "the curve integral") -> None:
    """Raises a ValueError naming the planar variables with α′X <= 0 (outside the convergent region)."""
    bad = np.argwhere(np.asarray(aX) <= 0)
    if bad.size:
        names = sorted(
            {"X{}{}".format(*planar_variables(N)[k]) if N < 10 else str(planar_variables(N)[k]) for k in bad[:, -1]}
        )
        raise ValueError(
            f"{what} converges only where every α′X > 0 (Euclidean region); α′X <= 0 for "
            f"{', '.join(names)}. Use method='closed_form' (N <= 5) for the analytic continuation."
        )


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

    @functools.cache
    def log_z(a: int, b: int) -> np.ndarray:  # log(z_b - z_a) for 1 <= a < b <= N-1
        return np.logaddexp.reduce(T[..., a - 1 : b - 1], axis=-1)

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


# ----------------------------------------------------------------------------------------------- the fan rule
def _tropical_minus_log_u(t: tuple[int, ...], N: int) -> np.ndarray:
    """-log u_X at t -> ∞ t (log-sum-exp -> max): the piecewise-linear headlight functions of the chart."""
    T = np.concatenate([[0.0], np.cumsum(t)])

    def lz(a, b):
        return T[a - 1 : b - 1].max()

    out = []
    for i, j in planar_variables(N):
        if i == 1:
            out.append(lz(1, j) - lz(1, j - 1))
        elif j == N:
            out.append(lz(i - 1, N - 1) - lz(i, N - 1))
        else:
            out.append(lz(i, j) + lz(i - 1, j - 1) - lz(i, j - 1) - lz(i - 1, j))
    return np.array(out)


@functools.cache
def g_vectors(N: int) -> dict[tuple[int, int], tuple[int, ...]]:
    """The g-vector of each planar variable in the y-chart: the integer ray along which -log u_X grows with
    unit slope while every other u_Y -> 1 (e.g. N = 4: g_13 = (1,), g_24 = (-1,))."""
    N = check_points(N)
    found: dict[tuple[int, int], tuple[int, ...]] = {}
    for cand in itertools.product(range(-1, 2), repeat=N - 3):
        f = _tropical_minus_log_u(cand, N)
        if any(cand) and np.isclose(f.sum(), 1) and np.isclose(f.max(), 1) and np.isclose(np.abs(f).sum(), 1):
            found[planar_variables(N)[int(np.argmax(f))]] = cand
    if len(found) != len(planar_variables(N)):
        raise RuntimeError(f"g-vector search failed at N = {N}")  # pragma: no cover - checked for N <= 6
    return found


@dataclass(frozen=True)
class CurveRule:
    """Quadrature on R^{N-3} cone by cone of the g-vector fan (one cone per triangulation T, spanned by the g_X,
    X in T, all unimodular). In a cone, t = sum_{X in T} r_X g_X and the integrand is ~ exp(-sum α′X r_X) times a
    function that is smooth up to the walls r_X = 0; each r_X = softplus(c sinh(τ)), τ = k h, k_lo <= k <= k_hi
    (a double-exponential rule: nodes cluster double-exponentially at the walls, reach far single-exponentially).

    Args:
        N (`int`): number of points (4 <= N <= 6).
        step (`float`): h.
        scale (`float`): c.
        k_lo, k_hi (`int`): τ range in steps (multiples of 4, so the 2h and 4h rules are nested in it).
    """

    N: int
    step: float
    scale: float
    k_lo: int
    k_hi: int

    @classmethod
    def for_kinematics(
        cls, N: int, aX_min: float, aX_max: float = 1.0, step: float | None = None, scale: float | None = None
    ) -> CurveRule:
        """The default rule for N points whose α′X lie in [aX_min, aX_max]: the far end reaches r with
        aX_min r >= 40, the step shrinks for large α′X (a sharper peak)."""
        scale = scale or {4: 1.0, 5: 1.5, 6: 2.0}[N]
        step = step or {4: 0.1, 5: 0.15, 6: 0.25}[N] * min(1.0, math.sqrt(4.0 / max(aX_max, 1e-300)))
        k_lo = -4 * math.ceil(math.asinh(39.0 / scale) / step / 4)  # r >= e^{-39}: the walls' neighbourhood
        k_hi = 4 * math.ceil(math.asinh(_TAIL / (scale * aX_min)) / step / 4)
        return cls(N, float(step), float(scale), k_lo, k_hi)

    @property
    def size(self) -> int:
        return (self.k_hi - self.k_lo + 1) ** (self.N - 3) * len(triangulations(self.N))

    def nodes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(t of shape (M, N-3), weights (M,), level (M,)): level >= 1 nodes belong to the 2h rule, level 2 to
        the 4h rule."""
        k = np.arange(self.k_lo, self.k_hi + 1)
        s = self.scale * np.sinh(k * self.step)
        r = np.logaddexp(0.0, s)
        w = self.step * self.scale * np.cosh(k * self.step) / (1.0 + np.exp(-s))
        lev = np.where(k % 4 == 0, 2, np.where(k % 2 == 0, 1, 0))
        d = self.N - 3
        idx = np.stack([g.ravel() for g in np.meshgrid(*([np.arange(k.size)] * d), indexing="ij")], axis=-1)
        R, W, L = r[idx], np.prod(w[idx], axis=-1), lev[idx].min(axis=-1)
        g = g_vectors(self.N)
        ts = [R @ np.array([g[X] for X in T], dtype=np.float64) for T in triangulations(self.N)]
        n = len(ts)
        return np.concatenate(ts), np.tile(W, n), np.tile(L, n)


@functools.lru_cache(maxsize=4)  # an N = 6 rule holds ~10^6 nodes x 9 log u (~70 MB): keep few
def _rule_tables(rule: CurveRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t, w, level = rule.nodes()
    return log_u_curve(t, rule.N), w, level


def curve_integral(
    aX, N: int, *, step: float | None = None, scale: float | None = None, chunk: int = 2**22
) -> Evaluation:
    """Vectorised A_N for a batch of points α′X (shape (..., N(N-3)/2)), with error estimates.

    Args:
        aX (`np.ndarray`): α′ times the planar variables; every entry must be > 0.
        N (`int`): number of points, 4 <= N <= 6.
        step (`float`, *optional*): τ step h (see [`CurveRule.for_kinematics`]).
        scale (`float`, *optional*): c in r = softplus(c sinh(τ)).
        chunk (`int`): bound on grid-nodes x points held in memory at once.

    Raises:
        ValueError: N > 6 (the grid would be 4-dimensional or more), or some α′X <= 0.
    """
    N = check_points(N)
    if N > MAX_CURVE_POINTS:
        raise ValueError(
            f"the vectorised curve integral supports N <= {MAX_CURVE_POINTS} points (an "
            f"(N-3)-dimensional grid); got N = {N}"
        )
    aX = np.asarray(aX, dtype=np.float64)
    check_convergent(aX, N)
    batch = aX.reshape(-1, aX.shape[-1])
    rule = CurveRule.for_kinematics(N, float(batch.min()), float(batch.max()), step, scale)
    log_u, w, level = _rule_tables(rule)
    sums = np.zeros((3, len(batch)))
    per = max(1, chunk // len(w))
    for start in range(0, len(batch), per):
        f = np.exp(log_u @ batch[start : start + per].T)  # (M, b)
        for lev in range(3):
            mask = level >= lev
            sums[lev, start : start + per] = (w[mask] * 2.0 ** (lev * (N - 3))) @ f[mask]
    I_h, I_2h, I_4h = sums
    d1, d2 = np.abs(I_h - I_2h), np.abs(I_2h - I_4h)
    est = np.where(d2 > d1, d1 * d1 / np.maximum(d2, 1e-300), d1)
    est = np.maximum(est, 16 * EPS * np.abs(I_h) * math.sqrt(rule.size))
    return Evaluation(I_h.reshape(aX.shape[:-1]), est.reshape(aX.shape[:-1]), "curve")


# ----------------------------------------------------------------------------------------------- worldsheet
def _gauss_jacobi(n: int, lo: float, hi: float, p_lo: float, p_hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights on [lo, hi] for the weight (x - lo)^p_lo (hi - x)^p_hi (exponents > -1)."""
    from scipy.special import roots_jacobi

    x, w = roots_jacobi(n, p_hi, p_lo)  # weight (1 - x)^alpha (1 + x)^beta on [-1, 1]
    half = (hi - lo) / 2
    return lo + half * (x + 1), w * half ** (1 + p_lo + p_hi)


def worldsheet_five_point(aX, nodes: int = 40) -> Evaluation:
    """A_5 in the worldsheet gauge (0, xy, y, 1, ∞) (spec §2.7 item 3), an evaluation independent of the curve
    chart: ∫∫_{[0,1]^2} x^{A13-1}(1-x)^{A24-1} y^{A14-1}(1-y)^{A35-1}(1-xy)^{A25-A24-A35} dx dy.

    The square is cut into [0,1/2]x[0,1], [1/2,1]x[0,1/2] and the corner [1/2,1]^2, where (1-xy)^c is singular in
    a non-product way; there u = 1-x, v = 1-y are blown up into the sectors u = ρv and v = ρu (sector
    decomposition), which makes every singularity a power of one variable at one end. Each piece is then a tensor
    Gauss-Jacobi rule with those powers as its weight, so the rest of the integrand is analytic on the piece.
    Rules depend on the exponents, so this loops over points (about 1 ms each).

    Args:
        aX (`np.ndarray` of shape (..., 5)): α′ (X13, X14, X24, X25, X35), every entry > 0.
        nodes (`int`): Gauss-Jacobi nodes per dimension (the error estimate compares with nodes - 10).
    """
    aX = np.asarray(aX, dtype=np.float64)
    check_convergent(aX, 5, "the worldsheet integral")
    flat = aX.reshape(-1, 5)

    def integrate(row: np.ndarray, n: int) -> float:
        A13, A14, A24, A25, A35 = row
        c = A25 - A24 - A35
        total = 0.0
        x, wx = _gauss_jacobi(n, 0, 0.5, A13 - 1, 0)  # x in [0, 1/2], y in [0, 1]
        y, wy = _gauss_jacobi(n, 0, 1, A14 - 1, A35 - 1)
        X, Y = np.meshgrid(x, y, indexing="ij")
        total += wx @ ((1 - X) ** (A24 - 1) * (1 - X * Y) ** c) @ wy
        x, wx = _gauss_jacobi(n, 0.5, 1, 0, A24 - 1)  # x in [1/2, 1], y in [0, 1/2]
        y, wy = _gauss_jacobi(n, 0, 0.5, A14 - 1, 0)
        X, Y = np.meshgrid(x, y, indexing="ij")
        total += wx @ (X ** (A13 - 1) * (1 - Y) ** (A35 - 1) * (1 - X * Y) ** c) @ wy
        for p_rho, a_v, a_u in ((A24, A14, A13), (A35, A13, A14)):  # sectors u = ρv and v = ρu
            rho, wr = _gauss_jacobi(n, 0, 1, p_rho - 1, 0)
            v, wv = _gauss_jacobi(n, 0, 0.5, A25 - 1, 0)
            R, V = np.meshgrid(rho, v, indexing="ij")
            total += wr @ ((1 - V * R) ** (a_u - 1) * (1 - V) ** (a_v - 1) * (1 + R - R * V) ** c) @ wv
        return total

    value = np.array([integrate(r, nodes) for r in flat])
    coarse = np.array([integrate(r, nodes - 10) for r in flat])
    # floor: scipy's Gauss-Jacobi rules lose digits as an exponent approaches -1 (measured <= 4e-12 relative)
    error = np.maximum(np.abs(value - coarse), 1e-11 * np.abs(value))
    return Evaluation(value.reshape(aX.shape[:-1]), error.reshape(aX.shape[:-1]), "worldsheet")


# ----------------------------------------------------------------------------------------------- mpmath paths
def _u_curve_mp(t, N: int):
    """u_X at chart point t (mpmath numbers) on the positive chart, in planar-variable order."""
    import mpmath as mp

    steps = [mp.mpf(1)]  # z_{m+1} - z_m = exp(t_1 + ... + t_{m-1}); differences are sums (no cancellation)
    T = mp.mpf(0)
    for tk in t:
        T += tk
        steps.append(mp.exp(T))

    def d(a, b):  # z_b - z_a for labels 1 <= a < b <= N-1
        return mp.fsum(steps[a - 1 : b - 1])

    out = []
    for i, j in planar_variables(N):
        if i == 1:
            out.append(d(1, j - 1) / d(1, j))
        elif j == N:
            out.append(d(i, N - 1) / d(i - 1, N - 1))
        else:
            out.append(d(i, j - 1) * d(i - 1, j) / (d(i, j) * d(i - 1, j - 1)))
    return out


def curve_integral_mp(aX, N: int, dps: int = 20):
    """A_N by mpmath `quad` in the y-chart, cone by cone of the g-vector fan (N = 4: 1-d, N = 5: 2-d); one point,
    slow (seconds to a minute at N = 5) but accurate to about `dps` digits. In cone coordinates the integrand decays
    exponentially and is smooth at the walls, which tanh-sinh / exp-sinh quadrature needs (the plain y-integral at
    N = 4 decays only like a power: 5e-8 relative error measured at α′X = 0.3)."""
    import mpmath as mp

    N = check_points(N)
    if N > MAX_MPMATH_POINTS:
        raise ValueError(f"mpmath curve integrals support N <= {MAX_MPMATH_POINTS}; got N = {N}")
    check_convergent(np.asarray(aX, dtype=np.float64), N)
    g = g_vectors(N)
    with mp.workdps(dps):
        a = [mp.mpf(float(v)) for v in aX]

        def f(*t):
            return mp.exp(mp.fsum(ai * mp.log(u) for ai, u in zip(a, _u_curve_mp(t, N))))

        index = {X: k for k, X in enumerate(planar_variables(N))}
        total = mp.mpf(0)
        for T in triangulations(N):
            # r_X = ρ_X / α′X: the integrand decays like exp(-sum ρ) in every cone, the scale exp-sinh expects
            rays = [[mp.mpf(c) / a[index[X]] for c in g[X]] for X in T]
            jac = 1 / mp.fprod(a[index[X]] for X in T)
            total += jac * mp.quad(
                lambda *r, rays=rays: f(*(mp.fsum(rk * ray[d] for rk, ray in zip(r, rays)) for d in range(N - 3))),
                *([[0, mp.inf]] * (N - 3)),
            )
        return total


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
def stringy_amplitude(X, alpha, N: int | None = None, method: str = "auto", dps: int = 20, **rule_kwargs) -> Evaluation:
    """The stringy Tr(φ³) amplitude A_N[X] (no α′^{N-3} prefactor) for a batch of kinematic points.

    Args:
        X (`np.ndarray` of shape (..., N(N-3)/2), or a mapping `{"X13": ...}`): planar variables.
        alpha (`float` or `np.ndarray`): α′ (> 0), broadcast against the batch shape of X.
        N (`int`, *optional*): number of points (inferred from X).
        method (`str`, defaults to `"auto"`): `"closed_form"` (N = 4: Beta; N = 5: 3F2; vectorised, analytic
            continuation), `"curve"` (vectorised curve quadrature, N <= 6, convergent region only),
            `"continued"` (N <= 6, cone-by-cone Gauss-Jacobi with one subtraction at each facet: every α′X > -1,
            off the pole 0; see [`~hf_ext.amplitudes.continuation`]), `"worldsheet"` (N = 5, Gauss-Jacobi on the
            sector-decomposed square), `"mpmath_curve"` (N <= 5, slow), `"mpmath_closed_form"` (mpmath Beta /
            hyp3f2);
            `"auto"` is the closed form for N <= 5 (at N = 5 the curve integral replaces it where its estimated
            rounding error exceeds 1e-10 relative) and for N = 6 the curve integral in the Euclidean region, the
            continuation outside it.
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
    size = int(np.prod(aX.shape[:-1]))
    limit = MAX_MP_BATCH if method.startswith("mpmath") else MAX_BATCH
    if size > limit:
        raise ValueError(
            f"{size} kinematic points (batch of X broadcast with α′) exceed the limit of {limit} per "
            f"call for method={method!r}; split the batch"
        )
    if size == 0:  # an empty batch (of X or of α′): zero amplitudes, not a numpy reduction error
        empty = np.zeros(aX.shape[:-1])
        return Evaluation(empty, empty.copy(), method)
    if np.max(np.abs(aX)) > MAX_AX:
        raise ValueError(
            f"|α′X| must be <= {MAX_AX:g} (the amplitude is below e^-{MAX_AX:g} there, or the "
            f"closed form cancels); got max |α′X| = {float(np.max(np.abs(aX))):.4g}"
        )
    if method == "auto":
        if N == 5 and np.all(aX > 0):
            # closed form where it is well conditioned, the curve integral where the 3F2 cancels (large α′X)
            value, error = closed_forms.five_point_closed_form(aX, return_error=True)
            bad = error > 1e-10 * np.abs(value)
            if np.any(bad):
                fix = curve_integral(aX[bad], N, **rule_kwargs)
                value, error = value.copy(), error.copy()
                value[bad], error[bad] = fix.value, fix.error
            return Evaluation(value, error, "closed_form+curve" if np.any(bad) else "closed_form")
        method = "closed_form" if N <= 5 else ("curve" if np.all(aX > 0) else "continued")
    if method == "continued":
        from .continuation import continued_amplitude

        return continued_amplitude(aX, N)
    if method == "curve":
        return curve_integral(aX, N, **rule_kwargs)
    if method == "worldsheet":
        if N != 5:
            raise ValueError(f"the worldsheet evaluator is the 5-point gauge (0, xy, y, 1, ∞); got N = {N}")
        return worldsheet_five_point(aX)
    if method == "closed_form":
        if N == 4:
            value = closed_forms.beta_amplitude(aX[..., 0], aX[..., 1])
            # log-gamma rounding grows with the arguments; measured <= 1e-14 relative against mpmath in tests
            error = 64 * EPS * np.abs(value) * (1 + np.abs(aX).sum(axis=-1))
        elif N == 5:
            value, error = closed_forms.five_point_closed_form(aX, return_error=True)
        else:
            raise ValueError(f"closed forms exist here for N = 4 and 5 only; got N = {N} (use method='curve')")
        return Evaluation(value, error, "closed_form")
    if N > MAX_MPMATH_POINTS:
        raise ValueError(f"mpmath evaluators support N <= {MAX_MPMATH_POINTS}; got N = {N}")
    if method == "mpmath_curve":
        return _mp_batch(lambda r: curve_integral_mp(r, N, dps), aX, dps, method)
    import mpmath as mp

    if N == 4:
        return _mp_batch(lambda r: mp.beta(mp.mpf(float(r[0])), mp.mpf(float(r[1]))), aX, dps, method)
    if np.any(aX[..., 3] <= 0):
        check_convergent(aX[..., 3:4], 5, "mpmath's 3F2 at unit argument (excess α′X25)")
    return _mp_batch(lambda r: closed_forms.five_point_closed_form_mp(r, dps), aX, dps, method)
