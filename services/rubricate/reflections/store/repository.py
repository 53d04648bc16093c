"""The bank in the database: items (one per tenant and question) and stored stagewise scorings.

Synchronous; each method is one transaction. A write to a question's item is a single
`INSERT … ON CONFLICT DO UPDATE … WHERE <newer>` statement, so concurrent writers to the
same question serialize on its row and the newest step wins whatever the arrival order
(RubricEM App. D.5; the rule is `core.bank.replaces`).
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.reflections.domain.bank import replaces
from rubricate.reflections.store.models import BankItemRow, StagewiseScoringRow
from rubricate.reflections.store.schemas import BankItemIn
from rubricate.stagewise.store.schemas import Scoring, ScoringIn
from rubricate_client.schemas.bank import BankItem

log = logging.getLogger("rubricate.reflections.store.repository")


class ScoringExistsError(ValueError):
    pass


@dataclass(frozen=True)
class StoredVector:
    tenant: str
    question_hash: str
    question: str
    embedding: bytes | None
    embedding_model: str | None


@dataclass(frozen=True)
class OfferOutcome:
    written: bool
    item: BankItem


def to_item(row: BankItemRow) -> BankItem:
    return BankItem(
        question_hash=row.question_hash,
        question=row.question,
        rubrics=row.rubrics,
        takeaways=row.takeaways,
        reflection=row.reflection,
        score=row.score,
        step=row.step,
        provenance=row.provenance,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        version=row.version,
    )


class BankStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # --- items ----------------------------------------------------------------------------

    def offer(
        self,
        tenant: str,
        question_hash: str,
        item: BankItemIn,
        *,
        embedding: bytes | None = None,
        embedding_model: str | None = None,
    ) -> OfferOutcome:
        """Write `item` (with its question's embedding, if computed) unless the stored one
        comes from a newer step."""
        now = utcnow()
        values = {
            "tenant": tenant,
            "question_hash": question_hash,
            "question": item.question,
            "rubrics": item.rubrics,
            "takeaways": item.takeaways,
            "reflection": item.reflection,
            "score": item.score,
            "step": item.step,
            "provenance": item.provenance,
            "embedding": embedding,
            "embedding_model": embedding_model,
            "created_at": now,
            "updated_at": now,
            "version": 1,
        }
        with unit_of_work(self.engine, write=True) as session:
            written = self._upsert(session, values)
            row = session.get(BankItemRow, (tenant, question_hash), populate_existing=True)
            if row is None:  # pragma: no cover - written or kept just above, in this transaction
                raise LookupError(question_hash)
            stored = to_item(row)
        log.info(
            "bank.offered tenant=%s question_hash=%s step=%s written=%s version=%d",
            tenant,
            question_hash[:12],
            item.step,
            written,
            stored.version,
        )
        return OfferOutcome(written=written, item=stored)

    def _upsert(self, session: Session, values: dict[str, object]) -> bool:
        dialect = session.get_bind().dialect.name
        if dialect not in ("postgresql", "sqlite"):
            return self._upsert_portable(session, values)
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        stmt = insert(BankItemRow).values(values)
        excluded = stmt.excluded
        # core.bank.replaces, as SQL: the stored row is replaced unless it has a newer step
        newer = or_(
            excluded.step.is_(None),
            BankItemRow.step.is_(None),
            excluded.step >= BankItemRow.step,
        )
        upsert = stmt.on_conflict_do_update(
            index_elements=[BankItemRow.tenant, BankItemRow.question_hash],
            set_={
                "question": excluded.question,
                "rubrics": excluded.rubrics,
                "takeaways": excluded.takeaways,
                "reflection": excluded.reflection,
                "score": excluded.score,
                "step": excluded.step,
                "provenance": excluded.provenance,
                "embedding": func.coalesce(excluded.embedding, BankItemRow.embedding),
                "embedding_model": func.coalesce(
                    excluded.embedding_model, BankItemRow.embedding_model
                ),
                "updated_at": excluded.updated_at,
                "version": BankItemRow.version + 1,
            },
            where=newer,
        ).returning(BankItemRow.version)
        return session.execute(upsert).first() is not None

    def _upsert_portable(self, session: Session, values: dict[str, object]) -> bool:
        key = (values["tenant"], values["question_hash"])
        row = session.get(BankItemRow, key, with_for_update=True)
        if row is None:
            session.add(BankItemRow(**values))
            session.flush()
            return True
        new_step = values["step"]
        if not replaces(
            new_step=new_step if isinstance(new_step, int) else None, stored_step=row.step
        ):
            return False
        for name in ("question", "rubrics", "takeaways", "reflection", "score", "step"):
            setattr(row, name, values[name])
        row.provenance = values["provenance"]  # type: ignore[assignment]
        if values["embedding"] is not None:
            row.embedding = values["embedding"]  # type: ignore[assignment]
            row.embedding_model = values["embedding_model"]  # type: ignore[assignment]
        row.updated_at = values["updated_at"]  # type: ignore[assignment]
        row.version += 1
        session.flush()
        return True

    def get(self, tenant: str, question_hash: str) -> BankItem | None:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(BankItemRow, (tenant, question_hash))
            return None if row is None else to_item(row)

    def get_many(self, tenant: str, hashes: Sequence[str]) -> dict[str, BankItem]:
        if not hashes:
            return {}
        with unit_of_work(self.engine, write=False) as session:
            stmt = select(BankItemRow).where(
                BankItemRow.tenant == tenant, BankItemRow.question_hash.in_(list(hashes))
            )
            return {row.question_hash: to_item(row) for row in session.scalars(stmt)}

    def questions(self, tenant: str) -> list[tuple[str, str]]:
        """(question hash, question) of every item of `tenant` (to rebuild the index)."""
        with unit_of_work(self.engine, write=False) as session:
            stmt = (
                select(BankItemRow.question_hash, BankItemRow.question)
                .where(BankItemRow.tenant == tenant)
                .order_by(BankItemRow.question_hash)
            )
            return [(h, q) for h, q in session.execute(stmt)]

    def embeddings(self, tenant: str | None = None) -> list[StoredVector]:
        """Every item's question and stored embedding (all tenants when `tenant` is None)."""
        stmt = select(
            BankItemRow.tenant,
            BankItemRow.question_hash,
            BankItemRow.question,
            BankItemRow.embedding,
            BankItemRow.embedding_model,
        ).order_by(BankItemRow.tenant, BankItemRow.question_hash)
        if tenant is not None:
            stmt = stmt.where(BankItemRow.tenant == tenant)
        with unit_of_work(self.engine, write=False) as session:
            return [
                StoredVector(*row)
                for row in session.execute(stmt.execution_options(yield_per=2000))
            ]

    def set_embeddings(
        self, tenant: str, vectors: Sequence[tuple[str, bytes]], *, model: str
    ) -> None:
        with unit_of_work(self.engine, write=True) as session:
            for qhash, blob in vectors:
                session.execute(
                    update(BankItemRow)
                    .where(BankItemRow.tenant == tenant, BankItemRow.question_hash == qhash)
                    .values(embedding=blob, embedding_model=model)
                )

    def count(self, tenant: str) -> int:
        with unit_of_work(self.engine, write=False) as session:
            stmt = select(func.count()).select_from(BankItemRow).where(BankItemRow.tenant == tenant)
            return int(session.scalar(stmt) or 0)

    # --- stored stagewise scorings --------------------------------------------------------

    def put_scoring(self, tenant: str, scoring: ScoringIn, *, retention_s: float) -> Scoring:
        """Keep a stagewise scoring for reference by id; scorings older than the retention
        are deleted on the way. Raises ScoringExistsError for a duplicate id."""
        now = utcnow()
        payload = scoring.model_dump(mode="json", include={"rubrics", "rollouts"})
        try:
            with unit_of_work(self.engine, write=True) as session:
                session.execute(
                    delete(StagewiseScoringRow).where(
                        StagewiseScoringRow.created_at < now - timedelta(seconds=retention_s)
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
        return Scoring(**scoring.model_dump(), created_at=now)

    def get_scoring(self, tenant: str, scoring_id: str) -> Scoring | None:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(StagewiseScoringRow, (tenant, scoring_id))
            if row is None:
                return None
            return Scoring.model_validate(
                {
                    "scoring_id": row.scoring_id,
                    "question_id": row.question_id,
                    "question": row.question,
                    "step": row.step,
                    "created_at": as_utc(row.created_at),
                    **row.payload,
                }
            )
