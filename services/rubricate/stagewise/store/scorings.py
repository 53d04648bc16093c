"""Stored stagewise scorings in the database: what a `/v1/stagewise/score` call judged, kept
so that a reflection (or the console, or the audit) can refer to it by `scoring_id`.

Synchronous (the routes run it in worker threads); each method is one transaction. Scorings
older than the retention are deleted as new ones are stored.
"""

from datetime import timedelta

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError

from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.stagewise.store.models import StagewiseScoringRow
from rubricate.stagewise.store.schemas import ScoringIn
from rubricate_client.schemas.scorings import StoredScoring


class ScoringExistsError(ValueError):
    """A scoring of the same id is stored already (a 409)."""


def _scoring(row: StagewiseScoringRow) -> StoredScoring:
    return StoredScoring.model_validate(
        {
            **row.payload,
            "scoring_id": row.scoring_id,
            "question_id": row.question_id,
            "question": row.question,
            "step": row.step,
            "created_at": as_utc(row.created_at),
        }
    )


class ScoringStore:
    """`retention_s`: how long a stored scoring stays referable (`put_scoring`'s default;
    the store's `RUBRICATE_SCORING_RETENTION_S`)."""

    def __init__(self, engine: Engine, *, retention_s: float) -> None:
        self.engine = engine
        self.retention_s = retention_s

    def put_scoring(
        self, tenant: str, scoring: ScoringIn, *, retention_s: float | None = None
    ) -> StoredScoring:
        """Keep a stagewise scoring for reference by id; scorings older than the retention
        (`retention_s`, default the store's) are deleted on the way. Raises
        ScoringExistsError for a duplicate id."""
        now = utcnow()
        keep_s = self.retention_s if retention_s is None else retention_s
        payload = scoring.model_dump(mode="json", include={"rubrics", "rollouts"})
        try:
            with unit_of_work(self.engine, write=True) as session:
                session.execute(
                    delete(StagewiseScoringRow).where(
                        StagewiseScoringRow.created_at < now - timedelta(seconds=keep_s)
                    )
                )
                session.add(
                    StagewiseScoringRow(
                        tenant=tenant,
                        scoring_id=scoring.scoring_id,
                        question_id=scoring.question_id,
                        question=scoring.question,
                        step=scoring.step,
                        payload=payload,
                        created_at=now,
                    )
                )
                session.flush()
        except IntegrityError as exc:
            raise ScoringExistsError(scoring.scoring_id) from exc
        return StoredScoring(**scoring.model_dump(), created_at=now)

    def get_scoring(self, tenant: str, scoring_id: str) -> StoredScoring | None:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(StagewiseScoringRow, (tenant, scoring_id))
            return None if row is None else _scoring(row)

    def list_scorings(self, tenant: str, question_id: str, *, limit: int) -> list[StoredScoring]:
        """A question's latest stored scorings, newest first."""
        with unit_of_work(self.engine, write=False) as session:
            rows = session.scalars(
                select(StagewiseScoringRow)
                .where(
                    StagewiseScoringRow.tenant == tenant,
                    StagewiseScoringRow.question_id == question_id,
                )
                .order_by(
                    StagewiseScoringRow.created_at.desc(), StagewiseScoringRow.scoring_id.desc()
                )
                .limit(limit)
            ).all()
            return [_scoring(r) for r in rows]
