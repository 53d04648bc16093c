"""Step rubrics, action verification and step rewards (Co-ReAct §3.3, App. A; ARCO).

- A step rubric is K short criteria with weights normalized to sum to 1.
- Verification (Co-ReAct §3.3): each criterion is judged satisfied or not; the step's score is
  the weighted fraction of satisfied criteria, and it passes when that fraction is ≥ τ.
- Step rewards (ARCO's trajectory decomposition): the outcome is split over the steps in
  proportion to their rubric scores, so the step rewards sum exactly to the outcome; when
  every step scores 0 the outcome is split evenly, flagged (see `decompose_outcome`).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from rubricate_client.errors import DomainError

_MANTISSA_BITS = 53
_MIN_EXPONENT = -1074
"""The exponent of the smallest subnormal float: 2**-1074."""


@dataclass(frozen=True)
class Criterion:
    text: str
    weight: float
    """Normalized: the weights of a rubric sum to 1."""


def normalize_weights(weights: Sequence[float], *, field: str = "weights") -> list[float]:
    """Weights scaled to sum to 1. Each must be finite and > 0."""
    if not weights:
        raise DomainError("needs at least one weight", field=field)
    clean: list[float] = []
    for i, value in enumerate(weights):
        v = float(value)
        if not math.isfinite(v) or v <= 0.0:
            raise DomainError("must be a finite number > 0", field=f"{field}[{i}]")
        clean.append(v)
    try:
        total = math.fsum(clean)
    except OverflowError:  # fsum raises rather than return inf
        total = math.inf
    if not math.isfinite(total):
        raise DomainError("weights are too large to add up", field=field)
    return [v / total for v in clean]


def make_rubric(
    texts: Sequence[str], weights: Sequence[float], *, field: str = "criteria"
) -> list[Criterion]:
    """Criteria with their weights normalized; texts must be non-blank."""
    if len(texts) != len(weights):
        raise DomainError("one weight per criterion", field=field)
    for i, text in enumerate(texts):
        if not text.strip():
            raise DomainError("must not be blank", field=f"{field}[{i}].text")
    normalized = normalize_weights(weights, field=field)
    return [Criterion(text=t.strip(), weight=w) for t, w in zip(texts, normalized, strict=True)]


def render_rubric(criteria: Sequence[Criterion]) -> str:
    """The block injected into the agent's context before it chooses its next action."""
    lines = ["<step_rubric>", "Your next action should satisfy these criteria:"]
    for n, criterion in enumerate(criteria, start=1):
        lines.append(f"{n}. [weight {criterion.weight:.2f}] {criterion.text}")
    lines.append("</step_rubric>")
    return "\n".join(lines)


def weighted_fraction(criteria: Sequence[Criterion], satisfied: Sequence[bool]) -> float:
    """Σ w_i·[satisfied_i] / Σ w_i, in [0, 1]."""
    if len(criteria) != len(satisfied):
        raise ValueError("one verdict per criterion")
    total = math.fsum(c.weight for c in criteria)
    got = math.fsum(c.weight for c, ok in zip(criteria, satisfied, strict=True) if ok)
    return min(1.0, max(0.0, got / total)) if total > 0 else 0.0


def passes(score: float, *, threshold: float) -> bool:
    """Co-ReAct's accept rule, as the issue fixes it: score ≥ τ."""
    return score >= threshold


@dataclass(frozen=True)
class Verdict:
    satisfied: bool
    reason: str = ""


def retry_feedback(criteria: Sequence[Criterion], verdicts: Sequence[Verdict]) -> str | None:
    """Feedback naming the failed criteria, for the single retry; None when all are met."""
    failed = [
        (n, c, v)
        for n, (c, v) in enumerate(zip(criteria, verdicts, strict=True), start=1)
        if not v.satisfied
    ]
    if not failed:
        return None
    lines = ["Your proposed action does not yet satisfy these rubric criteria:"]
    for n, criterion, verdict in failed:
        reason = f" (verifier: {verdict.reason})" if verdict.reason else ""
        lines.append(f"- criterion {n}: {criterion.text}{reason}")
    lines.append("Revise the action so that it addresses them, keeping what already works.")
    return "\n".join(lines)


# --- ARCO decomposition ---------------------------------------------------------------------

Decomposition = Literal["proportional", "uniform", "zero_outcome"]


@dataclass(frozen=True)
class StepRewards:
    rewards: list[float]
    shares: list[float]
    """Each step's fraction of the outcome (sums to 1)."""
    method: Decomposition


def _split_units(total: int, weights: Sequence[Fraction]) -> list[int]:
    """`total` units apportioned by `weights` (largest remainder; ties to the earlier step)."""
    weight_sum = sum(weights, Fraction(0))
    exact = [total * w / weight_sum for w in weights]
    units = [math.floor(x) for x in exact]
    left = total - sum(units)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - units[i]), i))
    for i in order[:left]:
        units[i] += 1
    return units


def decompose_outcome(outcome: float, scores: Sequence[float]) -> StepRewards:
    """Split the terminal `outcome` over steps in proportion to their rubric `scores`.

    r_t = outcome · q_t / Σ_j q_j, rounded so that the float rewards sum *exactly* to the
    outcome in any summation order: the outcome's 53-bit mantissa is apportioned as whole
    units (largest remainder), so every reward and every partial sum is a representable
    multiple of the outcome's last bit. A step whose criteria all scored 0 gets reward 0.
    When every step scored 0 the outcome is split evenly (`uniform`, reported to the caller);
    an outcome of 0 gives every step 0 (`zero_outcome`).
    """
    if not scores:
        raise DomainError("needs at least one step", field="steps")
    if not math.isfinite(outcome):
        raise DomainError("must be a finite number", field="outcome")
    for i, q in enumerate(scores):
        if not (math.isfinite(q) and 0.0 <= q <= 1.0):
            raise DomainError("must be in [0, 1]", field=f"scores[{i}]")
    n = len(scores)
    method: Decomposition
    if sum(scores) > 0:
        weights = [Fraction(q) for q in scores]
        method = "proportional"
    else:
        weights = [Fraction(1)] * n
        method = "uniform"
    weight_sum = sum(weights, Fraction(0))
    shares = [float(w / weight_sum) for w in weights]
    if outcome == 0.0:
        return StepRewards(rewards=[0.0] * n, shares=shares, method="zero_outcome")
    mantissa, exponent = math.frexp(abs(outcome))
    bits = min(_MANTISSA_BITS, exponent - _MIN_EXPONENT)  # fewer bits for subnormal outcomes
    units_total = int(math.ldexp(mantissa, bits))
    unit = math.ldexp(1.0, exponent - bits)
    sign = -1.0 if outcome < 0 else 1.0
    units = _split_units(units_total, weights)
    rewards = [sign * u * unit for u in units]
    return StepRewards(rewards=rewards, shares=shares, method=method)
