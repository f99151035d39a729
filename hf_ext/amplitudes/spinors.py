"""Spinor-helicity kinematics in four dimensions: complex (or split-signature) massless momenta, helicity
polarisations and the Parke-Taylor MHV amplitude.

Conventions (those of L. Dixon, "Calculating scattering amplitudes efficiently", hep-ph/9601359), metric
(+, -, -, -), all particles outgoing, bilinear (never Hermitian) products so that complex vectors are allowed:
- a momentum is the bispinor p_{aȧ} = λ_a λ̃_ȧ = [[p0 + p3, p1 - i p2], [p1 + i p2, p0 - p3]], so det p = p^2 = 0;
- ⟨ij⟩ = λ_i^1 λ_j^2 - λ_i^2 λ_j^1, [ij] = λ̃_i^2 λ̃_j^1 - λ̃_i^1 λ̃_j^2, hence ⟨ij⟩[ji] = 2 p_i.p_j = s_ij;
- ε^+(k; q) = ⟨q|γ^μ|k] / (√2 ⟨qk⟩) is the bispinor √2 λ_q λ̃_k / ⟨qk⟩ and ε^-(k; q) = √2 λ_k λ̃_q / [kq], with
  ε^±.k = 0, ε^±.q = 0 and ε^+(k; q).ε^-(k; q) = -1 (q is the reference spinor; changing it is a gauge
  transformation ε -> ε + c k);
- Parke-Taylor: A(..., i^-, ..., j^-, ...) = i ⟨ij⟩^4 / (⟨12⟩⟨23⟩...⟨n1⟩) for all others +.

Real λ and λ̃ (independent) give real momenta in split signature (2, 2), where p2 is imaginary in these
Minkowski components; their invariants s_ij are real and can all be positive, which the string integrals need.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

METRIC = np.diag([1.0, -1.0, -1.0, -1.0])


def _check_spinors(lam, name: str) -> np.ndarray:
    lam = np.asarray(lam)
    if lam.dtype.kind not in "fiuc" or lam.ndim != 2 or lam.shape[1] != 2:
        raise ValueError(f"{name} must be a numeric array of shape (n, 2), got shape {np.shape(lam)}")
    if not np.all(np.isfinite(lam)):
        raise ValueError(f"{name} must be finite")
    return lam.astype(np.complex128)


def angle(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """⟨ab⟩ = λ_a^1 λ_b^2 - λ_a^2 λ_b^1 (broadcasting over leading axes)."""
    return la[..., 0] * lb[..., 1] - la[..., 1] * lb[..., 0]


def square(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    """[ab] = λ̃_a^2 λ̃_b^1 - λ̃_a^1 λ̃_b^2, so that ⟨ab⟩[ba] = s_ab."""
    return ta[..., 1] * tb[..., 0] - ta[..., 0] * tb[..., 1]


def bispinor_to_vector(M: np.ndarray) -> np.ndarray:
    """The 4-vector v^μ of a bispinor v_{aȧ} = v_μ σ^μ (inverse of [`vector_to_bispinor`])."""
    M = np.asarray(M)
    return np.stack(
        [
            (M[..., 0, 0] + M[..., 1, 1]) / 2,
            (M[..., 0, 1] + M[..., 1, 0]) / 2,
            1j * (M[..., 0, 1] - M[..., 1, 0]) / 2,
            (M[..., 0, 0] - M[..., 1, 1]) / 2,
        ],
        axis=-1,
    )


def vector_to_bispinor(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v)
    return np.stack(
        [
            np.stack([v[..., 0] + v[..., 3], v[..., 1] - 1j * v[..., 2]], -1),
            np.stack([v[..., 1] + 1j * v[..., 2], v[..., 0] - v[..., 3]], -1),
        ],
        -2,
    )


@dataclass(frozen=True)
class SpinorKinematics:
    """n massless momenta given by spinors, Σ_i λ_i λ̃_i = 0.

    Args:
        lam (`np.ndarray` of shape (n, 2)): λ_i.
        lamt (`np.ndarray` of shape (n, 2)): λ̃_i.
    """

    lam: np.ndarray
    lamt: np.ndarray

    def __post_init__(self):
        lam, lamt = _check_spinors(self.lam, "lam"), _check_spinors(self.lamt, "lamt")
        if lam.shape != lamt.shape or not 3 <= lam.shape[0] <= 12:
            raise ValueError(
                f"lam and lamt must have the same shape (n, 2) with 3 <= n <= 12, got {lam.shape} and {lamt.shape}"
            )
        total = np.einsum("ia,ib->ab", lam, lamt)
        scale = max(1.0, float(np.max(np.abs(lam)) * np.max(np.abs(lamt))))
        if np.max(np.abs(total)) > 1e-9 * scale * lam.shape[0]:
            raise ValueError("momentum conservation violated: Σ_i λ_i λ̃_i must vanish")
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "lamt", lamt)

    @property
    def n(self) -> int:
        return self.lam.shape[0]

    @classmethod
    def random(cls, n: int, rng: np.random.Generator | None = None, real: bool = False) -> SpinorKinematics:
        """Random spinors: complex (`real=False`) or real, i.e. split signature; λ̃_{n-1}, λ̃_n are solved
        from momentum conservation."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 3 <= n <= 12:
            raise ValueError(f"n must be an integer in [3, 12], got {n!r}")
        rng = np.random.default_rng(0) if rng is None else rng
        draw = (lambda *s: rng.normal(size=s)) if real else (lambda *s: rng.normal(size=s) + 1j * rng.normal(size=s))
        lam, lamt = draw(n, 2), draw(n, 2)
        a, b = n - 2, n - 1
        # ⟨b|: ⟨b a⟩ λ̃_a = -Σ_{i<a} ⟨b i⟩ λ̃_i, and ⟨a|: ⟨a b⟩ λ̃_b = -Σ_{i<a} ⟨a i⟩ λ̃_i
        lamt[a] = -sum(angle(lam[b], lam[i]) * lamt[i] for i in range(a)) / angle(lam[b], lam[a])
        lamt[b] = -sum(angle(lam[a], lam[i]) * lamt[i] for i in range(a)) / angle(lam[a], lam[b])
        return cls(lam, lamt)

    @classmethod
    def random_positive(
        cls, n: int, rng: np.random.Generator | None = None, max_ratio: float = 6.0, max_tries: int = 200_000
    ) -> SpinorKinematics:
        """Split-signature (real-spinor) kinematics with every planar channel s_(i,i+1) > 0 and every |s_ij| at
        most `max_ratio` times the smallest channel, by rejection (about 0.3% of 5-point draws qualify at 6): the
        region where the worldsheet integrals over the gluon positions converge, without large exponents (which
        need many more quadrature nodes)."""
        rng = np.random.default_rng(0) if rng is None else rng
        for _ in range(max_tries):
            sk = cls.random(n, rng, real=True)
            low = min(sk.s(i, (i + 1) % n).real for i in range(n))
            if low > 0 and max(abs(sk.s(i, j)) for i in range(n) for j in range(i + 1, n)) <= max_ratio * low:
                return sk
        raise RuntimeError(f"no split-signature point with all s_(i,i+1) > 0 in {max_tries} draws")  # pragma: no cover

    def momenta(self) -> np.ndarray:
        """k_i^μ, shape (n, 4), complex."""
        return bispinor_to_vector(np.einsum("ia,ib->iab", self.lam, self.lamt))

    def s(self, i: int, j: int) -> complex:
        """s_ij = ⟨ij⟩[ji] for 0-based legs."""
        return complex(angle(self.lam[i], self.lam[j]) * square(self.lamt[j], self.lamt[i]))

    def polarisations(self, helicities, refs=None) -> np.ndarray:
        """ε_i^{h_i}(k_i; q_i), shape (n, 4).

        Args:
            helicities (`str` or sequence of ±1): e.g. `"--+++"`.
            refs (sequence of int, *optional*): the leg whose spinor is the reference of each leg (must differ
                from it); defaults to the next leg.
        """
        h = parse_helicities(helicities, self.n)
        refs = [(i + 1) % self.n for i in range(self.n)] if refs is None else list(refs)
        if len(refs) != self.n or any(not 0 <= r < self.n or r == i for i, r in enumerate(refs)):
            raise ValueError(f"refs must give, for every leg, another leg in 0..{self.n - 1}; got {refs!r}")
        out = []
        for i, (hi, q) in enumerate(zip(h, refs)):
            den = angle(self.lam[q], self.lam[i]) if hi > 0 else square(self.lamt[i], self.lamt[q])
            size = (
                np.linalg.norm(self.lam[q]) * np.linalg.norm(self.lam[i])
                if hi > 0
                else np.linalg.norm(self.lamt[q]) * np.linalg.norm(self.lamt[i])
            )
            if abs(den) <= 1e-12 * size:
                raise ValueError(
                    f"reference leg {q} of leg {i}: its spinor is parallel to leg {i}'s "
                    f"({'⟨qk⟩' if hi > 0 else '[kq]'} = 0, e.g. 3-point kinematics); choose another ref"
                )
            if hi > 0:
                M = np.sqrt(2) * np.outer(self.lam[q], self.lamt[i]) / den
            else:
                M = np.sqrt(2) * np.outer(self.lam[i], self.lamt[q]) / den
            out.append(bispinor_to_vector(M))
        return np.array(out)

    def parke_taylor(self, helicities, order=None) -> complex:
        """i ⟨ab⟩^4 / (⟨σ1 σ2⟩ ... ⟨σn σ1⟩) for the two negative-helicity legs a, b (MHV), in the colour order
        `order` (0-based, default 0..n-1); raises unless exactly two helicities are negative."""
        h = parse_helicities(helicities, self.n)
        neg = [i for i, v in enumerate(h) if v < 0]
        if len(neg) != 2:
            raise ValueError(f"Parke-Taylor is the MHV amplitude: exactly two negative helicities, got {len(neg)}")
        order = list(range(self.n)) if order is None else list(order)
        if sorted(order) != list(range(self.n)):
            raise ValueError(f"order must be a permutation of 0..{self.n - 1}, got {order!r}")
        den = np.prod([angle(self.lam[order[k]], self.lam[order[(k + 1) % self.n]]) for k in range(self.n)])
        return complex(1j * angle(self.lam[neg[0]], self.lam[neg[1]]) ** 4 / den)


def parse_helicities(helicities, n: int) -> list[int]:
    """`"--+++"` or `(-1, -1, 1, 1, 1)` -> list of ±1 of length n."""
    if isinstance(helicities, str):
        if any(c not in "+-" for c in helicities):
            raise ValueError(f"helicities must be a string of '+' and '-', got {helicities!r}")
        h = [1 if c == "+" else -1 for c in helicities]
    else:
        h = list(helicities)
        if any(v not in (1, -1) for v in h):
            raise ValueError(f"helicities must be ±1, got {helicities!r}")
    if len(h) != n:
        raise ValueError(f"need {n} helicities, got {len(h)}")
    return [int(v) for v in h]
