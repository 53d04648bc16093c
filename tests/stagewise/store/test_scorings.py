"""Stored stagewise scorings in the database (PostgreSQL and SQLite): kept for reference by
id, expired after the retention, listed by question newest first."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, update

from rubricate.db.engine import unit_of_work
from rubricate.stagewise.store.models import StagewiseScoringRow
from rubricate.stagewise.store.schemas import ScoringIn
from rubricate.stagewise.store.scorings import ScoringExistsError, ScoringStore
from rubricate_client.schemas.rubrics import Judgment, RubricView
from rubricate_client.schemas.scorings import ScoredRollout

QUESTION = "Why was the Mars Climate Orbiter lost?"


@pytest.fixture
def scorings(engine: Engine) -> ScoringStore:
    return ScoringStore(engine, retention_s=3600)


def scoring(scoring_id: str) -> ScoringIn:
    return ScoringIn(
        scoring_id=scoring_id,
        question_id="q1",
        question=QUESTION,
        step=7,
        rubrics=[
            RubricView(
                id="r_1",
                stage="answer",
                title="Unit",
                description="Names it.",
                weight=3,
                polarity="positive",
            )
        ],
        rollouts={
            "a": ScoredRollout(
                scores={"plan": 0.5, "research": 0.5, "review": 0.5, "answer": 1.0},
                judgments=[Judgment(rubric_id="r_1", stage="answer", score=2, justification="ok")],
            )
        },
    )


def test_stored_scorings_round_trip_and_expire(
    scorings: ScoringStore, engine: Engine, tenant: str
) -> None:
    sid = f"sc_{uuid.uuid4().hex}"
    scorings.put_scoring(tenant, scoring(sid), retention_s=3600)
    got = scorings.get_scoring(tenant, sid)
    assert got is not None
    assert got.rollouts["a"].judgments[0].justification == "ok"
    assert got.rubrics[0].title == "Unit" and got.step == 7
    assert scorings.get_scoring(f"{tenant}-x", sid) is None
    with pytest.raises(ScoringExistsError):
        scorings.put_scoring(tenant, scoring(sid), retention_s=3600)
    # age it past the retention: the next write deletes it
    with unit_of_work(engine, write=True) as session:
        session.execute(
            update(StagewiseScoringRow)
            .where(StagewiseScoringRow.scoring_id == sid)
            .values(created_at=datetime.now(UTC) - timedelta(hours=2))
        )
    scorings.put_scoring(tenant, scoring(f"sc_{uuid.uuid4().hex}"), retention_s=3600)
    assert scorings.get_scoring(tenant, sid) is None


def scoring_of(scoring_id: str, question_id: str = "q1") -> ScoringIn:
    return ScoringIn(
        scoring_id=scoring_id,
        question_id=question_id,
        question=QUESTION,
        step=7,
        rubrics=[
            RubricView(
                id="r_1",
                stage="answer",
                title="Unit",
                description="Names it.",
                weight=3,
                polarity="positive",
            )
        ],
        rollouts={
            "a": ScoredRollout(
                scores={"plan": 0.5, "research": None, "review": 0.5, "answer": 1.0},
                judgments=[
                    Judgment(rubric_id="r_1", stage="answer", score=2, justification="names it")
                ],
            ),
            "b": ScoredRollout(scores=None, judgments=[], fallback="unscored"),
        },
    )


def test_stored_scorings_of_a_question_newest_first(
    scorings: ScoringStore, engine: Engine, tenant: str
) -> None:
    ids = [f"sc_{n}_{uuid.uuid4().hex[:8]}" for n in range(4)]
    for sid in ids:
        scorings.put_scoring(tenant, scoring_of(sid), retention_s=3600)
    scorings.put_scoring(
        tenant, scoring_of(f"sc_other_{uuid.uuid4().hex[:8]}", "q2"), retention_s=3600
    )
    base = datetime.now(UTC) - timedelta(minutes=30)
    with unit_of_work(engine, write=True) as session:
        for n, sid in enumerate(ids):
            session.execute(
                update(StagewiseScoringRow)
                .where(StagewiseScoringRow.tenant == tenant, StagewiseScoringRow.scoring_id == sid)
                .values(created_at=base + timedelta(minutes=n))
            )
    latest = scorings.list_scorings(tenant, "q1", limit=3)
    assert [s.scoring_id for s in latest] == ids[::-1][:3]
    first = latest[0]
    assert first.rollouts["a"].judgments[0].justification == "names it"
    assert first.rollouts["a"].scores is not None and first.rollouts["a"].scores["research"] is None
    assert first.rollouts["b"].fallback == "unscored" and first.rubrics[0].title == "Unit"
    assert first.question_id == "q1" and first.step == 7
    assert len(scorings.list_scorings(tenant, "q2", limit=20)) == 1
    assert scorings.list_scorings(tenant, "q3", limit=20) == []
    assert scorings.list_scorings(f"{tenant}-other", "q1", limit=20) == []
