"""Drift and gaming signals over training steps, from audited and scored groups.

- Agreement drift: the mean group agreement of the first `window` audited steps against the
  last `window`; the drop is first − last (positive = the judges agree less than they did).
- Gaming candidate: a rubric whose live mean score rises over the steps (least-squares slope
  × the step span, on the 0..2 scale) by at least `min_rise`, while the reference judge's
  mean on the same groups rises by at least `min_rise` less. At least `min_steps` distinct
  steps are needed before a rubric is judged at all.
- Length correlation: Pearson's r of reward and response length over a step's rollouts
  (None when either is constant or fewer than three rollouts).
A signal that cannot be computed is None, never 0.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Point = tuple[int, float]
"""(training step, value)."""


@dataclass(frozen=True)
class RubricPoint:
    step: int
    live: float
    reference: float


@dataclass(frozen=True)
class GamingCandidate:
    rubric_id: str
    steps: int
    live_rise: float
    reference_rise: float


@dataclass(frozen=True)
class AgreementDrift:
    steps: int
    first: float | None
    last: float | None

    @property
    def drop(self) -> float | None:
        if self.first is None or self.last is None:
            return None
        return self.first - self.last


def step_means(points: Iterable[Point]) -> list[Point]:
    """Mean value per step, sorted by step."""
    sums: dict[int, list[float]] = {}
    for step, value in points:
        sums.setdefault(step, []).append(value)
    return [(s, sum(v) / len(v)) for s, v in sorted(sums.items())]


def fitted_rise(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of y on x times the span of x: how much y rose over the window.
    None with fewer than two distinct x."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return None
    n = len(points)
    mx = sum(xs) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx * (max(xs) - min(xs))


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than three pairs or a constant side."""
    if len(xs) != len(ys):
        raise ValueError("pearson needs two lists of the same length")
    n = len(xs)
    if n < 3:
        return None
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def gaming_candidates(
    series: Mapping[str, Sequence[RubricPoint]], *, min_steps: int = 3, min_rise: float = 0.3
) -> list[GamingCandidate]:
    """Rubrics whose live mean rises over the steps while the reference's does not (module
    docstring); sorted by how much more the live mean rose."""
    out = []
    for rubric_id, points in series.items():
        live = step_means((p.step, p.live) for p in points)
        reference = step_means((p.step, p.reference) for p in points)
        if len(live) < max(2, min_steps):
            continue
        live_rise = fitted_rise([(float(s), v) for s, v in live])
        reference_rise = fitted_rise([(float(s), v) for s, v in reference])
        if live_rise is None or reference_rise is None:
            continue
        if live_rise >= min_rise and live_rise - reference_rise >= min_rise:
            out.append(
                GamingCandidate(
                    rubric_id=rubric_id,
                    steps=len(live),
                    live_rise=live_rise,
                    reference_rise=reference_rise,
                )
            )
    return sorted(out, key=lambda c: c.reference_rise - c.live_rise)


def agreement_drift(points: Iterable[Point], *, window: int = 3) -> AgreementDrift:
    """First `window` steps' mean agreement against the last `window` steps' (they do not
    overlap: with fewer than 2 × window steps, each side takes half)."""
    if window < 1:
        raise ValueError("window must be at least 1")
    means = step_means(points)
    if len(means) < 2:
        return AgreementDrift(steps=len(means), first=None, last=None)
    k = min(window, len(means) // 2)
    first = [v for _, v in means[:k]]
    last = [v for _, v in means[-k:]]
    return AgreementDrift(steps=len(means), first=sum(first) / k, last=sum(last) / k)
