"""Planar kinematics of the N-gon: planar variables X_{i,j}, Mandelstams, u-variables and random valid points.

Conventions (spec `amplitudes.md` §2.2-2.3, paper [arXiv:2504.21676](https://arxiv.org/abs/2504.21676)):
- labels are 1-based as in the paper; X_{i,j} = (p_i + ... + p_{j-1})^2 for 1 <= i < j <= N, j - i >= 2,
  (i, j) != (1, N); there are N(N-3)/2 of them, stored in the lexicographic order of [`planar_variables`];
- X_{i,i+1} = X_{1,N} = X_{i,i} = 0, X_{j,i} = X_{i,j}, indices are cyclic (X_{i,N+1} = X_{1,i});
- s_ab = 2 p_a.p_b = -(X_{a,b} + X_{a+1,b+1} - X_{a,b+1} - X_{a+1,b}); X_{i,j} = sum_{i<=a<b<=j-1} s_ab;
- metric mostly minus, so X > 0 ("Euclidean region", where the string integrals converge) is timelike.
"""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np

MAX_POINTS = 12  # far beyond what any integral here can do; keeps index tables small


def check_points(N: int, minimum: int = 4) -> int:
    """Validates a number of external points `N` (an int in [minimum, MAX_POINTS])."""
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or not minimum <= N <= MAX_POINTS:
        raise ValueError(f"N (number of points) must be an integer in [{minimum}, {MAX_POINTS}], got {N!r}")
    return int(N)


@functools.cache
def planar_variables(N: int) -> tuple[tuple[int, int], ...]:
    """The N(N-3)/2 planar variables of the N-gon as 1-based pairs `(i, j)`, in lexicographic order."""
    N = check_points(N)
    return tuple((i, j) for i in range(1, N + 1) for j in range(i + 2, N + 1) if (i, j) != (1, N))


@functools.cache
def variable_index(N: int) -> dict[tuple[int, int], int]:
    """Maps a 1-based pair `(i, j)` (i < j) to its column in a planar-variable array."""
    return {pair: k for k, pair in enumerate(planar_variables(N))}


def canonical_pair(N: int, i: int, j: int) -> tuple[int, int] | None:
    """The stored pair for X_{i,j} under the cyclic conventions, or `None` when X_{i,j} vanishes identically."""
    i, j = (i - 1) % N + 1, (j - 1) % N + 1
    if i > j:
        i, j = j, i
    if j - i <= 1 or (i, j) == (1, N):
        return None
    return (i, j)


def x_label(i: int, j: int) -> str:
    """`"X13"` for X_{1,3}; a comma separates two-digit labels (`"X1,10"`)."""
    return f"X{i}{j}" if max(i, j) < 10 else f"X{i},{j}"


def x_labels(N: int) -> list[str]:
    return [x_label(i, j) for i, j in planar_variables(N)]


def as_planar_array(X, N: int) -> np.ndarray:
    """Validates planar variables: an array of shape (..., N(N-3)/2) or a mapping `{"X13": v, (2, 4): v, ...}`
    naming every variable. Returns a float (or complex) array."""
    N = check_points(N)
    pairs = planar_variables(N)
    if isinstance(X, dict):
        values = {}
        for key, value in X.items():
            if isinstance(key, str):
                m = re.fullmatch(r"X_?(\d),?(\d)|X_?(\d+),(\d+)", key.strip())
                if not m:
                    raise ValueError(f"cannot parse planar variable name {key!r} (use 'X13' or 'X1,10')")
                a, b = (int(g) for g in m.groups() if g is not None)
            else:
                a, b = key
            pair = canonical_pair(N, a, b)
            if pair is None:
                raise ValueError(f"X{a},{b} vanishes identically at N = {N}; it is not a planar variable")
            values[pair] = value
        missing = [x_label(*p) for p in pairs if p not in values]
        if missing:
            raise ValueError(f"missing planar variables for N = {N}: {', '.join(missing)}")
        X = np.array([values[p] for p in pairs])
    arr = np.asarray(X)
    if arr.dtype.kind not in "fiuc":
        raise ValueError(f"planar variables must be numbers, got dtype {arr.dtype}")
    if arr.ndim == 0 or arr.shape[-1] != len(pairs):
        raise ValueError(f"N = {N} has {len(pairs)} planar variables {x_labels(N)}; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("planar variables must be finite")
    return arr.astype(np.complex128 if arr.dtype.kind == "c" else np.float64)


def x_value(X: np.ndarray, N: int, i: int, j: int):
    """X_{i,j} with the cyclic conventions (zero for adjacent labels and (1, N))."""
    pair = canonical_pair(N, i, j)
    return 0.0 if pair is None else X[..., variable_index(N)[pair]]


def mandelstams(X, N: int) -> np.ndarray:
    """s_ab = 2 p_a.p_b from planar variables, shape (..., N, N), symmetric with zero diagonal.

    Args:
        X (`np.ndarray` of shape (..., N(N-3)/2)): planar variables.
        N (`int`): number of points.
    """
    X = as_planar_array(X, N)
    s = np.zeros(X.shape[:-1] + (N, N), dtype=X.dtype)
    for a in range(1, N + 1):
        for b in range(a + 1, N + 1):
            c = x_value(X, N, a, b) + x_value(X, N, a + 1, b + 1) - x_value(X, N, a, b + 1) - x_value(X, N, a + 1, b)
            s[..., a - 1, b - 1] = s[..., b - 1, a - 1] = -c
    return s


def planar_from_mandelstams(s: np.ndarray) -> np.ndarray:
    """Inverse of [`mandelstams`]: X_{i,j} = sum_{i <= a < b <= j-1} s_ab.

    Args:
        s (`np.ndarray` of shape (..., N, N)): symmetric Mandelstams with zero diagonal and zero row sums.

    Raises:
        ValueError: `s` is not square, not symmetric, or violates momentum conservation (sum_b s_ab = 0).
    """
    s = np.asarray(s)
    if s.ndim < 2 or s.shape[-1] != s.shape[-2]:
        raise ValueError(f"s must have shape (..., N, N), got {s.shape}")
    N = check_points(s.shape[-1])
    scale = max(1.0, float(np.max(np.abs(s))))
    if not np.allclose(s, np.swapaxes(s, -1, -2), atol=1e-9 * scale):
        raise ValueError("s must be symmetric (s_ab = s_ba)")
    if not np.allclose(s.sum(axis=-1) - np.diagonal(s, axis1=-2, axis2=-1), 0, atol=1e-9 * scale * N):
        raise ValueError("momentum conservation violated: sum_{b != a} s_ab must vanish for every a")
    out = [sum(s[..., a - 1, b - 1] for a in range(i, j) for b in range(a + 1, j)) for i, j in planar_variables(N)]
    return np.stack(out, axis=-1)


def momenta_to_planar(p: np.ndarray) -> np.ndarray:
    """Planar variables from all-outgoing massless momenta `p` of shape (..., N, D), metric (+, -, ..., -).

    Raises:
        ValueError: momenta not massless or not conserved (relative tolerance 1e-8).
    """
    p = np.asarray(p, dtype=np.float64)
    N = check_points(p.shape[-2])
    metric = np.diag([1.0] + [-1.0] * (p.shape[-1] - 1))
    scale = max(1.0, float(np.max(np.abs(p))) ** 2)
    if np.max(np.abs(p.sum(axis=-2))) > 1e-8 * np.sqrt(scale) * N:
        raise ValueError("momentum conservation violated: sum_a p_a must vanish")
    if np.max(np.abs(np.einsum("...i,ij,...j->...", p, metric, p))) > 1e-8 * scale:
        raise ValueError("momenta must be massless (p_a^2 = 0)")
    s = 2 * np.einsum("...ai,ij,...bj->...ab", p, metric, p)
    s[..., np.arange(N), np.arange(N)] = 0.0
    return planar_from_mandelstams(s)


def random_massless_momenta(N: int, rng: np.random.Generator | None = None, energy: float = 1.0) -> np.ndarray:
    """A physical point in four dimensions: 2 -> (N-2) massless scattering in the all-outgoing convention, the
    final state drawn with RAMBO (flat phase space). Some planar variables are negative here.

    Args:
        N (`int`): number of points (>= 4).
        rng (`np.random.Generator`, *optional*): random generator (seed 0 if omitted).
        energy (`float`): beam energy; p_1 and p_2 are the negated incoming beams.

    Returns:
        `np.ndarray` of shape (N, 4), metric (+, -, -, -).
    """
    N = check_points(N)
    rng = np.random.default_rng(0) if rng is None else rng
    r = rng.uniform(size=(N - 2, 4))
    c, phi, e = 2 * r[:, 0] - 1, 2 * np.pi * r[:, 1], -np.log(r[:, 2] * r[:, 3])
    sin = np.sqrt(1 - c * c)
    q = np.stack([e, e * sin * np.cos(phi), e * sin * np.sin(phi), e * c], axis=1)
    Q = q.sum(axis=0)
    M = np.sqrt(Q[0] ** 2 - Q[1:] @ Q[1:])
    b, gamma, x = -Q[1:] / M, Q[0] / M, 2 * energy / M
    bq = q[:, 1:] @ b
    out = np.empty_like(q)
    out[:, 0] = x * (gamma * q[:, 0] + bq)
    out[:, 1:] = x * (q[:, 1:] + b * q[:, :1] + (bq / (1 + gamma))[:, None] * b)
    beams = np.array([[-energy, 0, 0, -energy], [-energy, 0, 0, energy]], dtype=np.float64)
    return np.concatenate([beams, out])


def random_planar_kinematics(
    N: int, size: int | None = None, *, rng: np.random.Generator | None = None, low: float = 0.2, high: float = 3.0
) -> np.ndarray:
    """Random planar variables in the Euclidean region, uniform in [low, high] (every X is independent).

    Args:
        N (`int`): number of points.
        size (`int`, *optional*): number of points to draw (leading axis); `None` draws one.
        rng (`np.random.Generator`, *optional*): random generator (seed 0 if omitted).
        low, high (`float`): sampling range; `low > 0` keeps every stringy integral convergent.
    """
    N = check_points(N)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"need finite low < high, got low={low!r}, high={high!r}")
    rng = np.random.default_rng(0) if rng is None else rng
    shape = (len(planar_variables(N)),) if size is None else (size, len(planar_variables(N)))
    return rng.uniform(low, high, shape)


@functools.cache
def crossing_variables(N: int) -> dict[tuple[int, int], tuple[tuple[int, int], ...]]:
    """For each chord (i, j), the chords that cross it (the Y in the u-equation u_X + prod_Y u_Y = 1)."""
    pairs = planar_variables(N)

    def crosses(c, d):
        (i, j), (k, l) = c, d  # noqa: E741 (index names of the paper)
        return len({i, j, k, l}) == 4 and ((i < k < j) != (i < l < j))

    return {c: tuple(d for d in pairs if crosses(c, d)) for c in pairs}


def u_variables_from_z(z: np.ndarray) -> np.ndarray:
    """u_{i,j} = (z_{i,j-1} z_{i-1,j}) / (z_{i,j} z_{i-1,j-1}) (absolute values, indices mod N) for ordered finite
    worldsheet points `z` of shape (..., N). All u lie in (0, 1)."""
    z = np.asarray(z, dtype=np.float64)
    N = check_points(z.shape[-1])

    def d(a, b):
        return np.abs(z[..., (b - 1) % N] - z[..., (a - 1) % N])

    out = [d(i, j - 1) * d(i - 1, j) / (d(i, j) * d(i - 1, j - 1)) for i, j in planar_variables(N)]
    return np.stack(out, axis=-1)


def koba_nielsen(z: np.ndarray, s: np.ndarray, alpha: float) -> np.ndarray:
    """prod_{a<b} |z_b - z_a|^{alpha s_ab} for worldsheet points `z` (..., N) and Mandelstams `s` (..., N, N)."""
    z = np.asarray(z, dtype=np.float64)
    N = z.shape[-1]
    log = sum(
        alpha * s[..., a, b] * np.log(np.abs(z[..., b] - z[..., a])) for a, b in itertools.combinations(range(N), 2)
    )
    return np.exp(log)
