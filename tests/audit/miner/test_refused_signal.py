"""The audit's view of the answer's reading as assertion units (issue 32): each scored group
keeps its rollouts' refused verdicts and claimed credit, and the step signals report them."""

from datetime import UTC, datetime

import pytest

from rubricate.audit.miner.repository import AuditRecord
from rubricate.audit.miner.schemas import AuditRollout, AuditSubmission
from rubricate.audit.miner.service import compute_signals, summarize
from rubricate.audit.settings import AuditSettings
from rubricate.core.rubrics import make_rubric
from rubricate_client.schemas.rubrics import Judgment, RubricSpec

ANSWER = make_rubric(spec=RubricSpec(title="A", description="a"), stage="answer", origin="active")


def rollout(rollout_id: str, judgment: Judgment, r_answer: float) -> AuditRollout:
    return AuditRollout(
        id=rollout_id,
        trajectory="<answer>x</answer>",
        spans={"plan": None, "research": None, "review": None, "answer": (0, 18)},
        scores={"plan": None, "research": None, "review": None, "answer": r_answer},
        judgments=[judgment],
    )


def test_refused_verdicts_and_credit_reach_the_step_signals() -> None:
    gamed = Judgment(
        rubric_id=ANSWER.id, stage="answer", score=0, refused="cites a hedge", claimed_score=2
    )
    honest = Judgment(rubric_id=ANSWER.id, stage="answer", score=2)
    submission = AuditSubmission(
        scoring_id="sc_" + "0" * 32,
        question_id="q",
        question="q?",
        step=5,
        rubrics=[ANSWER],
        rollouts=[rollout("r0", gamed, 0.0), rollout("r1", honest, 1.0)],
    )
    summary = summarize(submission)
    assert summary["refused"] == {"r0": [1.0, 1.0]}
    record = AuditRecord(
        tenant="t",
        scoring_id=submission.scoring_id,
        question_id="q",
        step=5,
        status="skipped",
        reason=None,
        summary=summary,
        group=None,
        result=None,
        error=None,
        created_at=datetime.now(UTC),
        finished_at=None,
    )
    signals = compute_signals([record], question_id=None, settings=AuditSettings())
    (step,) = signals.steps
    assert step.refused_rollouts == 1
    assert step.refused_credit == pytest.approx(0.5)  # 1.0 claimed over 2 scored rollouts
