"""The bank in the database: items (one per tenant and question) and their versions.

Synchronous; each method is one transaction. An offer inserts the question's item (a no-op
when one exists) or else locks the item's row and applies the newer-wins rule
(`domain.bank.replaces`) under that lock, so concurrent writers to the same question
serialize on its row and the newest step wins whatever the arrival order (RubricEM App. D.5).
Every write of an item (an accepted reflection, a person's curation, a snapshot restore)
appends the item as it then is to `bank_item_versions`, under the item's next version.
"""

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Engine, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.reflections.domain.bank import (
    accepts_reflections,
    check_edit,
    curation_conflict,
    replaces,
)
from rubricate.reflections.store.models import (
    BankItemRow,
    BankItemVersionRow,
    VersionAction,
)
from rubricate.reflections.store.schemas import BankCurationIn, BankItemIn
from rubricate_client.schemas.bank import (
    BankItemHistory,
    BankItemList,
    BankItemVersion,
    BankItemView,
)
from rubricate_client.schemas.curation import BankStatus, CurationEvent

log = logging.getLogger("rubricate.reflections.store.repository")

OfferResult = Literal["accepted", "replaced", "kept", "retired"]
"""`kept`: the stored item is from a newer step; `retired`: a person retired the question's
item, which takes no reflections any more."""


class BankItemNotFoundError(LookupError):
    pass


class BankItemConflictError(ValueError):
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
    result: OfferResult
    item: BankItemView

    @property
    def written(self) -> bool:
        return self.result in ("accepted", "replaced")


@dataclass(frozen=True)
class Curated:
    event: CurationEvent
    item: BankItemView


def columns(row: object, names: Iterable[str]) -> dict[str, Any]:
    """The named attributes of a row, as a schema of the same field names reads them: naive
    datetimes (SQLite's) as UTC (`as_utc`)."""
    values = {name: getattr(row, name) for name in names}
    return {k: as_utc(v) if isinstance(v, datetime) else v for k, v in values.items()}


def to_view(row: BankItemRow) -> BankItemView:
    return BankItemView(**columns(row, BankItemView.model_fields))


_VERSIONED = (
    "tenant",
    "question_hash",
    "version",
    "status",
    "rubrics",
    "takeaways",
    "reflection",
    "score",
    "step",
)
"""What an item's history keeps of each version."""


def record_version(
    session: Session,
    row: BankItemRow,
    action: VersionAction,
    *,
    at: datetime,
    author: str | None = None,
    reason: str | None = None,
) -> None:
    """Append `row` as it is now to its history, under its current version."""
    session.add(
        BankItemVersionRow(
            **columns(row, _VERSIONED),
            action=action,
            author=author,
            reason=reason,
            at=at,
        )
    )


def last_versions(
    session: Session, tenant: str, hashes: Sequence[str] | None = None
) -> dict[str, int]:
    """The highest version in the history of each of `hashes` (every question of the tenant
    when None) that has one."""
    stmt = (
        select(BankItemVersionRow.question_hash, func.max(BankItemVersionRow.version))
        .where(BankItemVersionRow.tenant == tenant)
        .group_by(BankItemVersionRow.question_hash)
    )
    if hashes is not None:
        if not hashes:
            return {}
        stmt = stmt.where(BankItemVersionRow.question_hash.in_(list(hashes)))
    return {h: int(v) for h, v in session.execute(stmt)}


def _version_view(row: BankItemVersionRow) -> BankItemVersion:
    return BankItemVersion(**columns(row, BankItemVersion.model_fields))


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
        comes from a newer step or was retired. A replaced item is `pending` again."""
        now = utcnow()
        values: dict[str, object] = {
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
            "status": "pending",
        }
        with unit_of_work(self.engine, write=True) as session:
            result, row = self._offer(session, values, now=now)
            stored = to_view(row)
        log.info(
            "bank.offered tenant=%s question_hash=%s step=%s result=%s version=%d",
            tenant,
            question_hash[:12],
            item.step,
            result,
            stored.version,
        )
        return OfferOutcome(result=result, item=stored)

    def _offer(
        self, session: Session, values: dict[str, object], *, now: datetime
    ) -> tuple[OfferResult, BankItemRow]:
        tenant, qhash = str(values["tenant"]), str(values["question_hash"])
        for _ in range(3):
            # the first write of a question: its version follows any history it has (a
            # restore may have removed an earlier item of the same question)
            version = last_versions(session, tenant, [qhash]).get(qhash, 0) + 1
            if self._insert_new(session, {**values, "version": version}):
                row = self._locked(session, tenant, qhash)
                if row is None:  # pragma: no cover - inserted just above, in this transaction
                    raise LookupError(qhash)
                record_version(session, row, "accepted", at=now)
                session.flush()
                return "accepted", row
            row = self._locked(session, tenant, qhash)
            if row is None:  # removed (a restore) after our insert found it: insert again
                continue
            if not accepts_reflections(row.status):
                return "retired", row
            new_step = values["step"]
            if not replaces(
                new_step=new_step if isinstance(new_step, int) else None, stored_step=row.step
            ):
                return "kept", row
            for name in ("question", "rubrics", "takeaways", "reflection", "score", "step"):
                setattr(row, name, values[name])
            row.provenance = values["provenance"]  # type: ignore[assignment]
            if values["embedding"] is not None:
                row.embedding = values["embedding"]  # type: ignore[assignment]
                row.embedding_model = values["embedding_model"]  # type: ignore[assignment]
            row.updated_at = now
            row.status = "pending"
            row.reviewed_by = None
            row.reviewed_at = None
            row.version += 1
            record_version(session, row, "replaced", at=now)
            session.flush()
            return "replaced", row
        raise RuntimeError(f"bank item {qhash[:12]} changed under three offers in a row")

    def _insert_new(self, session: Session, values: dict[str, object]) -> bool:
        """Insert the item unless the question has one (then nothing): whether it did."""
        dialect = session.get_bind().dialect.name
        if dialect in ("postgresql", "sqlite"):
            insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
            stmt = (
                insert(BankItemRow)
                .values(values)
                .on_conflict_do_nothing(
                    index_elements=[BankItemRow.tenant, BankItemRow.question_hash]
                )
                .returning(BankItemRow.version)
            )
            return session.execute(stmt).first() is not None
        key = (values["tenant"], values["question_hash"])
        if session.get(BankItemRow, key, with_for_update=True) is not None:
            return False
        session.add(BankItemRow(**values))
        session.flush()
        return True

    @staticmethod
    def _locked(session: Session, tenant: str, question_hash: str) -> BankItemRow | None:
        stmt = (
            select(BankItemRow)
            .where(BankItemRow.tenant == tenant, BankItemRow.question_hash == question_hash)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return session.scalars(stmt).first()

    def curate(self, tenant: str, question_hash: str, request: BankCurationIn) -> Curated:
        """Approve, edit or retire the item. Raises BankItemNotFoundError (no such item),
        BankItemConflictError (it is retired), DomainError (an edit it cannot hold)."""
        if request.action == "edit":
            check_edit(request.rubrics, request.takeaways)
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = self._locked(session, tenant, question_hash)
            if row is None:
                raise BankItemNotFoundError(f"no bank item for {question_hash}")
            conflict = curation_conflict(row.status, request.action)
            if conflict is not None:
                raise BankItemConflictError(conflict)
            if request.action == "edit":
                if request.rubrics is not None:
                    row.rubrics = {k: list(v) for k, v in request.rubrics.items()}
                if request.takeaways is not None:
                    row.takeaways = list(request.takeaways)
            else:
                row.status = "approved" if request.action == "approve" else "retired"
                row.reviewed_by = request.author
                row.reviewed_at = now
            row.version += 1
            row.updated_at = now
            record_version(
                session, row, request.action, at=now, author=request.author, reason=request.reason
            )
            session.flush()
            item = to_view(row)
        log.info(
            "bank.curated tenant=%s question_hash=%s action=%s author=%s version=%d",
            tenant,
            question_hash[:12],
            request.action,
            request.author,
            item.version,
        )
        event = CurationEvent(
            target="bank_item",
            subject=question_hash,
            action=request.action,
            author=request.author,
            reason=request.reason,
            at=now,
            detail={"version": item.version},
        )
        return Curated(event=event, item=item)

    def history(self, tenant: str, question_hash: str) -> BankItemHistory | None:
        """Every version of the item, oldest first (None: the question never had one)."""
        with unit_of_work(self.engine, write=False) as session:
            rows = session.scalars(
                select(BankItemVersionRow)
                .where(
                    BankItemVersionRow.tenant == tenant,
                    BankItemVersionRow.question_hash == question_hash,
                )
                .order_by(BankItemVersionRow.version)
            ).all()
            if not rows:
                return None
            return BankItemHistory(
                question_hash=question_hash, versions=[_version_view(r) for r in rows]
            )

    def list_items(
        self,
        tenant: str,
        *,
        status: BankStatus | None = None,
        search: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> BankItemList:
        """One page of the tenant's items, the most recently updated first; `search` is a
        case-insensitive substring of the question."""
        where = [BankItemRow.tenant == tenant]
        if status is not None:
            where.append(BankItemRow.status == status)
        if search:
            where.append(BankItemRow.question.icontains(search, autoescape=True))
        with unit_of_work(self.engine, write=False) as session:
            total = session.scalar(select(func.count()).select_from(BankItemRow).where(*where))
            rows = session.scalars(
                select(BankItemRow)
                .where(*where)
                .order_by(BankItemRow.updated_at.desc(), BankItemRow.question_hash)
                .offset(offset)
                .limit(limit)
            ).all()
            return BankItemList(
                items=[to_view(r) for r in rows], total=int(total or 0), offset=offset, limit=limit
            )

    def get(self, tenant: str, question_hash: str) -> BankItemView | None:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(BankItemRow, (tenant, question_hash))
            return None if row is None else to_view(row)

    def get_many(self, tenant: str, hashes: Sequence[str]) -> dict[str, BankItemView]:
        if not hashes:
            return {}
        with unit_of_work(self.engine, write=False) as session:
            stmt = select(BankItemRow).where(
                BankItemRow.tenant == tenant, BankItemRow.question_hash.in_(list(hashes))
            )
            return {row.question_hash: to_view(row) for row in session.scalars(stmt)}

    def embeddings(self, tenant: str | None = None) -> list[StoredVector]:
        """The question and stored embedding of every item that retrieval may ever return
        (all but retired ones), of `tenant` or of every tenant when it is None."""
        stmt = (
            select(
                BankItemRow.tenant,
                BankItemRow.question_hash,
                BankItemRow.question,
                BankItemRow.embedding,
                BankItemRow.embedding_model,
            )
            .where(BankItemRow.status != "retired")
            .order_by(BankItemRow.tenant, BankItemRow.question_hash)
        )
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
