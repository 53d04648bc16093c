"""SQL for the rubric buffer. Flushes, never commits: the unit of work commits once."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import ColumnElement, case, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from rubricate.stagewise.store.models import QuestionRow, RubricCurationRow, RubricRow
from rubricate_client.constants import STAGES
from rubricate_client.schemas.buffers import QuestionSort
from rubricate_client.schemas.rubrics import Stage


@dataclass
class RubricCounts:
    """One question's rubric counts, as the question list shows them."""

    per_stage: dict[Stage, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    """Live rubrics (not pruned or retired) per stage."""
    pinned: int = 0
    """Live pinned rubrics."""
    retired: int = 0


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

    def rubric(self, tenant: str, question_id: str, rubric_id: str) -> RubricRow | None:
        """One stored rubric (live, pruned or retired)."""
        return self.session.get(RubricRow, (tenant, question_id, rubric_id))

    def next_curation_seq(self, tenant: str, question_id: str) -> int:
        stmt = select(func.coalesce(func.max(RubricCurationRow.seq), 0)).where(
            RubricCurationRow.tenant == tenant, RubricCurationRow.question_id == question_id
        )
        return int(self.session.scalar(stmt) or 0) + 1

    def add_curation(self, row: RubricCurationRow) -> None:
        self.session.add(row)

    def curations(self, tenant: str, question_id: str) -> list[RubricCurationRow]:
        """A question's curation events, newest first."""
        stmt = (
            select(RubricCurationRow)
            .where(RubricCurationRow.tenant == tenant, RubricCurationRow.question_id == question_id)
            .order_by(RubricCurationRow.seq.desc())
        )
        return list(self.session.scalars(stmt))

    def list_questions(
        self, tenant: str, *, search: str | None, sort: QuestionSort, offset: int, limit: int
    ) -> tuple[list[QuestionRow], int]:
        """One page of the tenant's questions matching `search` (a case-insensitive
        substring of the id or the text), and how many match in all."""
        where: list[ColumnElement[bool]] = [QuestionRow.tenant == tenant]
        if search:
            where.append(
                or_(
                    QuestionRow.question_id.icontains(search, autoescape=True),
                    QuestionRow.question.icontains(search, autoescape=True),
                )
            )
        total = int(
            self.session.scalar(select(func.count()).select_from(QuestionRow).where(*where)) or 0
        )
        stmt = select(QuestionRow).where(*where)
        if sort == "recent":
            stmt = stmt.order_by(QuestionRow.updated_at.desc(), QuestionRow.question_id)
        elif sort == "question_id":
            stmt = stmt.order_by(QuestionRow.question_id)
        else:
            live = (
                select(RubricRow.question_id, func.count().label("n"))
                .where(RubricRow.tenant == tenant, RubricRow.pruned_at.is_(None))
                .group_by(RubricRow.question_id)
                .subquery()
            )
            stmt = stmt.outerjoin(live, live.c.question_id == QuestionRow.question_id).order_by(
                func.coalesce(live.c.n, 0).desc(), QuestionRow.question_id
            )
        rows = list(self.session.scalars(stmt.offset(offset).limit(limit)))
        return rows, total

    def rubric_counts(self, tenant: str, question_ids: Sequence[str]) -> dict[str, RubricCounts]:
        """Live rubrics per stage, live pinned and retired rubrics of each question in
        `question_ids`, in one query."""
        counts = {qid: RubricCounts() for qid in question_ids}
        if not counts:
            return counts
        live = RubricRow.pruned_at.is_(None)
        stmt = (
            select(
                RubricRow.question_id,
                RubricRow.stage,
                func.sum(case((live, 1), else_=0)),
                func.sum(case((live & RubricRow.pinned_at.is_not(None), 1), else_=0)),
                func.sum(case((RubricRow.retired_at.is_not(None), 1), else_=0)),
            )
            .where(RubricRow.tenant == tenant, RubricRow.question_id.in_(list(counts)))
            .group_by(RubricRow.question_id, RubricRow.stage)
        )
        for qid, stage, n_live, n_pinned, n_retired in self.session.execute(stmt):
            entry = counts[qid]
            entry.per_stage[stage] = int(n_live or 0)
            entry.pinned += int(n_pinned or 0)
            entry.retired += int(n_retired or 0)
        return counts
