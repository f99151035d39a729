"""Verdicts a reviewer can check: seed summaries, paired differences with intervals, and rule-decided verdicts.

Every reproduction reports through this module and computes no spread of its own:

* [`summarize`] → [`Summary`]: mean ± **sample** standard deviation (ddof = 1) over seeds; a table cell via
  [`Summary.cell`].
* [`paired_difference`] → [`PairedDifference`]: per-seed differences `a − b` of two arms run on the same seeds, their
  mean, sample SD and a Student-t confidence interval (95 % by default).
* [`paired_bootstrap`]: the same when the metric is a mean over items (test examples, images, prompts): a paired
  percentile bootstrap over the items.
* [`VerdictRule`]: what the paper claims, stated as "the method beats the reference by at least `margin`"; its
  [`VerdictRule.describe`] is printed **before** the run, and [`VerdictRule.decide`] turns the measured difference
  (and a premise or positive-control check) into one of [`VERDICTS`].
* [`write_results`]: `results.json` with the rules, the verdicts and where and when it was measured.

The decision rule, with the difference oriented so that positive favours the method and the 95 % interval `[lo, hi]`:

| verdict | when |
|---|---|
| *premise absent* | the premise / positive control named by the rule failed: the comparison cannot speak to the claim |
| *confirmed* | `lo > 0` and `mean ≥ margin`: the method is better with confidence, by a meaningful amount |
| *refuted* | `hi < margin`: an effect as large as the claimed margin is excluded |
| *inconclusive* | otherwise, or fewer than two paired seeds (no interval) |

With `margin = 0` "refuted" means the interval lies below zero (the method is worse with confidence).
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CONFIRMED, REFUTED, INCONCLUSIVE, PREMISE_ABSENT = "confirmed", "refuted", "inconclusive", "premise absent"
VERDICTS: tuple[str, ...] = (CONFIRMED, REFUTED, INCONCLUSIVE, PREMISE_ABSENT)
RESULTS_SCHEMA_VERSION = 1


def _finite_floats(values: Sequence[float], what: str) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) and not hasattr(v, "__float__"):
            raise TypeError(f"{what} must be numbers, got {type(v).__name__}")
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"{what} must be finite, got {f}")
        out.append(f)
    if not out:
        raise ValueError(f"{what} is empty")
    return out


def sample_sd(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof = 1); `nan` for a single value."""
    xs = _finite_floats(values, "values")
    if len(xs) < 2:
        return math.nan
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


# ---- Student t quantile (no scipy in the core) ---------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbeta) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbeta) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution with `df` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"df must be positive, got {df}")
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t (bisection on [`t_cdf`]; |error| < 1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


# ---- summaries and differences -------------------------------------------------------------------------------------


def _fmt(x: float, digits: int) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


@dataclass(frozen=True)
class Summary:
    """Mean ± sample SD of one quantity over seeds."""

    mean: float
    sd: float
    n: int
    values: tuple[float, ...]

    def cell(self, digits: int = 3) -> str:
        """`"0.412 ± 0.031"` (`"0.412 (n = 1)"` for a single seed)."""
        if self.n < 2:
            return f"{_fmt(self.mean, digits)} (n = 1)"
        return f"{_fmt(self.mean, digits)} ± {_fmt(self.sd, digits)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "sd": None if math.isnan(self.sd) else self.sd,
            "n": self.n,
            "values": list(self.values),
        }


def summarize(values: Sequence[float]) -> Summary:
    """Mean and sample SD (ddof = 1) of `values` (one per seed)."""
    xs = _finite_floats(values, "values")
    return Summary(mean=sum(xs) / len(xs), sd=sample_sd(xs), n=len(xs), values=tuple(xs))


@dataclass(frozen=True)
class PairedDifference:
    """`a − b` over paired seeds (or items): mean, sample SD, and a confidence interval."""

    mean: float
    sd: float
    n: int
    ci_low: float
    ci_high: float
    confidence: float
    per_pair: tuple[float, ...]
    method: str = "t"  # "t" (Student-t over seeds) or "bootstrap" (paired percentile bootstrap over items)

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.ci_low) or math.isnan(self.ci_high))

    def cell(self, digits: int = 3) -> str:
        """`"+0.040 ± 0.016 [+0.001, +0.079]"`: mean ± SD and the interval (`n/a` without two pairs)."""
        if not self.has_interval:
            return f"{self.mean:+.{digits}f} (n = {self.n}, no interval)"
        sd = f" ± {self.sd:.{digits}f}" if not math.isnan(self.sd) else ""
        return f"{self.mean:+.{digits}f}{sd} [{self.ci_low:+.{digits}f}, {self.ci_high:+.{digits}f}]"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairedDifference:
        """The inverse of [`to_dict`]: a stored difference (`None` for a missing SD or interval) back as an object."""
        nan = math.nan
        return cls(
            d["mean"],
            nan if d["sd"] is None else d["sd"],
            d["n"],
            nan if d["ci_low"] is None else d["ci_low"],
            nan if d["ci_high"] is None else d["ci_high"],
            d["confidence"],
            tuple(d["per_pair"]),
            d.get("method", "t"),
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["per_pair"] = list(self.per_pair)
        for k in ("sd", "ci_low", "ci_high"):
            if isinstance(d[k], float) and math.isnan(d[k]):
                d[k] = None
        return d


def paired_difference(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95) -> PairedDifference:
    """Per-seed `a[i] − b[i]` with the mean, sample SD and a Student-t interval at `confidence`.

    `a` and `b` must come from the same seeds, in the same order.
    """
    xa, xb = _finite_floats(a, "a"), _finite_floats(b, "b")
    if len(xa) != len(xb):
        raise ValueError(f"paired arms need the same number of seeds, got {len(xa)} and {len(xb)}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    d = [x - y for x, y in zip(xa, xb, strict=True)]
    n = len(d)
    mean = sum(d) / n
    if n < 2:
        return PairedDifference(mean, math.nan, n, math.nan, math.nan, confidence, tuple(d))
    sd = sample_sd(d)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return PairedDifference(mean, sd, n, mean - half, mean + half, confidence, tuple(d))


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> PairedDifference:
    """Paired percentile bootstrap of `mean(a − b)` over items (each `a[i]`, `b[i]` scored on the same item)."""
    xa, xb = _finite_floats(a, "a"), _finite_floats(b, "b")
    if len(xa) != len(xb):
        raise ValueError(f"paired items need equal lengths, got {len(xa)} and {len(xb)}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be at least 100, got {n_resamples}")
    d = [x - y for x, y in zip(xa, xb, strict=True)]
    n = len(d)
    mean = sum(d) / n
    if n < 2:
        return PairedDifference(mean, math.nan, n, math.nan, math.nan, confidence, tuple(d), "bootstrap")
    rng = random.Random(seed)
    means = sorted(sum(d[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_resamples))
    alpha = (1.0 - confidence) / 2.0
    lo = means[max(0, int(math.floor(alpha * n_resamples)))]
    hi = means[min(n_resamples - 1, int(math.ceil((1.0 - alpha) * n_resamples)) - 1)]
    return PairedDifference(mean, sample_sd(d), n, lo, hi, confidence, tuple(d), "bootstrap")


# ---- premises and verdicts ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Premise:
    """The outcome of a premise or positive-control check, measured before the comparison it guards."""

    name: str
    passed: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """One verdict word with the rule that produced it and the numbers it read."""

    claim: str
    verdict: str
    reason: str
    difference: PairedDifference | None = None
    premise: Premise | None = None

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def line(self) -> str:
        return f"{self.claim}: {self.verdict.upper()} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "verdict": self.verdict,
            "reason": self.reason,
            "difference": self.difference.to_dict() if self.difference else None,
            "premise": self.premise.to_dict() if self.premise else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        """The inverse of [`to_dict`]: a stored verdict (as `results.json` holds it) back as an object."""
        diff, premise = d.get("difference"), d.get("premise")
        return cls(
            d["claim"],
            d["verdict"],
            d["reason"],
            PairedDifference.from_dict(diff) if diff else None,
            Premise(**premise) if premise else None,
        )


@dataclass(frozen=True)
class VerdictRule:
    """A claim tested as "method − reference ≥ `margin`" on a paired difference.

    Args:
        claim (`str`): the paper's claim in one line (what a *confirmed* would mean).
        metric (`str`): the metric compared, as printed in the tables.
        margin (`float`): the smallest gain that counts as the claimed effect (in the metric's units, ≥ 0).
        higher_is_better (`bool`): `False` for losses and errors; the difference is then negated before deciding.
        premise (`str`, *optional*): the premise or positive control that must hold first.
        confidence (`float`): the interval's level.
    """

    claim: str
    metric: str
    margin: float = 0.0
    higher_is_better: bool = True
    premise: str | None = None
    confidence: float = 0.95

    def __post_init__(self):
        if not (isinstance(self.margin, int | float) and math.isfinite(self.margin) and self.margin >= 0):
            raise ValueError(f"VerdictRule.margin must be a finite number >= 0, got {self.margin!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"VerdictRule.confidence must be in (0, 1), got {self.confidence!r}")

    def describe(self) -> str:
        """The rule in words, printed before the run starts."""
        direction = "higher" if self.higher_is_better else "lower"
        gain = f"method − reference on {self.metric} ({direction} is better, oriented so + favours the method)"
        pct = f"{self.confidence:.0%}"
        first = f"premise first: {self.premise} (else PREMISE ABSENT); " if self.premise else ""
        return (
            f"[rule] {self.claim}: {first}paired {gain}, {pct} interval [lo, hi]; "
            f"CONFIRMED if lo > 0 and mean >= {self.margin:g}; REFUTED if hi < {self.margin:g}; "
            f"else INCONCLUSIVE (also with < 2 pairs)"
        )

    def decide(self, difference: PairedDifference, premise: Premise | bool | None = None) -> Verdict:
        """The verdict for a measured `difference` (method − reference, in the metric's own orientation)."""
        if isinstance(premise, bool):
            premise = Premise(self.premise or "premise", premise)
        if self.premise is not None and premise is None:
            raise ValueError(f"rule {self.claim!r} names a premise ({self.premise}); pass its measured outcome")
        if premise is not None and not premise.passed:
            return Verdict(
                self.claim, PREMISE_ABSENT, f"premise failed: {premise.detail or premise.name}", difference, premise
            )
        d = difference if self.higher_is_better else _negated(difference)
        if not d.has_interval:
            return Verdict(self.claim, INCONCLUSIVE, f"{d.n} pair(s): no interval", difference, premise)
        ci = (
            f"mean {d.mean:+.4g}, {self.confidence:.0%} interval [{d.ci_low:+.4g}, {d.ci_high:+.4g}], "
            f"margin {self.margin:g}"
        )
        if d.ci_low > 0 and d.mean >= self.margin:
            return Verdict(self.claim, CONFIRMED, ci, difference, premise)
        if d.ci_high < self.margin:
            return Verdict(self.claim, REFUTED, ci, difference, premise)
        return Verdict(self.claim, INCONCLUSIVE, ci, difference, premise)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.describe()}


def _negated(d: PairedDifference) -> PairedDifference:
    return PairedDifference(
        -d.mean, d.sd, d.n, -d.ci_high, -d.ci_low, d.confidence, tuple(-x for x in d.per_pair), d.method
    )


def print_rules(rules: Sequence[VerdictRule] | Mapping[str, VerdictRule], *, file=None) -> list[str]:
    """Prints each rule's [`VerdictRule.describe`] (call it before the run starts); returns the lines."""
    items = list(rules.values()) if isinstance(rules, Mapping) else list(rules)
    lines = [r.describe() for r in items]
    for line in lines:
        print(line, file=file, flush=True)
    return lines


# ---- results.json ------------------------------------------------------------------------------------------------


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment() -> dict[str, Any]:
    """Where and when a measurement was taken: date, commit, machine and its load, and, when torch is loaded, what
    else decides the last digits ([`_torch_environment`]: threads, CPU kernel set, GPU)."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "commit": _git_commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "python": platform.python_version(),
        "load_average": load,
        **_torch_environment(),
    }


def _torch_environment() -> dict[str, Any]:
    """What decides a run's last digits besides the code, when torch is loaded (else `{}`): `torch_threads` (the
    order of a float sum follows the intra-op thread count), `cpu_capability` (torch's CPU kernel set: an AVX2 and an
    AVX-512 machine sum in other orders; seen 2026-12-04, a new AVX-512 host changed the last digits of most trained
    quick results) and, when the run used a GPU (CUDA initialised in this process), `accelerator` (its name)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    facts: dict[str, Any] = {
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
    }
    if torch.cuda.is_initialized():
        facts["accelerator"] = torch.cuda.get_device_name()
    return facts


# Flags that say where files go, how many processes run, how progress shows and whether logged runs are reused:
# they change no number, so the command a results.json records (what a reader reruns to get the same numbers)
# leaves them out. `--device` stays: a GPU's float sums differ from the CPU's.
RUN_ONLY_FLAGS = ("--out", "--workers", "--quiet", "--resume")


def reproduce_command(method: str, argv: Sequence[str] | None, *, skip: Sequence[str] = ()) -> str:
    """`hf-ext reproduce METHOD <flags>`: the flags of `argv` (default `sys.argv[1:]`) as given, less the
    [`RUN_ONLY_FLAGS`] and `skip` (each with its values; `--flag=value` too). Flags left at their defaults stay
    unnamed, so the command reads as the user typed it."""
    words = list(sys.argv[1:] if argv is None else argv)
    dropped, kept, skipping = (*RUN_ONLY_FLAGS, *skip), [], False
    for word in words:
        if word.startswith("--"):
            skipping = word.split("=", 1)[0] in dropped
        if not skipping:
            kept.append(word)
    return " ".join(["hf-ext reproduce", method, *kept])


@dataclass
class Results:
    """The content of a reproduction's `results.json` (schema version [`RESULTS_SCHEMA_VERSION`])."""

    method: str
    scale: str
    rules: list[VerdictRule] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    tables: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=environment)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "method": self.method,
            "scale": self.scale,
            "environment": self.environment,
            "rules": [r.to_dict() for r in self.rules],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "tables": _jsonable(self.tables),
            "figures": list(self.figures),
        }


def _jsonable(x: Any) -> Any:
    if isinstance(x, Summary | PairedDifference | Verdict | Premise | VerdictRule):
        return x.to_dict()
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item") and callable(x.item):  # numpy / torch scalars
        return _jsonable(x.item())
    return x


def nan_for_none(x: Any) -> Any:
    """The inverse of how `write_results` stores missing numbers: every JSON null inside dicts and lists back as NaN
    (what a run that reads an earlier `results.json` back needs before it computes on it)."""
    if isinstance(x, Mapping):
        return {k: nan_for_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [nan_for_none(v) for v in x]
    return math.nan if x is None else x


def write_results(path: str | os.PathLike, results: Results | Mapping[str, Any]) -> Path:
    """Writes `results.json` atomically (a temporary file renamed into place); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = results.to_dict() if isinstance(results, Results) else _jsonable(results)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=2, sort_keys=False, allow_nan=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


__all__ = [
    "CONFIRMED",
    "INCONCLUSIVE",
    "PREMISE_ABSENT",
    "REFUTED",
    "RESULTS_SCHEMA_VERSION",
    "VERDICTS",
    "PairedDifference",
    "Premise",
    "Results",
    "Summary",
    "Verdict",
    "VerdictRule",
    "environment",
    "paired_bootstrap",
    "paired_difference",
    "print_rules",
    "sample_sd",
    "summarize",
    "t_cdf",
    "t_quantile",
    "write_results",
]
