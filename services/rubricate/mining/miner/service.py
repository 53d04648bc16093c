"""The miner service object: validates requests, records jobs, dispatches them to Celery."""

import asyncio
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from rubricate.common.errors import ServiceError
from rubricate.core.normalize import question_hash
from rubricate.mining.domain import search as mining
from rubricate.mining.miner.loaders import parse_document
from rubricate.mining.miner.repository import JobSnapshot, MinerRepository
from rubricate.mining.miner.runner import MinerRuntime, mining_progress
from rubricate.mining.miner.settings import MinerSettings
from rubricate_client.errors import DomainError
from rubricate_client.schemas.common import UsageOut
from rubricate_client.schemas.mining import (
    CorpusList,
    CorpusView,
    IngestRequest,
    JobList,
    JobStateName,
    JobView,
    MinedNugget,
    MineRequest,
    NuggetsView,
)

log = logging.getLogger("rubricate.miner")


def job_view(job: JobSnapshot) -> JobView:
    """The job as its routes show it: an ingestion's params name its source only (the
    document count or the path), not the documents."""
    view = JobView.model_validate(job, from_attributes=True)
    if job.kind == "mine":
        return view
    return view.model_copy(update={"params": _ingest_params(job.params)})


def _ingest_params(params: dict[str, Any]) -> dict[str, Any]:
    if params.get("path"):
        return {"path": params["path"]}
    return {"documents": len(params.get("documents", []))}


class JobTask(Protocol):
    """A Celery task taking a job id (the miner service's `tasks.mine` / `tasks.ingest`)."""

    def apply(self, *, args: list[str]) -> Any: ...
    def apply_async(self, *, args: list[str], queue: str) -> Any: ...


class Dispatcher:
    """Celery in worker mode; in eager mode each job runs in a background thread through
    Celery's eager execution, so the request that created it returns at once. The tasks
    come from the miner service (`rubricate.miner.tasks`), which owns the Celery app."""

    def __init__(self, settings: MinerSettings, *, tasks: Mapping[str, JobTask]) -> None:
        if set(tasks) != {"mine", "ingest"}:
            raise ValueError(
                f"the dispatcher needs the tasks 'mine' and 'ingest', got {sorted(tasks)}"
            )
        self.eager = settings.runs_eagerly
        self.queue = settings.queue
        self.tasks = dict(tasks)
        self._threads: list[threading.Thread] = []

    def submit(self, kind: str, job_id: str) -> None:
        task = self.tasks["mine" if kind == "mine" else "ingest"]
        if self.eager:
            thread = threading.Thread(
                target=task.apply, kwargs={"args": [job_id]}, name=f"job-{job_id}", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()
        else:
            task.apply_async(args=[job_id], queue=self.queue)

    def join(self, timeout_s: float) -> None:
        for thread in self._threads:
            thread.join(timeout_s)


class MinerService:
    def __init__(self, *, runtime: MinerRuntime, dispatcher: Dispatcher) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.dispatcher = dispatcher
        self.repo = MinerRepository(runtime.engine)

    async def ingest(self, body: IngestRequest, *, tenant: str) -> JobView:
        params: dict[str, Any]
        if body.path is not None:
            params = {"path": str(self._checked_path(body.path))}
            total = None
        else:
            assert body.documents is not None
            if len(body.documents) > self.settings.max_documents:
                raise DomainError(
                    f"at most {self.settings.max_documents} documents per request",
                    field="documents",
                )
            docs: list[dict[str, Any]] = []
            for i, doc in enumerate(body.documents):
                parsed = parse_document(
                    doc_id=doc.id, content=doc.content, fmt=doc.format, field=f"documents[{i}]"
                )
                docs.extend({"id": d.id, "text": d.text, "title": d.title} for d in parsed)
            params = {"documents": docs}
            total = len(docs)
        job = await asyncio.to_thread(
            self.repo.create_job,
            tenant=tenant,
            kind="ingest",
            corpus=body.name,
            params=params,
            progress={"documents_total": total, "documents_done": 0, "passages": 0},
            embedding_model=self.settings.embedding_model,
        )
        await asyncio.to_thread(self.dispatcher.submit, "ingest", job.id)
        log.info("miner.ingest_queued job=%s corpus=%s documents=%s", job.id, body.name, total)
        return await self.job(job.id, tenant=tenant)

    def _checked_path(self, raw: str) -> Path:
        path = Path(raw).resolve()
        roots = [r.resolve() for r in self.settings.ingest_roots]
        if not any(path == root or root in path.parents for root in roots):
            raise ServiceError(
                403,
                "path is outside RUBRICATE_MINER_INGEST_ROOTS; upload `documents` instead",
                type="forbidden_path",
                field="path",
            )
        if not path.exists():
            raise DomainError(f"{raw} does not exist on the miner", field="path")
        return path

    async def mine(self, body: MineRequest, *, tenant: str) -> JobView:
        corpus = await asyncio.to_thread(self.repo.get_corpus, tenant, body.corpus)
        if corpus is None:
            raise ServiceError(
                404, f"corpus {body.corpus!r} does not exist", type="not_found", field="corpus"
            )
        overrides = body.model_dump(exclude={"question", "corpus"}, exclude_none=True)
        limits = mining.MiningLimits(**overrides)
        state = mining.new_state(question=body.question, limits=limits)
        job = await asyncio.to_thread(
            self.repo.create_job,
            tenant=tenant,
            kind="mine",
            corpus=body.corpus,
            question=state.question,
            question_hash=question_hash(state.question),
            params=limits.model_dump(mode="json"),
            progress=mining_progress(state, UsageOut()),
            tree=state.model_dump(mode="json"),
        )
        await asyncio.to_thread(self.dispatcher.submit, "mine", job.id)
        log.info("miner.mine_queued job=%s corpus=%s", job.id, body.corpus)
        return await self.job(job.id, tenant=tenant)

    async def job(self, job_id: str, *, tenant: str) -> JobView:
        return job_view(await self._job(job_id, tenant=tenant))

    async def jobs(self, *, tenant: str, state: JobStateName | None, limit: int) -> JobList:
        """The tenant's mining and ingestion jobs, newest first (the console's job list)."""
        found = await asyncio.to_thread(
            lambda: self.repo.list_jobs(tenant, state=state, limit=limit)
        )
        return JobList(jobs=[job_view(job) for job in found])

    async def _job(self, job_id: str, *, tenant: str) -> JobSnapshot:
        job = await asyncio.to_thread(self.repo.get_job, job_id)
        if job is None or job.tenant != tenant:
            raise ServiceError(404, f"job {job_id!r} not found", type="not_found")
        return job

    async def cancel(self, job_id: str, *, tenant: str) -> JobView:
        await self._job(job_id, tenant=tenant)
        job = await asyncio.to_thread(self.repo.request_cancel, job_id)
        assert job is not None
        log.info("miner.cancel_requested job=%s state=%s", job_id, job.state)
        return job_view(job)

    async def resume(self, job_id: str, *, tenant: str) -> JobView:
        job = await self._job(job_id, tenant=tenant)
        if job.state != "failed":
            raise ServiceError(
                409, f"only a failed job can be resumed; this one is {job.state}", type="conflict"
            )
        requeued = await asyncio.to_thread(self.repo.requeue, job_id)
        assert requeued is not None
        await asyncio.to_thread(self.dispatcher.submit, requeued.kind, job_id)
        return job_view(requeued)

    async def corpora(self, *, tenant: str) -> CorpusList:
        rows = await asyncio.to_thread(self.repo.list_corpora, tenant)
        return CorpusList(
            corpora=[CorpusView.model_validate(c, from_attributes=True) for c in rows]
        )

    async def nuggets(self, *, question: str, corpus: str | None, tenant: str) -> NuggetsView:
        found = await asyncio.to_thread(
            self.repo.latest_nuggets,
            tenant=tenant,
            question_hash=question_hash(question),
            corpus=corpus,
        )
        if found is None:
            raise ServiceError(
                404, "no finished mining job for this question", type="not_found", field="question"
            )
        job, rows = found
        return NuggetsView(
            question=job.question or question,
            corpus=job.corpus,
            job_id=job.id,
            mined_at=job.finished_at or job.updated_at,
            nuggets=[
                MinedNugget.model_validate(
                    {"text": r.text, "importance": r.importance, "provenance": r.provenance}
                )
                for r in rows
            ],
        )
