"""Group scoring: judgments → stage scores R, returns G and advantages A (RubricEM §3.3, C.3).

Rules this module fixes (documented in docs/gateway.md):
- R[i][k] is the weight-averaged contribution of the stage-k rubrics, negatives inverted.
- A stage missing from a rollout scores `missing_stage_score` (default 0: the scaffold step
  was not performed); the judge is not asked about it.
- A stage with no rubric in the set has no judgment: its score, return and advantage are
  None (null) for every rollout, never 0; it adds nothing to earlier stages' returns and is
  reported in `unscored_stages` (docs/gateway.md, "Failures are never rewards").
- A rollout whose stagewise scoring failed but whose answer-stage fallback succeeded gets its
  answer score broadcast to the stages that have rubrics (terminal reward for that rollout),
  flagged.
- A rollout with no score at all is left out of the normalization and has no advantages; so
  is every None entry of a stage's column (advantages are normalized over the present ones).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rubricate.core.rubrics import contribution
from rubricate.stagewise.domain.buffer import variance
from rubricate.stagewise.domain.ssgrpo import Mode, partial_advantages, partial_returns
from rubricate_client.constants import STAGES
from rubricate_client.schemas.rubrics import Judgment, Rubric, Stage

Outcome = Literal["full", "answer_only", "failed"]


@dataclass(frozen=True)
class RolloutJudgments:
    missing: Sequence[Stage]
    judgments: Sequence[Judgment]
    outcome: Outcome = "full"


StageValues = dict[Stage, float | None]
"""Stage -> value; None where the stage has no judgment (flagged, excluded, never 0)."""


@dataclass
class RolloutScores:
    scores: StageValues | None
    returns: StageValues | None = None
    advantages: StageValues | None = None


@dataclass
class GroupScores:
    rollouts: list[RolloutScores]
    variances: dict[str, float] = field(default_factory=dict)
    unscored_stages: list[Stage] = field(default_factory=list)


def stage_score(
    rubrics: Sequence[Rubric], judgments: Mapping[str, Judgment], *, stage: Stage
) -> float | None:
    """Weighted mean of contributions of the stage's rubrics; None if the stage has none."""
    total = 0.0
    weight = 0
    for rubric in rubrics:
        if rubric.stage != stage:
            continue
        judgment = judgments.get(rubric.id)
        if judgment is None:
            raise ValueError(f"no judgment for rubric {rubric.id}")
        total += rubric.weight * contribution(score=judgment.value, polarity=rubric.polarity)
        weight += rubric.weight
    return None if weight == 0 else total / weight


def score_group(
    rubrics: Sequence[Rubric],
    rollouts: Sequence[RolloutJudgments],
    *,
    lam: Sequence[Sequence[float]] | None = None,
    mode: Mode = "stagewise",
    missing_stage_score: float = 0.0,
) -> GroupScores:
    stages_with_rubrics = {r.stage for r in rubrics}
    unscored: list[Stage] = [s for s in STAGES if s not in stages_with_rubrics]
    per_rollout: list[RolloutScores] = []
    samples: dict[str, list[float]] = {r.id: [] for r in rubrics}
    by_id = {r.id: r for r in rubrics}

    for rollout in rollouts:
        if rollout.outcome == "failed":
            per_rollout.append(RolloutScores(scores=None))
            continue
        judged = {j.rubric_id: j for j in rollout.judgments}
        for rid, j in judged.items():
            rubric = by_id.get(rid)
            if rubric is not None:
                samples[rid].append(contribution(score=j.value, polarity=rubric.polarity))
        scores: StageValues = {}
        active_stages: Sequence[Stage] = ("answer",) if rollout.outcome == "answer_only" else STAGES
        for stage in active_stages:
            if stage in rollout.missing:
                scores[stage] = missing_stage_score
                continue
            scores[stage] = stage_score(rubrics, judged, stage=stage)
        if rollout.outcome == "answer_only":
            answer = scores["answer"]
            scores = {s: None if s in unscored else answer for s in STAGES}
        per_rollout.append(RolloutScores(scores=scores))

    scored = [r for r in per_rollout if r.scores is not None]
    matrix = [[r.scores[s] for s in STAGES] for r in scored if r.scores is not None]
    returns = partial_returns(matrix, lam=lam, mode=mode)
    advantages = partial_advantages(returns)
    for r, g, a in zip(scored, returns, advantages, strict=True):
        r.returns = dict(zip(STAGES, g, strict=True))
        r.advantages = dict(zip(STAGES, a, strict=True))

    variances = {rid: variance(vals) for rid, vals in samples.items() if len(vals) >= 2}
    return GroupScores(rollouts=per_rollout, variances=variances, unscored_stages=unscored)


def refused_credit(rubrics: Sequence[Rubric], judgments: Sequence[Judgment]) -> tuple[int, float]:
    """(verdicts refused, R_answer they would have added): how much of a rollout's answer
    score the judge's own verdicts gave to text that is not an assertion carrying the rubric
    (docs/verifier.md, "Assertion units"). (0, 0.0) when the answer stage was not judged."""
    by_id = {j.rubric_id: j for j in judgments}
    if not any(r.stage == "answer" and r.id in by_id for r in rubrics):
        return 0, 0.0
    answer = [r for r in rubrics if r.stage == "answer" and r.id in by_id]
    refused = [by_id[r.id] for r in answer if by_id[r.id].refused is not None]
    if not refused:
        return 0, 0.0
    claimed = dict(by_id)
    for j in refused:
        if j.claimed_score is not None:
            claimed[j.rubric_id] = j.model_copy(
                update={"score": j.claimed_score, "expected_score": None}
            )
    actual = stage_score(answer, by_id, stage="answer") or 0.0
    paid = stage_score(answer, claimed, stage="answer") or 0.0
    return len(refused), max(0.0, paid - actual)
