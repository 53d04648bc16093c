"""Stage-Structured GRPO returns and advantages (RubricEM §3.3) on the client, for trainers
that compute advantages themselves (the veRL advantage estimator).

G[i][k] = Σ_{j≥k} Λ[k][j] · R[i][j] (Λ upper-triangular, unit diagonal) and
A[i][k] = (G[i][k] − mean_i G[·][k]) / (std_i G[·][k] + ε), normalized per stage across the
group with the population standard deviation. A None score is a stage without a judgment: its
own return and advantage are None, it adds nothing to earlier stages' returns, and it is left
out of its stage's mean and std. The same rules as the platform's `/v1/advantages/stagewise`.
"""

import math
from collections.abc import Sequence

from rubricate_client.constants import ADVANTAGE_EPS, DEFAULT_LAMBDA, N_STAGES

PartialMatrix = list[list[float | None]]


def stage_returns(
    scores: Sequence[Sequence[float | None]],
    *,
    lam: Sequence[Sequence[float]] = DEFAULT_LAMBDA,
) -> PartialMatrix:
    out: PartialMatrix = []
    for row in scores:
        out.append(
            [
                None
                if row[k] is None
                else sum(
                    lam[k][j] * value for j in range(k, N_STAGES) if (value := row[j]) is not None
                )
                for k in range(N_STAGES)
            ]
        )
    return out


def stage_advantages(
    returns: Sequence[Sequence[float | None]],
    *,
    eps: float = ADVANTAGE_EPS,
    scale: bool = True,
) -> PartialMatrix:
    """`scale=False` centres without dividing by the std (Dr. GRPO)."""
    out: PartialMatrix = [[None] * N_STAGES for _ in returns]
    for k in range(N_STAGES):
        present = [(i, g) for i, row in enumerate(returns) if (g := row[k]) is not None]
        if not present:
            continue
        mean = sum(g for _, g in present) / len(present)
        std = math.sqrt(sum((g - mean) ** 2 for _, g in present) / len(present))
        for i, g in present:
            out[i][k] = (g - mean) / (std + eps) if scale else g - mean
    return out
