"""SQL for the rubric buffer. Flushes, never commits: the unit of work commits once."""

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from rubricate.stagewise.store.models import QuestionRow, RubricRow


class BufferRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def ensure_question(
        self, tenant: str, question_id: str, *, question: str, now: datetime
    ) -> None:
        """Create the question row unless it exists (never blocks on, or fails with, a race)."""
        values = {
            "tenant": tenant,
            "question_id": question_id,
            "question": question,
            "created_at": now,
            "updated_at": now,
            "version": 0,
        }
        dialect = self.session.get_bind().dialect.name
        if dialect == "postgresql":
            pg = postgresql.insert(QuestionRow).values(values).on_conflict_do_nothing()
            self.session.execute(pg)
        elif dialect == "sqlite":
            lite = sqlite.insert(QuestionRow).values(values).on_conflict_do_nothing()
            self.session.execute(lite)
        elif self.session.get(QuestionRow, (tenant, question_id)) is None:
            self.session.add(QuestionRow(**values))
            self.session.flush()

    def lock_question(self, tenant: str, question_id: str) -> QuestionRow | None:
        """The question row, locked until commit (PostgreSQL; SQLite holds the database lock)."""
        stmt = (
            select(QuestionRow)
            .where(QuestionRow.tenant == tenant, QuestionRow.question_id == question_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).one_or_none()

    def question(self, tenant: str, question_id: str) -> QuestionRow | None:
        stmt = select(QuestionRow).where(
            QuestionRow.tenant == tenant, QuestionRow.question_id == question_id
        )
        return self.session.scalars(stmt).one_or_none()

    def live_rubrics(self, tenant: str, question_id: str) -> list[RubricRow]:
        """Rubrics in the buffer (not pruned), in insertion order."""
        stmt = (
            select(RubricRow)
            .where(
                RubricRow.tenant == tenant,
                RubricRow.question_id == question_id,
                RubricRow.pruned_at.is_(None),
            )
            .order_by(RubricRow.seq)
        )
        return list(self.session.scalars(stmt))

    def rubrics_by_id(
        self, tenant: str, question_id: str, ids: Iterable[str]
    ) -> dict[str, RubricRow]:
        """Stored rubrics (live or pruned) among `ids`."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        stmt = select(RubricRow).where(
            RubricRow.tenant == tenant,
            RubricRow.question_id == question_id,
            RubricRow.id.in_(wanted),
        )
        return {row.id: row for row in self.session.scalars(stmt)}

    def next_seq(self, tenant: str, question_id: str) -> int:
        stmt = select(func.coalesce(func.max(RubricRow.seq), 0)).where(
            RubricRow.tenant == tenant, RubricRow.question_id == question_id
        )
        return int(self.session.scalar(stmt) or 0) + 1

    def add_rubrics(self, rows: Sequence[RubricRow]) -> None:
        self.session.add_all(rows)

    def flush(self) -> None:
        self.session.flush()

    def count_questions(self) -> int:
        return int(self.session.scalar(select(func.count()).select_from(QuestionRow)) or 0)

    def count_rubrics(self, *, pruned: bool) -> int:
        cond = RubricRow.pruned_at.is_not(None) if pruned else RubricRow.pruned_at.is_(None)
        stmt = select(func.count()).select_from(RubricRow).where(cond)
        return int(self.session.scalar(stmt) or 0)
