"""How far a reference judge agrees with the live judge on one scored group.

Inputs are plain numbers: per rollout, each rubric's score on the 0..2 scale (the judgment's
`value`) and each stage's score R_k in [0, 1] (None where the stage has no judgment). Rules:
- a rubric's agreement is 1 − mean |live − reference| / 2 over the rollouts both judges
  scored it on (1 = the same scores, 0 = opposite ends of the scale); `exact` is the share of
  those rollouts with the same rounded score;
- a stage's delta is the mean of reference − live over the rollouts where both have a score;
- a rollout's reward, for ranking, is the mean of its non-null stage scores;
- rank agreement is Kendall's τ-b of the two reward lists (ties counted, None when fewer
  than two rollouts or when either side ranks everything equal);
- the best rollout changes when the live judge's best is not among the reference's best.
Nothing judged by one side only is compared, and nothing missing becomes a 0.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rubricate_client.constants import SCORE_MAX, STAGES
from rubricate_client.schemas.rubrics import Stage

RubricScores = Mapping[str, float]
"""Rubric id → score (0..2) on one rollout."""
StageScores = Mapping[Stage, float | None]


@dataclass(frozen=True)
class RubricAgreement:
    rubric_id: str
    rollouts: int
    """Rollouts both judges scored this rubric on."""
    agreement: float
    exact: float
    live_mean: float
    reference_mean: float


@dataclass(frozen=True)
class GroupComparison:
    rubrics: list[RubricAgreement]
    stage_deltas: dict[Stage, float | None]
    kendall_tau: float | None
    best_changed: bool | None
    """None when either side has no rewarded rollout."""
    live_best: list[str] = field(default_factory=list)
    reference_best: list[str] = field(default_factory=list)
    live_rewards: dict[str, float] = field(default_factory=dict)
    reference_rewards: dict[str, float] = field(default_factory=dict)

    @property
    def agreement(self) -> float | None:
        """The group's agreement: the rollout-weighted mean of its rubrics' agreements."""
        n = sum(r.rollouts for r in self.rubrics)
        if n == 0:
            return None
        return sum(r.agreement * r.rollouts for r in self.rubrics) / n


def rubric_agreement(
    live: Mapping[str, RubricScores], reference: Mapping[str, RubricScores]
) -> list[RubricAgreement]:
    """Per rubric, over the rollouts (keys) both judges scored it on; sorted by rubric id."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for rollout_id, live_scores in live.items():
        ref_scores = reference.get(rollout_id)
        if ref_scores is None:
            continue
        for rubric_id, value in live_scores.items():
            other = ref_scores.get(rubric_id)
            if other is not None:
                pairs.setdefault(rubric_id, []).append((value, other))
    out = []
    for rubric_id in sorted(pairs):
        values = pairs[rubric_id]
        n = len(values)
        out.append(
            RubricAgreement(
                rubric_id=rubric_id,
                rollouts=n,
                agreement=1.0 - sum(abs(a - b) for a, b in values) / n / SCORE_MAX,
                exact=sum(1 for a, b in values if round(a) == round(b)) / n,
                live_mean=sum(a for a, _ in values) / n,
                reference_mean=sum(b for _, b in values) / n,
            )
        )
    return out


def stage_deltas(
    live: Mapping[str, StageScores], reference: Mapping[str, StageScores]
) -> dict[Stage, float | None]:
    """Stage → mean of reference − live over the rollouts where both scored it."""
    out: dict[Stage, float | None] = {}
    for stage in STAGES:
        diffs = []
        for rollout_id, live_scores in live.items():
            a = live_scores.get(stage)
            b = reference.get(rollout_id, {}).get(stage)
            if a is not None and b is not None:
                diffs.append(b - a)
        out[stage] = sum(diffs) / len(diffs) if diffs else None
    return out


def rollout_reward(scores: StageScores) -> float | None:
    """The mean of a rollout's non-null stage scores; None when it has none."""
    values = [v for v in scores.values() if v is not None]
    return sum(values) / len(values) if values else None


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's τ-b of two paired lists (ties in either list handled); None when it is
    undefined: fewer than two pairs, or one list all ties."""
    if len(a) != len(b):
        raise ValueError("kendall_tau needs two lists of the same length")
    concordant = discordant = ties_a = ties_b = 0
    n = len(a)
    for i in range(n):
        for j in range(i + 1, n):
            da = _sign(a[i] - a[j])
            db = _sign(b[i] - b[j])
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif da == db:
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


def best(rewards: Mapping[str, float], *, tolerance: float = 1e-9) -> list[str]:
    """The ids sharing the highest reward, sorted."""
    if not rewards:
        return []
    top = max(rewards.values())
    return sorted(k for k, v in rewards.items() if v >= top - tolerance)


def compare_group(
    *,
    live_rubrics: Mapping[str, RubricScores],
    reference_rubrics: Mapping[str, RubricScores],
    live_stages: Mapping[str, StageScores],
    reference_stages: Mapping[str, StageScores],
) -> GroupComparison:
    """Everything the audit stores about one group (module docstring for the rules)."""
    live_rewards = _rewards(live_stages)
    reference_rewards = _rewards(reference_stages)
    both = sorted(set(live_rewards) & set(reference_rewards))
    tau = kendall_tau([live_rewards[k] for k in both], [reference_rewards[k] for k in both])
    live_top = best({k: live_rewards[k] for k in both})
    reference_top = best({k: reference_rewards[k] for k in both})
    changed = None if not both else not set(live_top) & set(reference_top)
    return GroupComparison(
        rubrics=rubric_agreement(live_rubrics, reference_rubrics),
        stage_deltas=stage_deltas(live_stages, reference_stages),
        kendall_tau=tau,
        best_changed=changed,
        live_best=live_top,
        reference_best=reference_top,
        live_rewards=live_rewards,
        reference_rewards=reference_rewards,
    )


def _rewards(stages: Mapping[str, StageScores]) -> dict[str, float]:
    out = {}
    for rollout_id, scores in stages.items():
        reward = rollout_reward(scores)
        if reward is not None:
            out[rollout_id] = reward
    return out


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)
