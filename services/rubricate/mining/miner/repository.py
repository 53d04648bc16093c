"""Jobs, corpora and mined nuggets in the store's database (blocking; call from a thread).

A job is owned by the worker that claimed it: every step is saved only while the row still
names that worker, and a job whose heartbeat is older than the lease may be claimed again
(its stored tree is where the new owner starts)."""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, defer

from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.db.rows import from_row
from rubricate.mining.miner.models import CorpusRow, JobRow, MinedNuggetRow

JobKind = Literal["mine", "ingest"]
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
StepOutcome = Literal["ok", "cancel", "lost"]


@dataclass(frozen=True)
class JobSnapshot:
    id: str
    tenant: str
    kind: JobKind
    state: JobState
    corpus: str
    question: str | None
    params: dict[str, Any]
    progress: dict[str, Any]
    tree: dict[str, Any] | None
    result: dict[str, Any] | None
    error: str | None
    cancel_requested: bool
    attempts: int
    steps: int
    worker: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None

    @classmethod
    def of(cls, row: JobRow, *, with_tree: bool = True) -> "JobSnapshot":
        """`with_tree=False`: the search tree is left out (None), for lists that never
        show it; the row must then have been loaded without it."""
        return from_row(
            cls,
            row,
            params=dict(row.params or {}),
            progress=dict(row.progress or {}),
            tree=row.tree if with_tree else None,
        )


@dataclass(frozen=True)
class CorpusSnapshot:
    tenant: str
    name: str
    embedding_model: str
    dim: int
    documents: int
    passages: int
    created_at: datetime
    updated_at: datetime


def _corpus(row: CorpusRow) -> CorpusSnapshot:
    return from_row(CorpusSnapshot, row)


def _locked_job(session: Session, job_id: str) -> JobRow | None:
    """The job's row, locked for this transaction (None: no such job)."""
    return session.execute(
        select(JobRow).where(JobRow.id == job_id).with_for_update()
    ).scalar_one_or_none()


def _owned_job(session: Session, job_id: str, worker: str) -> JobRow | None:
    """The job's row, locked, while it is running and owned by `worker`; else None."""
    row = _locked_job(session, job_id)
    if row is None or row.worker != worker or row.state != "running":
        return None
    return row


def _nugget_rows(
    job: JobRow, nuggets: list[dict[str, Any]], *, now: datetime
) -> list[MinedNuggetRow]:
    """A finished mining job's nuggets as rows, in their order."""
    return [
        MinedNuggetRow(
            job_id=job.id,
            tenant=job.tenant,
            question_hash=job.question_hash or "",
            corpus=job.corpus,
            position=position,
            text=nugget["text"],
            importance=nugget["importance"],
            provenance=nugget["provenance"],
            created_at=now,
        )
        for position, nugget in enumerate(nuggets)
    ]


def _grow_corpus(corpus: CorpusRow | None, delta: tuple[int, int, int, str], now: datetime) -> None:
    """An ingestion's (documents added, passages now, dim, embedding model) on its corpus."""
    if corpus is None:
        return
    documents, passages, dim, model = delta
    corpus.documents += documents
    corpus.passages = passages
    corpus.dim = dim
    corpus.embedding_model = model
    corpus.updated_at = now


class MinerRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # --- jobs -----------------------------------------------------------------------------

    def create_job(
        self,
        *,
        tenant: str,
        kind: JobKind,
        corpus: str,
        params: dict[str, Any],
        progress: dict[str, Any],
        tree: dict[str, Any] | None = None,
        question: str | None = None,
        question_hash: str | None = None,
        embedding_model: str | None = None,
        dim: int = 0,
    ) -> JobSnapshot:
        """A queued job; an ingestion job also registers its corpus if new."""
        now = utcnow()
        row = JobRow(
            id=str(uuid.uuid4()),
            tenant=tenant,
            kind=kind,
            state="queued",
            corpus=corpus,
            question=question,
            question_hash=question_hash,
            params=params,
            progress=progress,
            tree=tree,
            cancel_requested=False,
            attempts=0,
            steps=0,
            created_at=now,
            updated_at=now,
        )
        with unit_of_work(self.engine, write=True) as session:
            if kind == "ingest" and session.get(CorpusRow, (tenant, corpus)) is None:
                session.add(
                    CorpusRow(
                        tenant=tenant,
                        name=corpus,
                        embedding_model=embedding_model or "",
                        dim=dim,
                        documents=0,
                        passages=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
            session.add(row)
            session.flush()
            return JobSnapshot.of(row)

    def get_job(self, job_id: str) -> JobSnapshot | None:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(JobRow, job_id)
            return None if row is None else JobSnapshot.of(row)

    def list_jobs(
        self, tenant: str, *, state: JobState | None = None, limit: int = 50
    ) -> list[JobSnapshot]:
        """The tenant's jobs (mining and ingestion), newest first, without their trees."""
        query = (
            select(JobRow)
            .options(defer(JobRow.tree, raiseload=True))
            .where(JobRow.tenant == tenant)
        )
        if state is not None:
            query = query.where(JobRow.state == state)
        query = query.order_by(JobRow.created_at.desc(), JobRow.id.desc()).limit(limit)
        with unit_of_work(self.engine, write=False) as session:
            return [JobSnapshot.of(row, with_tree=False) for row in session.scalars(query)]

    def claim(self, job_id: str, *, worker: str, lease_s: float) -> JobSnapshot | None:
        """Take the job to run (or resume) it; None when it is finished, cancelled, or held by
        a worker whose heartbeat is fresh."""
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = _locked_job(session, job_id)
            if row is None or row.state in TERMINAL:
                return None
            if row.cancel_requested:
                row.state, row.finished_at, row.updated_at = "cancelled", now, now
                return None
            if (
                row.state == "running"
                and row.worker != worker
                and row.heartbeat_at is not None
                and now - as_utc(row.heartbeat_at) < timedelta(seconds=lease_s)
            ):
                return None
            row.state = "running"
            row.worker = worker
            row.heartbeat_at = now
            row.attempts += 1
            row.started_at = row.started_at or now
            row.updated_at = now
            session.flush()
            return JobSnapshot.of(row)

    def save_step(
        self,
        job_id: str,
        *,
        worker: str,
        tree: dict[str, Any] | None,
        progress: dict[str, Any],
    ) -> StepOutcome:
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = _owned_job(session, job_id, worker)
            if row is None:
                return "lost"
            row.tree = tree
            row.progress = progress
            row.steps += 1
            row.heartbeat_at = now
            row.updated_at = now
            return "cancel" if row.cancel_requested else "ok"

    def heartbeat(self, job_id: str, *, worker: str) -> StepOutcome:
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = _owned_job(session, job_id, worker)
            if row is None:
                return "lost"
            row.heartbeat_at = now
            return "cancel" if row.cancel_requested else "ok"

    def finish(
        self,
        job_id: str,
        *,
        worker: str,
        state: JobState,
        progress: dict[str, Any] | None = None,
        tree: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        nuggets: list[dict[str, Any]] | None = None,
        corpus_delta: tuple[int, int, int, str] | None = None,
    ) -> bool:
        """Close the job (only while this worker owns it); store its nuggets and, for an
        ingestion, the corpus's new document count, passage count, dim and model — all in
        one transaction."""
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = _owned_job(session, job_id, worker)
            if row is None:
                return False
            row.state = state
            row.finished_at = now
            row.updated_at = now
            row.heartbeat_at = now
            if progress is not None:
                row.progress = progress
            if tree is not None:
                row.tree = tree
            row.result = result
            row.error = error
            session.add_all(_nugget_rows(row, nuggets or [], now=now))
            if corpus_delta is not None:
                _grow_corpus(session.get(CorpusRow, (row.tenant, row.corpus)), corpus_delta, now)
            return True

    def request_cancel(self, job_id: str) -> JobSnapshot | None:
        """Queued: cancelled now. Running: flagged; the worker stops after its current step."""
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = _locked_job(session, job_id)
            if row is None:
                return None
            if row.state not in TERMINAL:
                row.cancel_requested = True
                row.updated_at = now
                if row.state == "queued":
                    row.state, row.finished_at = "cancelled", now
            session.flush()
            return JobSnapshot.of(row)

    def requeue(self, job_id: str) -> JobSnapshot | None:
        """A failed job back to queued (its tree is kept, so it resumes where it stopped)."""
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = _locked_job(session, job_id)
            if row is None:
                return None
            if row.state == "failed":
                row.state, row.error, row.finished_at, row.updated_at = "queued", None, None, now
                row.worker = None
            session.flush()
            return JobSnapshot.of(row)

    def release(self, job_id: str, *, worker: str) -> bool:
        """Give a running job back (process shutdown): queued again, tree kept."""
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            row = _owned_job(session, job_id, worker)
            if row is None:
                return False
            row.state, row.worker, row.heartbeat_at, row.updated_at = "queued", None, None, now
            return True

    def resumable_jobs(self, *, lease_s: float) -> list[tuple[str, str]]:
        """(id, kind) of queued jobs and of running jobs with a stale heartbeat."""
        cutoff = utcnow() - timedelta(seconds=lease_s)
        with unit_of_work(self.engine, write=False) as session:
            rows = session.execute(
                select(JobRow.id, JobRow.kind, JobRow.state, JobRow.heartbeat_at)
                .where(JobRow.state.in_(("queued", "running")))
                .order_by(JobRow.created_at)
            ).all()
        return [
            (job_id, kind)
            for job_id, kind, state, beat in rows
            if state == "queued" or beat is None or as_utc(beat) < cutoff
        ]

    def stale_jobs(self, *, lease_s: float) -> list[str]:
        """Running jobs whose worker stopped sending heartbeats (it died)."""
        cutoff = utcnow() - timedelta(seconds=lease_s)
        with unit_of_work(self.engine, write=False) as session:
            rows = session.execute(
                select(JobRow.id, JobRow.heartbeat_at).where(JobRow.state == "running")
            ).all()
        return [job_id for job_id, beat in rows if beat is None or as_utc(beat) < cutoff]

    # --- corpora --------------------------------------------------------------------------

    def get_corpus(self, tenant: str, name: str) -> CorpusSnapshot | None:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(CorpusRow, (tenant, name))
            return None if row is None else _corpus(row)

    def list_corpora(self, tenant: str) -> list[CorpusSnapshot]:
        with unit_of_work(self.engine, write=False) as session:
            rows = session.execute(
                select(CorpusRow).where(CorpusRow.tenant == tenant).order_by(CorpusRow.name)
            ).scalars()
            return [_corpus(r) for r in rows]

    # --- nuggets --------------------------------------------------------------------------

    def latest_nuggets(
        self, *, tenant: str, question_hash: str, corpus: str | None
    ) -> tuple[JobSnapshot, list[MinedNuggetRow]] | None:
        """The nuggets of the newest finished mining job for the question (and corpus)."""
        with unit_of_work(self.engine, write=False) as session:
            query = select(JobRow).where(
                JobRow.tenant == tenant,
                JobRow.question_hash == question_hash,
                JobRow.kind == "mine",
                JobRow.state == "succeeded",
            )
            if corpus is not None:
                query = query.where(JobRow.corpus == corpus)
            job = session.execute(
                query.order_by(JobRow.finished_at.desc(), JobRow.id).limit(1)
            ).scalar_one_or_none()
            if job is None:
                return None
            rows = list(
                session.execute(
                    select(MinedNuggetRow)
                    .where(MinedNuggetRow.job_id == job.id)
                    .order_by(MinedNuggetRow.position)
                ).scalars()
            )
            return JobSnapshot.of(job), rows
