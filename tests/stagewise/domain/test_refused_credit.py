"""How much of a rollout's answer score the platform refused (issue 32's audit signal)."""

import pytest

from rubricate.core.rubrics import make_rubric
from rubricate.stagewise.domain.scoring import refused_credit
from rubricate_client.schemas.rubrics import Judgment, RubricSpec

A = make_rubric(
    spec=RubricSpec(title="A", description="a", weight=3), stage="answer", origin="active"
)
B = make_rubric(
    spec=RubricSpec(title="B", description="b", weight=1), stage="answer", origin="active"
)
P = make_rubric(spec=RubricSpec(title="P", description="p"), stage="plan", origin="active")


def judged(rubric_id: str, score: int, **extra: object) -> Judgment:
    return Judgment(rubric_id=rubric_id, stage="answer", score=score, **extra)


def test_refused_credit_is_what_the_refused_verdicts_would_have_added() -> None:
    judgments = [
        judged(A.id, 0, refused="cites a hedge", claimed_score=2),
        judged(B.id, 2),
    ]
    count, credit = refused_credit([A, B, P], judgments)
    # actual R_answer = (3*0 + 1*1)/4 = 0.25; claimed (3*1 + 1*1)/4 = 1.0
    assert count == 1 and credit == pytest.approx(0.75)


def test_nothing_refused_or_nothing_judged_is_zero() -> None:
    assert refused_credit([A, B], [judged(A.id, 2), judged(B.id, 1)]) == (0, 0.0)
    assert refused_credit([A, B], []) == (0, 0.0)
    # a floor with no judge call: refused, but nothing was claimed
    floor = [judged(A.id, 0, refused="asserts nothing"), judged(B.id, 0, refused="asserts nothing")]
    assert refused_credit([A, B], floor) == (2, 0.0)
