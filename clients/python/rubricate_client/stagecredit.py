"""Stage credit (RubricEM's SS-GRPO) in a trainer: the switch and Λ, the per-sample stage
rows, and how per-stage advantages become per-token advantages. Shared by the TRL trainer
(`rubricate_client.trl.StagewiseGRPOTrainer`) and the veRL estimator
(`rubricate_client.verl_manager`); pure Python, no trainer library.

Settings (explicit arguments win over the environment):

- `RUBRICATE_STAGE_CREDIT`: `on` (default) or `off`. Off is exactly the trainer's own GRPO on
  the scalar reward R_answer: the trainer's advantage code runs untouched.
- `RUBRICATE_STAGE_LAMBDA`: Λ, the stage discount of the returns G_k = Σ_{j≥k} Λ[k][j]·R_j.
  `paper` (default: RubricEM's matrix, `constants.DEFAULT_LAMBDA`), a number d in [0, 1]
  (Λ[k][j] = d^(j−k): each stage's own score plus downstream scores discounted by distance),
  or a JSON 4×4 matrix (upper-triangular, unit diagonal).

Which samples get per-stage credit: one whose four stages were all found in its tokens and
scored (`scored` 1, `fallback` 0). A scored sample with a stage missing, or scored on its
answer only (the judge's answer-only fallback), is an answer-only row: it joins the group's
answer-stage statistics and every one of its tokens gets the answer-stage advantage. A
sample the platform could not score has no row at all: it is left out of every stage's mean
and std, and its tokens get advantage 0 (no learning signal, never a made-up reward).
"""

import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubricate_client.constants import ADVANTAGE_EPS, DEFAULT_LAMBDA, N_STAGES, STAGES
from rubricate_client.ssgrpo import PartialMatrix, stage_advantages, stage_returns

STAGE_CREDIT_ENV = "RUBRICATE_STAGE_CREDIT"
STAGE_LAMBDA_ENV = "RUBRICATE_STAGE_LAMBDA"
Lambda = tuple[tuple[float, ...], ...]
Row = list[float | None]

_ON = {"1", "true", "on", "yes"}
_OFF = {"0", "false", "off", "no"}


def parse_switch(value: bool | str | None, *, default: bool = True) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _ON:
        return True
    if text in _OFF:
        return False
    raise ValueError(f"stage_credit must be on or off, got {value!r}")


def parse_lambda(value: Any) -> Lambda:
    """Λ from `paper`/None, a discount d in [0, 1], or a 4×4 matrix (as JSON text or nested
    sequences); checked like the platform's `lambda` (upper-triangular, unit diagonal)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "paper")):
        return tuple(tuple(row) for row in DEFAULT_LAMBDA)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(
                f"stage lambda must be 'paper', a number in [0, 1] or a {N_STAGES}x{N_STAGES} "
                f"matrix, got {value!r}"
            ) from exc
    if isinstance(value, int | float) and not isinstance(value, bool):
        d = float(value)
        if not (math.isfinite(d) and 0.0 <= d <= 1.0):
            raise ValueError(f"a stage discount must be in [0, 1], got {value!r}")
        return tuple(
            tuple(d ** (j - k) if j >= k else 0.0 for j in range(N_STAGES)) for k in range(N_STAGES)
        )
    if not isinstance(value, Sequence) or len(value) != N_STAGES:
        raise ValueError(f"stage lambda must be a {N_STAGES}x{N_STAGES} matrix, got {value!r}")
    rows: list[tuple[float, ...]] = []
    for k, row in enumerate(value):
        if not isinstance(row, Sequence) or len(row) != N_STAGES:
            raise ValueError(f"stage lambda row {k} must have {N_STAGES} entries, got {row!r}")
        clean = tuple(float(v) for v in row)
        for j, v in enumerate(clean):
            if not math.isfinite(v):
                raise ValueError(f"stage lambda[{k}][{j}] must be finite")
            if j < k and v != 0.0:
                raise ValueError(f"stage lambda[{k}][{j}] must be 0: Λ is upper-triangular")
            if j == k and v != 1.0:
                raise ValueError(f"stage lambda[{k}][{j}] must be 1: Λ has a unit diagonal")
        rows.append(clean)
    return tuple(rows)


@dataclass(frozen=True)
class StageCredit:
    enabled: bool = True
    lam: Lambda = tuple(tuple(row) for row in DEFAULT_LAMBDA)

    @classmethod
    def from_env(cls, *, enabled: bool | str | None = None, lam: Any = None) -> "StageCredit":
        on = parse_switch(
            enabled if enabled is not None else os.environ.get(STAGE_CREDIT_ENV) or None
        )
        matrix = parse_lambda(lam if lam is not None else os.environ.get(STAGE_LAMBDA_ENV))
        return cls(enabled=on, lam=matrix)

    def describe(self, path: str) -> str:
        """The start-up log line: which path this run's credit takes."""
        if not self.enabled:
            return f"rubricate stage credit: off ({path}): the trainer's own GRPO on R_answer"
        lam = "paper" if self.lam == tuple(tuple(r) for r in DEFAULT_LAMBDA) else list(self.lam)
        return (
            f"rubricate stage credit: on ({path}): SS-GRPO per-token advantages, each stage's "
            f"tokens get A_k, Λ={lam}"
        )


def credit_row(
    logs: Mapping[str, Any], ends: Sequence[int] | None, *, scored_reward: float | None
) -> Row:
    """A sample's stage scores for SS-GRPO (None: no such stage in the group's statistics).
    `logs` holds `scored`, `fallback` and `R_<stage>` (the gateway's per-sample logs),
    `ends` the last token of each stage in this sample's tokens (-1: not found; None: not
    mapped), `scored_reward` the sample's reward (None: unscored)."""
    if scored_reward is None or float(logs.get("scored", 1.0)) < 0.5:
        return [None] * N_STAGES
    full = (
        float(logs.get("fallback", 0.0)) < 0.5
        and all(f"R_{s}" in logs for s in STAGES)
        and ends is not None
        and len(ends) == N_STAGES
        and min(ends) >= 0
        and all(a < b for a, b in itertools.pairwise(ends))
    )
    if full:
        return [float(logs[f"R_{s}"]) for s in STAGES]
    return [None] * (N_STAGES - 1) + [float(scored_reward)]


def group_advantages(
    rows: Sequence[Row],
    *,
    lam: Sequence[Sequence[float]],
    scale: bool = True,
    eps: float = ADVANTAGE_EPS,
) -> PartialMatrix:
    """SS-GRPO advantages of one group (`rubricate_client.ssgrpo`); a group of one has no
    baseline, so its advantages are 0 (as GRPO's)."""
    advantages = stage_advantages(stage_returns(rows, lam=lam), eps=eps, scale=scale)
    if len(rows) == 1:
        return [[None if a is None else 0.0 for a in advantages[0]]]
    return advantages


def per_token(
    advantages: Sequence[float | None], ends: Sequence[int], length: int, *, default: float = 0.0
) -> list[float]:
    """One advantage per token of a response of `length` tokens: the tokens after the previous
    stage's last token up to stage k's last token (`ends[k]`; -1: absent) get A_k; the answer
    stage runs to the last token (trailing special tokens included). A stage whose advantage
    is None gives its tokens `default`."""
    out = [default] * length
    start = 0
    for k in range(N_STAGES):
        end = ends[k] if k < len(ends) else -1
        if k == N_STAGES - 1:
            end = max(end, length - 1)
        if end < start:
            continue
        value = advantages[k]
        fill = default if value is None or not math.isfinite(value) else float(value)
        for t in range(start, min(end + 1, length)):
            out[t] = fill
        start = end + 1
    return out


def stage_ends(ranges: Mapping[str, tuple[int, int] | None]) -> list[int]:
    """Each stage's last token index from `tokens.token_ranges` (-1: not found)."""
    return [-1 if (found := ranges.get(s)) is None else found[1] - 1 for s in STAGES]


def increments(rewards: Sequence[float]) -> list[float]:
    """The token rewards written at the stage ends: R_plan, then each stage's score minus the
    previous one, so the response's token rewards sum to R_answer (what veRL logs, validates
    and filters on stays R_answer) and their running sum gives back every R_k."""
    out = []
    previous = 0.0
    for value in rewards:
        out.append(float(value) - previous)
        previous = float(value)
    return out


def component_weights(lam: Any = None) -> tuple[float, ...]:
    """The weights of the stage components R_plan … R_answer when a trainer normalizes each
    within its group and sums them (GDPO; TRL's `normalize_then_sum`, veRL's `gdpo`):
    w_j = Σ_k Λ[k][j], how much R_j counts in all the SS-GRPO returns G_k = Σ_j Λ[k][j]·R_j
    together (RubricEM's Λ: 1.0, 1.4, 2.0, 3.4). `lam` as `parse_lambda` takes it; None:
    RUBRICATE_STAGE_LAMBDA, else the paper's."""
    matrix = parse_lambda(lam if lam is not None else os.environ.get(STAGE_LAMBDA_ENV))
    return tuple(round(sum(row[j] for row in matrix), 12) for j in range(N_STAGES))
