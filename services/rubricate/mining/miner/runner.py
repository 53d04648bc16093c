"""Running jobs: the loop around the pure tree search, persistence after every step,
heartbeats, cancellation, and resumption from the stored tree; corpus ingestion.

Both Celery tasks (`rubricate.miner.tasks`) call `run_job`; in embedded mode the same code
runs in process (Celery eager execution in a background thread).
"""

import asyncio
import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Engine

from rubricate.common.upstream import UpstreamError
from rubricate.common.usage import usage_out
from rubricate.mining.domain import search as mining
from rubricate.mining.domain.passages import segment_passages
from rubricate.mining.miner.index import CorpusIndex, PassageRecord
from rubricate.mining.miner.judge import ActionExecutor
from rubricate.mining.miner.loaders import Document, load_path
from rubricate.mining.miner.repository import JobSnapshot, MinerRepository, StepOutcome
from rubricate.mining.miner.settings import MinerSettings
from rubricate_client.schemas.common import UsageOut

log = logging.getLogger("rubricate.miner")

Outcome = Literal["succeeded", "failed", "cancelled", "skipped", "lost", "stopped"]


@dataclass
class MinerRuntime:
    """What a job needs: settings, the database, the corpus index. One per process."""

    settings: MinerSettings
    engine: Engine
    index: CorpusIndex
    worker_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    )
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set at shutdown: running jobs stop after their current step and stay resumable."""

    @property
    def repo(self) -> MinerRepository:
        return MinerRepository(self.engine)


class _Cancelled(Exception):
    pass


class _Lost(Exception):
    pass


class _Stopped(Exception):
    pass


async def run_job(rt: MinerRuntime, job_id: str) -> Outcome:
    job = await asyncio.to_thread(
        rt.repo.claim, job_id, worker=rt.worker_id, lease_s=rt.settings.lease_s
    )
    if job is None:
        log.info("miner.job_skipped job=%s", job_id)
        return "skipped"
    log.info(
        "miner.job_claimed job=%s kind=%s attempt=%d steps=%d",
        job.id,
        job.kind,
        job.attempts,
        job.steps,
    )
    work = _mine(rt, job) if job.kind == "mine" else _ingest(rt, job)
    return await _supervised(rt, job, work)


_STOP_POLL_S = 0.1


async def _supervised(rt: MinerRuntime, job: JobSnapshot, work: Awaitable[Outcome]) -> Outcome:
    """Run `work` while a heartbeat keeps the lease. A cancel request, a lost lease or the
    process shutting down interrupts the step in flight (a judge call can take minutes on a
    CPU model); on shutdown the job goes back to the queue with its tree."""
    task: asyncio.Task[Outcome] = asyncio.ensure_future(work)
    interrupt: list[Exception] = []

    async def beat() -> None:
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + rt.settings.heartbeat_s
        while not task.done():
            await asyncio.sleep(_STOP_POLL_S)
            if rt.stopping.is_set():
                interrupt.append(_Stopped())
            elif loop.time() >= next_beat:
                next_beat = loop.time() + rt.settings.heartbeat_s
                outcome = await asyncio.to_thread(rt.repo.heartbeat, job.id, worker=rt.worker_id)
                if outcome == "cancel":
                    interrupt.append(_Cancelled())
                elif outcome == "lost":
                    interrupt.append(_Lost())
            if interrupt and not task.done():
                task.cancel()
                return

    beater = asyncio.create_task(beat())
    try:
        return await task
    except asyncio.CancelledError:
        if not interrupt:
            raise
        return await _finish_interrupted(rt, job, interrupt[0])
    except Exception as exc:
        if rt.stopping.is_set():  # e.g. a model server that shut down first
            return await _finish_interrupted(rt, job, _Stopped())
        log.exception("miner.job_error job=%s", job.id)  # database, index, embedder
        await asyncio.to_thread(
            rt.repo.finish,
            job.id,
            worker=rt.worker_id,
            state="failed",
            error=f"{type(exc).__name__}: {exc}",
        )
        return "failed"
    finally:
        beater.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beater


async def _checkpoint(
    rt: MinerRuntime, job: JobSnapshot, *, tree: dict[str, Any] | None, progress: dict[str, Any]
) -> None:
    outcome: StepOutcome = await asyncio.to_thread(
        rt.repo.save_step, job.id, worker=rt.worker_id, tree=tree, progress=progress
    )
    if outcome == "cancel":
        raise _Cancelled
    if outcome == "lost":
        raise _Lost
    if rt.stopping.is_set():
        raise _Stopped


async def _finish_interrupted(rt: MinerRuntime, job: JobSnapshot, exc: Exception) -> Outcome:
    if isinstance(exc, _Cancelled):
        await asyncio.to_thread(rt.repo.finish, job.id, worker=rt.worker_id, state="cancelled")
        log.info("miner.job_cancelled job=%s", job.id)
        return "cancelled"
    if isinstance(exc, _Lost):
        log.warning("miner.job_lost job=%s", job.id)
        return "lost"
    await asyncio.to_thread(rt.repo.release, job.id, worker=rt.worker_id)
    log.info("miner.job_stopped job=%s (shutting down; queued again with its tree)", job.id)
    return "stopped"


# --- mining -------------------------------------------------------------------------------


def mining_progress(state: mining.MiningState, usage: UsageOut) -> dict[str, Any]:
    out = mining.progress(state).model_dump(mode="json")
    out["usage"] = usage.model_dump(mode="json")
    return out


async def _mine(rt: MinerRuntime, job: JobSnapshot) -> Outcome:
    """Run a mining job from its stored tree, one action at a time (each checkpointed), to
    its nuggets; a failed judgment or an action result that does not fit fails the job."""
    if job.tree is None:
        raise ValueError(f"mining job {job.id} has no stored tree")
    state = mining.MiningState.model_validate(job.tree)
    executor = _executor(rt, job)
    try:
        while True:
            state, action = mining.next_action(state)
            if action is None:
                break
            result = await executor.run(action)
            state = mining.apply_result(state, action, result)
            await _checkpoint(
                rt,
                job,
                tree=state.model_dump(mode="json"),
                progress=mining_progress(state, usage_out(executor.usage)),
            )
    except (_Cancelled, _Lost, _Stopped) as exc:
        return await _finish_interrupted(rt, job, exc)
    except (UpstreamError, mining.MiningProtocolError) as exc:
        if rt.stopping.is_set():  # a model server shut down before this job could stop
            return await _finish_interrupted(rt, job, _Stopped())
        error = f"{type(exc).__name__}: {exc}"
        await _finish_mining(rt, job, state, executor, state="failed", error=error)
        log.error("miner.job_failed job=%s error=%s", job.id, exc)
        return "failed"
    finally:
        await executor.aclose()
    nuggets = [n.model_dump(mode="json") for n in mining.mined_nuggets(state)]
    result = _mining_result(state, nuggets, usage_out(executor.usage))
    await _finish_mining(
        rt, job, state, executor, state="succeeded", result=result, nuggets=nuggets
    )
    log.info(
        "miner.job_succeeded job=%s nuggets=%d passages=%d expanded=%d",
        job.id,
        len(nuggets),
        len(state.passages),
        state.counters.nodes_expanded,
    )
    return "succeeded"


def _executor(rt: MinerRuntime, job: JobSnapshot) -> ActionExecutor:
    """The job's action executor; its usage starts from what earlier runs of the job spent."""
    executor = ActionExecutor(
        index=rt.index,
        tenant=job.tenant,
        corpus=job.corpus,
        generator_url=rt.settings.rubric_generator_url,
        verifier_url=rt.settings.verifier_url,
        timeout_s=rt.settings.model_timeout_s,
        retries=rt.settings.judge_retries,
        concurrency=rt.settings.judge_concurrency,
    )
    executor.usage.merge(UsageOut.model_validate(job.progress.get("usage") or {}))
    return executor


def _mining_result(
    tree: mining.MiningState, nuggets: list[dict[str, Any]], usage: UsageOut
) -> dict[str, Any]:
    """A finished mining job's result: its nuggets, why it stopped, what it searched."""
    return {
        "nuggets": nuggets,
        "stop_reason": tree.stop_reason,
        "queries": [q.text for q in tree.queries],
        "passages": [p.passage_id for p in tree.passages],
        "extraction_failures": [p.passage_id for p in tree.passages if p.extraction_failed],
        "usage": usage.model_dump(mode="json"),
    }


async def _finish_mining(
    rt: MinerRuntime,
    job: JobSnapshot,
    tree: mining.MiningState,
    executor: ActionExecutor,
    **outcome: Any,
) -> None:
    """Close the job with its final tree and progress, and `outcome` (state, result or
    error, nuggets: `MinerRepository.finish`)."""
    await asyncio.to_thread(
        rt.repo.finish,
        job.id,
        worker=rt.worker_id,
        tree=tree.model_dump(mode="json"),
        progress=mining_progress(tree, usage_out(executor.usage)),
        **outcome,
    )


# --- ingestion ----------------------------------------------------------------------------


def _documents(job: JobSnapshot) -> list[Document]:
    params = job.params
    if params.get("path"):
        return list(load_path(Path(params["path"])))
    return [
        Document(id=str(d["id"]), text=str(d["text"]), title=d.get("title"))
        for d in params.get("documents", [])
    ]


def passages_of(doc: Document) -> list[PassageRecord]:
    return [
        PassageRecord(
            passage_id=f"{doc.id}#{n}", doc_id=doc.id, position=n, text=text, title=doc.title
        )
        for n, text in enumerate(segment_passages(doc.text))
    ]


async def _ingest(rt: MinerRuntime, job: JobSnapshot) -> Outcome:
    """Segment, embed and index documents in batches; the cursor (documents done) is saved
    after every batch, and upserts are idempotent, so a resumed job repeats at most one."""
    docs = await asyncio.to_thread(_documents, job)
    cursor = int((job.tree or {}).get("cursor", 0))
    written = int((job.tree or {}).get("passages", 0))
    try:
        dim = await asyncio.to_thread(rt.index.ensure, job.tenant, job.corpus)
        batch: list[PassageRecord] = []
        end = cursor
        while end < len(docs):
            batch.extend(passages_of(docs[end]))
            end += 1
            if len(batch) >= rt.settings.ingest_batch or end == len(docs):
                written += await asyncio.to_thread(rt.index.upsert, job.tenant, job.corpus, batch)
                batch = []
                cursor = end
                await _checkpoint(
                    rt,
                    job,
                    tree={"cursor": cursor, "passages": written},
                    progress={
                        "documents_total": len(docs),
                        "documents_done": cursor,
                        "passages": written,
                    },
                )
    except (_Cancelled, _Lost, _Stopped) as exc:
        return await _finish_interrupted(rt, job, exc)
    total = await asyncio.to_thread(rt.index.count, job.tenant, job.corpus)
    progress = {"documents_total": len(docs), "documents_done": len(docs), "passages": written}
    await asyncio.to_thread(
        rt.repo.finish,
        job.id,
        worker=rt.worker_id,
        state="succeeded",
        progress=progress,
        tree={"cursor": len(docs), "passages": written},
        result={"documents": len(docs), "passages": written, "corpus_passages": total},
        corpus_delta=(len(docs), total, dim, rt.index.embedder.name),
    )
    log.info("miner.ingested job=%s documents=%d passages=%d", job.id, len(docs), written)
    return "succeeded"


def run_job_sync(rt: MinerRuntime, job_id: str) -> Outcome:
    return asyncio.run(run_job(rt, job_id))
