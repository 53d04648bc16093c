"""Stage-Structured GRPO returns and advantages (RubricEM §3.3).

G[i][k] = Σ_{j≥k} Λ[k][j] · R[i][j], with Λ upper-triangular and unit diagonal.
A[i][k] = (G[i][k] − mean_i G[·][k]) / (std_i G[·][k] + ε), normalized per stage across the
group. The standard deviation is the population one (ddof = 0). Terminal broadcast (plain
GRPO) gives every stage the answer-stage score: G[i][k] = R[i][K].
"""

import math
from collections.abc import Sequence
from typing import Literal

from rubricate_client import ssgrpo as client_ssgrpo
from rubricate_client.constants import ADVANTAGE_EPS, DEFAULT_LAMBDA, N_STAGES
from rubricate_client.errors import DomainError

Matrix = list[list[float]]
PartialMatrix = list[list[float | None]]
"""A matrix whose None entries are stages left without a judgment (flagged, excluded)."""
Mode = Literal["stagewise", "terminal"]


def validate_lambda(lam: Sequence[Sequence[float]], *, field: str = "lambda") -> Matrix:
    """Check shape (K×K), finiteness, zeros below the diagonal and ones on it."""
    if len(lam) != N_STAGES or any(len(row) != N_STAGES for row in lam):
        raise DomainError(f"must be a {N_STAGES}×{N_STAGES} matrix", field=field)
    out: Matrix = []
    for k, row in enumerate(lam):
        clean: list[float] = []
        for j, value in enumerate(row):
            v = float(value)
            where = f"{field}[{k}][{j}]"
            if not math.isfinite(v):
                raise DomainError("must be a finite number", field=where)
            if j < k and v != 0.0:
                raise DomainError("must be 0: Λ is upper-triangular (causal)", field=where)
            if j == k and v != 1.0:
                raise DomainError("must be 1: Λ has a unit diagonal", field=where)
            clean.append(v)
        out.append(clean)
    return out


def validate_scores(scores: Sequence[Sequence[float]], *, field: str = "scores") -> Matrix:
    if len(scores) == 0:
        raise DomainError("must hold at least one row", field=field)
    out: Matrix = []
    for i, row in enumerate(scores):
        if len(row) != N_STAGES:
            raise DomainError(f"must have {N_STAGES} entries", field=f"{field}[{i}]")
        clean: list[float] = []
        for k, value in enumerate(row):
            v = float(value)
            if not (math.isfinite(v) and 0.0 <= v <= 1.0):
                raise DomainError("must be in [0, 1]", field=f"{field}[{i}][{k}]")
            clean.append(v)
        out.append(clean)
    return out


def default_lambda() -> Matrix:
    return [list(row) for row in DEFAULT_LAMBDA]


def stage_returns(
    scores: Sequence[Sequence[float]],
    *,
    lam: Sequence[Sequence[float]] | None = None,
    mode: Mode = "stagewise",
) -> Matrix:
    if mode == "terminal":
        return [[row[N_STAGES - 1]] * N_STAGES for row in scores]
    matrix = default_lambda() if lam is None else lam
    return [
        [sum(matrix[k][j] * row[j] for j in range(k, N_STAGES)) for k in range(N_STAGES)]
        for row in scores
    ]


def group_advantages(returns: Sequence[Sequence[float]], *, eps: float = ADVANTAGE_EPS) -> Matrix:
    n = len(returns)
    if n == 0:
        return []
    out: Matrix = [[0.0] * N_STAGES for _ in range(n)]
    for k in range(N_STAGES):
        column = [row[k] for row in returns]
        mean = sum(column) / n
        std = math.sqrt(sum((g - mean) ** 2 for g in column) / n)
        for i, g in enumerate(column):
            out[i][k] = (g - mean) / (std + eps)
    return out


def partial_returns(
    scores: Sequence[Sequence[float | None]],
    *,
    lam: Sequence[Sequence[float]] | None = None,
    mode: Mode = "stagewise",
) -> PartialMatrix:
    """`stage_returns` where a None score is a stage with no judgment: its own return is None,
    and it adds nothing to the returns of earlier stages (an unscored stage is the same for the
    whole group, so leaving its term out moves no advantage). Terminal mode reads the answer
    stage only: None there makes the whole row None."""
    if mode == "terminal":
        return [[row[N_STAGES - 1]] * N_STAGES for row in scores]
    return client_ssgrpo.stage_returns(scores, lam=DEFAULT_LAMBDA if lam is None else lam)


def partial_advantages(
    returns: Sequence[Sequence[float | None]], *, eps: float = ADVANTAGE_EPS
) -> PartialMatrix:
    """`group_advantages` normalizing each stage over the rollouts that have a return for it;
    a None return has a None advantage and is left out of the stage's mean and std. One
    definition with the client's (`rubricate_client.ssgrpo`, the veRL estimator's)."""
    return client_ssgrpo.stage_advantages(returns, eps=eps)
