"""The rubric history of the judge rubric buffers (blocking; call from a thread). The buffer
keeps pruned rubrics with when and at which step they were pruned (`rubrics.pruned_at`), so
every rubric that was ever in a buffer is there to read, with who pinned, retired or edited
it (`rubrics.pinned_at`, `retired_by`, `replaced_by`, `created_by`)."""

from collections.abc import Iterator

from sqlalchemy import Engine, select

from rubricate.db.base import as_utc
from rubricate.db.engine import unit_of_work
from rubricate.db.rows import from_row
from rubricate.stagewise.store.models import QuestionRow, RubricRow
from rubricate_client.schemas.audit import RubricHistoryEntry

EXPORT_BATCH = 1000


def _entry(row: RubricRow) -> RubricHistoryEntry:
    return from_row(
        RubricHistoryEntry,
        row,
        added_step=row.created_step,
        added_at=as_utc(row.created_at),
        pinned=row.pinned_at is not None,
    )


def question_history(
    engine: Engine, tenant: str, question_id: str
) -> list[RubricHistoryEntry] | None:
    """Every rubric of one question's buffer, in the order they entered it; None when the
    tenant has no buffer for the question."""
    with unit_of_work(engine, write=False) as session:
        if session.get(QuestionRow, (tenant, question_id)) is None:
            return None
        rows = session.scalars(
            select(RubricRow)
            .where(RubricRow.tenant == tenant, RubricRow.question_id == question_id)
            .order_by(RubricRow.seq)
        )
        return [_entry(r) for r in rows]


def tenant_history(engine: Engine, tenant: str) -> Iterator[list[RubricHistoryEntry]]:
    """Every rubric of every buffer of the tenant, question by question, in batches."""
    after: tuple[str, int] | None = None
    while True:
        query = select(RubricRow).where(RubricRow.tenant == tenant)
        if after is not None:
            query = query.where(
                (RubricRow.question_id > after[0])
                | ((RubricRow.question_id == after[0]) & (RubricRow.seq > after[1]))
            )
        query = query.order_by(RubricRow.question_id, RubricRow.seq).limit(EXPORT_BATCH)
        with unit_of_work(engine, write=False) as session:
            rows = list(session.scalars(query))
            entries = [_entry(r) for r in rows]
        if entries:
            yield entries
        if len(rows) < EXPORT_BATCH:
            return
        after = (rows[-1].question_id, rows[-1].seq)
