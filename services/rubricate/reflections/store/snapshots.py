"""Snapshots of a tenant's bank and judge rubric buffers by training step (RubricEM App. D.5:
restore the bank of the same global step as the model weights on resume).

A snapshot's header and entries are written in one transaction, so no reader ever sees a
partial snapshot; a restore replaces the tenant's bank and buffers in one transaction too.
A bank entry holds the item's review state (`status`, `reviewed_by`, `reviewed_at`; an older
snapshot without it restores its items as `pending`). Each restored item gets a version above
any in its history and a `restored` history row. Retirement is final: an item that a person
retired stays retired through a restore of a snapshot taken before.
Export/import is JSONL: a header line, then one line per bank item or question buffer.
"""

import base64
import binascii
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from rubricate.common.errors import field_path
from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.reflections.store.models import (
    BankItemRow,
    BankItemVersionRow,
    BankSnapshotEntryRow,
    BankSnapshotRow,
    SnapshotKind,
)
from rubricate.reflections.store.repository import columns, last_versions, record_version
from rubricate.reflections.store.schemas import SnapshotHeader, SnapshotRecord
from rubricate.stagewise.store.models import QuestionRow, RubricRow
from rubricate_client.errors import DomainError
from rubricate_client.schemas.bank import SnapshotInfo
from rubricate_client.schemas.curation import BankStatus
from rubricate_client.schemas.rubrics import Origin, Polarity, Stage

log = logging.getLogger("rubricate.reflections.store.repository")

EXPORT_FORMAT: Final = "rubricate.bank-snapshot.v1"


class SnapshotExistsError(ValueError):
    pass


class SnapshotNotFoundError(LookupError):
    pass


class BankPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str
    rubrics: dict[str, list[str]]
    takeaways: list[str]
    reflection: str
    score: float
    step: int | None
    provenance: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    version: int
    embedding: str | None = None
    """The question's stored embedding, base64 float32 (so a restore need not re-embed)."""
    embedding_model: str | None = None
    status: BankStatus = "pending"
    """Absent from snapshots taken before bank curation: those items restore as pending."""
    reviewed_by: str | None = None
    reviewed_at: datetime | None = None


class RubricPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    stage: Stage
    origin: Origin
    title: str
    description: str
    weight: int
    polarity: Polarity
    created_step: int | None
    variance: float | None
    seq: int
    created_at: datetime
    pruned_at: datetime | None
    pruned_step: int | None
    # human curation (absent from older snapshots): a pin or a retirement survives a restore
    pinned_at: datetime | None = None
    pinned_by: str | None = None
    retired_at: datetime | None = None
    retired_by: str | None = None
    replaced_by: str | None = None
    created_by: str | None = None


class BufferPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str
    version: int
    created_at: datetime
    updated_at: datetime
    rubrics: list[RubricPayload]
    """Every rubric row, pruned ones included, in insertion order."""


@dataclass(frozen=True)
class Restored:
    info: SnapshotInfo
    question_ids: set[str]
    """Buffers before or after the restore (their cached reads are stale)."""
    bank: list[tuple[str, str]]
    """(question hash, question) of the restored bank items."""


def _decode_blob(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return None  # re-embedded on the next index load


def _info(row: BankSnapshotRow) -> SnapshotInfo:
    return SnapshotInfo(
        step=row.step,
        created_at=as_utc(row.created_at),
        bank_items=row.bank_items,
        questions=row.questions,
        rubrics=row.rubrics,
    )


def _bank_payload(row: BankItemRow) -> dict[str, Any]:
    return BankPayload(
        **columns(row, BankPayload.model_fields.keys() - {"embedding"}),
        embedding=None if row.embedding is None else base64.b64encode(row.embedding).decode(),
    ).model_dump(mode="json")


def _buffer_payload(question: QuestionRow, rubrics: list[RubricRow]) -> dict[str, Any]:
    return BufferPayload(
        **columns(question, ("question", "version", "created_at", "updated_at")),
        rubrics=[RubricPayload(**columns(r, RubricPayload.model_fields)) for r in rubrics],
    ).model_dump(mode="json")


def _retired(
    session: Session, tenant: str, latest: dict[str, int]
) -> dict[str, tuple[str | None, datetime | None]]:
    """The tenant's questions whose item a person retired (by, at): the last version in
    their history (`latest`) is retired. Retirement is final, so no later version undoes it."""
    rows = session.scalars(
        select(BankItemVersionRow).where(
            BankItemVersionRow.tenant == tenant, BankItemVersionRow.status == "retired"
        )
    ).all()
    return {
        r.question_hash: (r.author, as_utc(r.at))
        for r in rows
        if latest.get(r.question_hash) == r.version
    }


def _entries(
    header: BankSnapshotRow,
    bank_rows: Sequence[BankItemRow],
    questions: Sequence[QuestionRow],
    rubric_rows: Sequence[RubricRow],
) -> list[BankSnapshotEntryRow]:
    """A snapshot's entries: one per bank item, then one per question's whole buffer (its
    rubrics in insertion order)."""
    by_question: dict[str, list[RubricRow]] = {q.question_id: [] for q in questions}
    for r in rubric_rows:
        by_question.setdefault(r.question_id, []).append(r)

    def entry(kind: SnapshotKind, key: str, payload: dict[str, Any]) -> BankSnapshotEntryRow:
        return BankSnapshotEntryRow(
            tenant=header.tenant, step=header.step, kind=kind, key=key, payload=payload
        )

    return [entry("bank", row.question_hash, _bank_payload(row)) for row in bank_rows] + [
        entry("buffer", q.question_id, _buffer_payload(q, by_question[q.question_id]))
        for q in questions
    ]


def _consistent_reads(session: Session) -> None:
    """One snapshot of every table for the whole transaction (PostgreSQL; SQLite writers
    already hold the database lock)."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def _clear_tenant(session: Session, tenant: str) -> dict[str, int]:
    """Lock, then delete, the tenant's rubric buffers and bank items (their histories stay);
    the buffers' versions before (a restored buffer's version goes above its old one)."""
    old_versions = {
        q.question_id: q.version
        for q in session.scalars(
            select(QuestionRow).where(QuestionRow.tenant == tenant).with_for_update()
        )
    }
    session.scalars(
        select(BankItemRow.question_hash).where(BankItemRow.tenant == tenant).with_for_update()
    ).all()
    session.execute(delete(RubricRow).where(RubricRow.tenant == tenant))
    session.execute(delete(QuestionRow).where(QuestionRow.tenant == tenant))
    session.execute(delete(BankItemRow).where(BankItemRow.tenant == tenant))
    session.flush()
    return old_versions


def _restored_items(
    session: Session, tenant: str, entries: Iterable[BankSnapshotEntryRow]
) -> list[BankItemRow]:
    """The snapshot's bank items, each under a version above any in its history; an item a
    person retired since stays retired."""
    versions = last_versions(session, tenant)
    retired = _retired(session, tenant, versions)
    items: list[BankItemRow] = []
    for entry in entries:
        b = BankPayload.model_validate(entry.payload)
        row = BankItemRow(
            tenant=tenant,
            question_hash=entry.key,
            **b.model_dump(
                exclude={"created_at", "updated_at", "embedding", "reviewed_at", "version"}
            ),
            embedding=_decode_blob(b.embedding),
            created_at=b.created_at,
            updated_at=b.updated_at,
            reviewed_at=b.reviewed_at,
            version=max(b.version, versions.get(entry.key, 0)) + 1,
        )
        if entry.key in retired:
            row.status = "retired"
            row.reviewed_by, row.reviewed_at = retired[entry.key]
        items.append(row)
    return items


def _restored_buffers(
    tenant: str,
    entries: Iterable[BankSnapshotEntryRow],
    old_versions: dict[str, int],
    *,
    now: datetime,
) -> tuple[list[QuestionRow], list[RubricRow]]:
    """The snapshot's rubric buffers: each question under a version above the one it had."""
    questions: list[QuestionRow] = []
    rubrics: list[RubricRow] = []
    for entry in entries:
        buf = BufferPayload.model_validate(entry.payload)
        questions.append(
            QuestionRow(
                tenant=tenant,
                question_id=entry.key,
                question=buf.question,
                created_at=buf.created_at,
                updated_at=now,
                version=max(buf.version, old_versions.get(entry.key, 0)) + 1,
            )
        )
        rubrics.extend(
            RubricRow(tenant=tenant, question_id=entry.key, **r.model_dump()) for r in buf.rubrics
        )
    return questions, rubrics


@contextmanager
def _line_errors(number: int) -> Iterator[None]:
    """A line of an export that is not JSON or not a valid record: a DomainError naming it."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise DomainError(f"line {number}: not JSON ({exc.msg})", field=f"line {number}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = field_path(first["loc"])
        raise DomainError(
            f"line {number}: {where or 'record'}: {first['msg']}",
            field=f"line {number}" + (f".{where}" if where else ""),
        ) from exc


def _read_export(lines: Iterable[str]) -> tuple[SnapshotHeader, list[SnapshotRecord]]:
    """An export's header and records, every record validated and counted against the
    header. Raises DomainError naming the line at fault."""
    header: SnapshotHeader | None = None
    records: list[SnapshotRecord] = []
    seen: set[tuple[str, str]] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        with _line_errors(number):
            raw = json.loads(line)
            if header is None:
                header = SnapshotHeader.model_validate(raw)
                continue
            record = SnapshotRecord.model_validate(raw)
            payload = BankPayload if record.kind == "bank" else BufferPayload
            payload.model_validate(record.payload)
        if (record.kind, record.key) in seen:
            raise DomainError(
                f"line {number}: duplicate {record.kind} entry {record.key!r}",
                field=f"line {number}",
            )
        seen.add((record.kind, record.key))
        records.append(record)
    if header is None:
        raise DomainError("empty snapshot file: expected a header line", field="line 1")
    _check_counts(header, records)
    return header, records


def _check_counts(header: SnapshotHeader, records: list[SnapshotRecord]) -> None:
    """The file holds as many bank items, buffers and rubrics as its header says."""
    bank = sum(1 for r in records if r.kind == "bank")
    buffers = [r for r in records if r.kind == "buffer"]
    rubrics = sum(len(r.payload.get("rubrics", [])) for r in buffers)
    if (bank, len(buffers), rubrics) != (header.bank_items, header.questions, header.rubrics):
        raise DomainError(
            f"the file holds {bank} bank items, {len(buffers)} buffers and {rubrics} rubrics "
            f"but its header says {header.bank_items}, {header.questions} and "
            f"{header.rubrics} (truncated or edited file)",
            field="line 1",
        )


class SnapshotStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self, tenant: str, step: int, *, replace: bool = False) -> SnapshotInfo:
        """Snapshot the tenant's bank and buffers as they are now, labelled `step`."""
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            _consistent_reads(session)
            self._clear(session, tenant, step, replace=replace)
            bank_rows = session.scalars(
                select(BankItemRow).where(BankItemRow.tenant == tenant)
            ).all()
            questions = session.scalars(
                select(QuestionRow).where(QuestionRow.tenant == tenant)
            ).all()
            rubric_rows = session.scalars(
                select(RubricRow).where(RubricRow.tenant == tenant).order_by(RubricRow.seq)
            ).all()
            header = BankSnapshotRow(
                tenant=tenant,
                step=step,
                created_at=now,
                bank_items=len(bank_rows),
                questions=len(questions),
                rubrics=len(rubric_rows),
            )
            session.add(header)
            session.flush()
            session.add_all(_entries(header, bank_rows, questions, rubric_rows))
            session.flush()
            info = _info(header)
        log.info(
            "bank.snapshot tenant=%s step=%d bank_items=%d questions=%d rubrics=%d",
            tenant,
            step,
            info.bank_items,
            info.questions,
            info.rubrics,
        )
        return info

    def _clear(self, session: Session, tenant: str, step: int, *, replace: bool) -> None:
        existing = session.get(BankSnapshotRow, (tenant, step), with_for_update=True)
        if existing is None:
            return
        if not replace:
            raise SnapshotExistsError(
                f"a snapshot of step {step} exists (replace it with replace=true)"
            )
        session.execute(
            delete(BankSnapshotEntryRow).where(
                BankSnapshotEntryRow.tenant == tenant, BankSnapshotEntryRow.step == step
            )
        )
        session.delete(existing)
        session.flush()

    def list(self, tenant: str) -> list[SnapshotInfo]:
        with unit_of_work(self.engine, write=False) as session:
            rows = session.scalars(
                select(BankSnapshotRow)
                .where(BankSnapshotRow.tenant == tenant)
                .order_by(BankSnapshotRow.step)
            )
            return [_info(r) for r in rows]

    def restore(self, tenant: str, step: int) -> Restored:
        """Replace the tenant's bank items and rubric buffers with the snapshot's.

        Restored buffers get a version above any they had, so a buffer read cached before
        the restore can never be taken for the restored one.
        """
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            header = session.get(BankSnapshotRow, (tenant, step))
            if header is None:
                raise SnapshotNotFoundError(f"no snapshot of step {step}")
            old_versions = _clear_tenant(session, tenant)
            entries = session.scalars(
                select(BankSnapshotEntryRow).where(
                    BankSnapshotEntryRow.tenant == tenant, BankSnapshotEntryRow.step == step
                )
            ).all()
            items = _restored_items(session, tenant, [e for e in entries if e.kind == "bank"])
            questions, rubrics = _restored_buffers(
                tenant, [e for e in entries if e.kind != "bank"], old_versions, now=now
            )
            session.add_all(items)
            for row in items:
                record_version(session, row, "restored", at=now)
            session.add_all(questions)
            session.flush()
            session.add_all(rubrics)
            session.flush()
            info = _info(header)
        log.info(
            "bank.restored tenant=%s step=%d bank_items=%d questions=%d rubrics=%d",
            tenant,
            step,
            info.bank_items,
            info.questions,
            info.rubrics,
        )
        return Restored(
            info=info,
            question_ids={q.question_id for q in questions} | set(old_versions),
            bank=[(row.question_hash, row.question) for row in items],
        )

    def export_lines(self, tenant: str, step: int) -> Iterator[str]:
        """The snapshot as JSONL lines (header first). Raises SnapshotNotFoundError before
        the first line when there is no such snapshot."""
        with unit_of_work(self.engine, write=False) as session:
            header = session.get(BankSnapshotRow, (tenant, step))
            if header is None:
                raise SnapshotNotFoundError(f"no snapshot of step {step}")
            info = _info(header)
        return self._lines(tenant, info)

    def _lines(self, tenant: str, info: SnapshotInfo) -> Iterator[str]:
        head = SnapshotHeader(format=EXPORT_FORMAT, **info.model_dump())
        yield head.model_dump_json() + "\n"
        with unit_of_work(self.engine, write=False) as session:
            stmt = (
                select(BankSnapshotEntryRow)
                .where(
                    BankSnapshotEntryRow.tenant == tenant, BankSnapshotEntryRow.step == info.step
                )
                .order_by(BankSnapshotEntryRow.kind, BankSnapshotEntryRow.key)
                .execution_options(yield_per=500)
            )
            for entry in session.scalars(stmt):
                record = {"kind": entry.kind, "key": entry.key, "payload": entry.payload}
                yield json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"

    def import_lines(
        self, tenant: str, lines: Iterable[str], *, replace: bool = False
    ) -> SnapshotInfo:
        """Store an exported snapshot (validated in full first) under its header's step."""
        header, records = _read_export(lines)
        with unit_of_work(self.engine, write=True) as session:
            self._clear(session, tenant, header.step, replace=replace)
            row = BankSnapshotRow(
                tenant=tenant,
                step=header.step,
                created_at=header.created_at,
                bank_items=header.bank_items,
                questions=header.questions,
                rubrics=header.rubrics,
            )
            session.add(row)
            session.flush()
            session.add_all(
                BankSnapshotEntryRow(
                    tenant=tenant, step=header.step, kind=r.kind, key=r.key, payload=r.payload
                )
                for r in records
            )
            session.flush()
            info = _info(row)
        log.info("bank.imported tenant=%s step=%d entries=%d", tenant, header.step, len(records))
        return info
