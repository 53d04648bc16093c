"""The gateway's public audit routes: the reads, settings and deletion the miner serves, and
the rubric history the store serves.

Most are pure proxy routes: each forwards to the miner's audit route of the same name
(`audit.miner.endpoints`) or to the store's history route (`audit.store.endpoints`) for the
caller's tenant (`common.forward.Forwarder`). Their errors pass on with their status, type
and field (an `UpstreamError` is mapped once for the app). Only reads and the settings' PUT
are retried. A replay with `judge=buffer` reads the question's rubric buffer from the store
first and sends its rubrics along."""

from typing import Annotated

from fastapi import APIRouter, Path, status
from fastapi.responses import StreamingResponse

from rubricate.audit.miner import endpoints as miner
from rubricate.audit.miner.schemas import ReplayIn, question_id_list
from rubricate.audit.store import endpoints as history_store
from rubricate.common.errors import ServiceError
from rubricate.common.forward import Forwarder, MinerDep, StoreDep
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import UpstreamError
from rubricate.db.limits import QUESTION_ID_LEN
from rubricate.stagewise.store import endpoints as buffer_store
from rubricate.stagewise.store.schemas import ScoringId
from rubricate_client.constants import STAGES
from rubricate_client.endpoints import (
    AUDIT_DELETE,
    AUDIT_GET,
    AUDIT_LIST,
    AUDIT_QUESTIONS,
    AUDIT_REPLAY,
    AUDIT_REPLAY_JOB,
    AUDIT_REPLAY_JOBS,
    AUDIT_SETTINGS,
    AUDIT_SETTINGS_PUT,
    AUDIT_SIGNALS,
    AUDIT_TRAJECTORIES,
    BUFFER_HISTORY,
    RUBRIC_HISTORY_EXPORT,
)
from rubricate_client.schemas import audit
from rubricate_client.schemas.rubrics import Rubric

router = APIRouter(tags=["audit"])

QuestionPath = Annotated[str, Path(min_length=1, max_length=QUESTION_ID_LEN)]


@router.get(AUDIT_LIST.path, response_model=audit.AuditList, summary="The latest audited groups")
async def latest(
    upstream: MinerDep,
    question_id: miner.QuestionQuery = None,
    limit: miner.AuditsLimitQuery = miner.AUDITS_LIMIT_DEFAULT,
) -> audit.AuditList:
    return await upstream(miner.GROUPS, query={"question_id": question_id, "limit": limit})


@router.get(AUDIT_GET.path, response_model=audit.AuditView, summary="One group's audit")
async def one(scoring_id: ScoringId, upstream: MinerDep) -> audit.AuditView:
    return await upstream(miner.GROUP, path={"scoring_id": scoring_id})


@router.get(
    AUDIT_TRAJECTORIES.path,
    response_model=audit.ScoringTrajectories,
    summary="The trajectories kept with an audited scoring (null when not kept)",
)
async def trajectories(scoring_id: ScoringId, upstream: MinerDep) -> audit.ScoringTrajectories:
    return await upstream(miner.TRAJECTORIES, path={"scoring_id": scoring_id})


@router.get(
    AUDIT_QUESTIONS.path,
    response_model=audit.QuestionAuditList,
    summary="Audit status per question: groups by status, the latest agreement",
)
async def questions(
    question_ids: miner.QuestionIdsQuery, upstream: MinerDep
) -> audit.QuestionAuditList:
    ids = ",".join(question_id_list(question_ids))
    return await upstream(miner.QUESTIONS, query={"question_ids": ids})


@router.delete(AUDIT_DELETE.path, response_model=audit.AuditDeleted, summary="Delete audit records")
async def remove(upstream: MinerDep, question_id: miner.QuestionQuery = None) -> audit.AuditDeleted:
    return await upstream(miner.DELETE, query={"question_id": question_id}, retry=False)


@router.get(
    AUDIT_SIGNALS.path, response_model=audit.AuditSignals, summary="Drift and gaming signals"
)
async def signals(
    upstream: MinerDep, question_id: miner.QuestionQuery = None
) -> audit.AuditSignals:
    return await upstream(miner.SIGNALS, query={"question_id": question_id})


@router.get(
    AUDIT_SETTINGS.path, response_model=audit.AuditTenantSettings, summary="The tenant's settings"
)
async def get_settings(upstream: MinerDep) -> audit.AuditTenantSettings:
    return await upstream(miner.SETTINGS)


@router.put(
    AUDIT_SETTINGS_PUT.path,
    response_model=audit.AuditTenantSettings,
    summary="Set the tenant's audit fraction and retention",
)
async def put_settings(
    body: audit.AuditTenantSettings, upstream: MinerDep
) -> audit.AuditTenantSettings:
    return await upstream(miner.SETTINGS_PUT, body=body)


@router.post(
    AUDIT_REPLAY.path,
    response_model=audit.ReplayJob,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-score stored scorings with the live judge, the reference judge or the buffer",
)
async def replay(body: audit.ReplayRequest, upstream: MinerDep, store: StoreDep) -> audit.ReplayJob:
    rubrics: list[Rubric] | None = None
    if body.judge == "buffer":
        assert body.question_id is not None  # the request's validator guarantees it
        rubrics = await _buffer_rubrics(store, body.question_id)
    forwarded = ReplayIn(**body.model_dump(), rubrics=rubrics)
    return await upstream(miner.REPLAY, body=forwarded, retry=False)


@router.get(
    AUDIT_REPLAY_JOBS.path,
    response_model=audit.ReplayJobList,
    summary="The tenant's replay jobs, newest first (without results)",
)
async def replay_jobs(
    upstream: MinerDep, limit: miner.ReplayJobsLimitQuery = miner.REPLAY_JOBS_LIMIT_DEFAULT
) -> audit.ReplayJobList:
    return await upstream(miner.REPLAY_JOBS, query={"limit": limit})


@router.get(
    AUDIT_REPLAY_JOB.path, response_model=audit.ReplayJob, summary="A replay job's progress"
)
async def replay_job(job_id: miner.ReplayJobPath, upstream: MinerDep) -> audit.ReplayJob:
    return await upstream(miner.REPLAY_JOB, path={"job_id": job_id})


async def _buffer_rubrics(store: Forwarder, question_id: str) -> list[Rubric]:
    """The question's current rubric buffer, from the store."""
    try:
        buffer = await store(buffer_store.BUFFER, path={"question_id": question_id})
    except UpstreamError as exc:
        if exc.status != 404:
            raise
        raise ServiceError(
            404,
            f"no rubric buffer for question {question_id!r}",
            type="not_found",
            field="question_id",
        ) from exc
    rubrics = [r for stage in STAGES for r in buffer.rubrics.get(stage, [])]
    if not rubrics:
        raise ServiceError(
            409,
            f"the buffer of question {question_id!r} is empty",
            type="no_rubrics",
            field="question_id",
        )
    return rubrics


@router.get(
    BUFFER_HISTORY.path,
    response_model=audit.RubricHistory,
    summary="Every rubric that was ever in the question's buffer, added and pruned when",
)
async def buffer_history(question_id: QuestionPath, store: StoreDep) -> audit.RubricHistory:
    return await store(history_store.BUFFER_HISTORY, path={"question_id": question_id})


@router.get(
    RUBRIC_HISTORY_EXPORT.path,
    response_class=StreamingResponse,
    summary="The tenant's rubric history as JSONL (publish a run's rubrics)",
)
async def rubric_history_export(store: StoreDep) -> StreamingResponse:
    export = history_store.HISTORY_EXPORT
    chunks = await store.client.stream(
        export.method, export.url_path({}), headers={TENANT_HEADER: store.tenant}
    )
    return StreamingResponse(
        chunks,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="rubric-history.jsonl"'},
    )
