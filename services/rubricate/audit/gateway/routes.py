"""The gateway's public audit routes: the reads, settings and deletion the miner serves."""

from typing import Annotated, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from rubricate.audit.miner.schemas import QUESTION_IDS_TEXT_LEN, ReplayIn, question_id_list
from rubricate.common.errors import ServiceError
from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.common.upstream import ServiceClient, UpstreamError, Upstreams, upstream_failure
from rubricate.db.limits import QUESTION_ID_LEN
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
from rubricate_client.schemas.audit import (
    AuditDeleted,
    AuditList,
    AuditSignals,
    AuditTenantSettings,
    AuditView,
    QuestionAuditList,
    ReplayJob,
    ReplayJobList,
    ReplayRequest,
    RubricHistory,
    ScoringTrajectories,
)
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.rubrics import Rubric

M = TypeVar("M", bound=BaseModel)

router = APIRouter(tags=["audit"])

QuestionQuery = Annotated[str | None, Query(min_length=1, max_length=QUESTION_ID_LEN)]
QuestionIdsQuery = Annotated[str, Query(min_length=1, max_length=QUESTION_IDS_TEXT_LEN)]

REPLAY_JOBS_LIMIT_MAX = 200
REPLAY_JOBS_LIMIT_DEFAULT = 50
"""The replay job list's page size (the miner checks the same bounds)."""


class MinerAudit:
    """The miner's audit routes through its `ServiceClient`; its errors pass on with their
    status, type and field. Only GETs are retried."""

    def __init__(self, client: ServiceClient) -> None:
        self.client = client

    async def call(
        self,
        method: str,
        path: str,
        *,
        response_model: type[M],
        tenant: str,
        body: BaseModel | None = None,
        params: dict[str, str] | None = None,
    ) -> M:
        try:
            return await self.client.request(
                method,
                path,
                json=None if body is None else body.model_dump(mode="json"),
                params=params,
                headers={TENANT_HEADER: tenant},
                response_model=response_model,
                retry=method in ("GET", "PUT"),
            )
        except UpstreamError as exc:
            raise upstream_failure(exc) from exc


def get_miner(request: Request) -> MinerAudit:
    upstreams: Upstreams = request.app.state.upstreams
    if upstreams.miner is None:
        raise ServiceError(503, "no miner is configured", type="upstream_unreachable")
    return MinerAudit(upstreams.miner)


MinerDep = Annotated[MinerAudit, Depends(get_miner)]


def _question(question_id: str | None) -> dict[str, str]:
    return {} if question_id is None else {"question_id": question_id}


@router.get(AUDIT_LIST.path, response_model=AuditList, summary="The latest audited groups")
async def latest(
    miner: MinerDep,
    question_id: QuestionQuery = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    tenant: TenantDep = "default",
) -> AuditList:
    params = _question(question_id) | {"limit": str(limit)}
    return await miner.call(
        "GET", AUDIT_LIST.path, response_model=AuditList, tenant=tenant, params=params
    )


@router.get(AUDIT_GET.path, response_model=AuditView, summary="One group's audit")
async def one(scoring_id: ScoringId, miner: MinerDep, tenant: TenantDep = "default") -> AuditView:
    return await miner.call(
        "GET",
        f"/v1/audit/groups/{quote(scoring_id, safe='')}",
        response_model=AuditView,
        tenant=tenant,
    )


@router.get(
    AUDIT_TRAJECTORIES.path,
    response_model=ScoringTrajectories,
    summary="The trajectories kept with an audited scoring (null when not kept)",
)
async def trajectories(
    scoring_id: ScoringId, miner: MinerDep, tenant: TenantDep = "default"
) -> ScoringTrajectories:
    return await miner.call(
        "GET",
        f"/v1/audit/groups/{quote(scoring_id, safe='')}/trajectories",
        response_model=ScoringTrajectories,
        tenant=tenant,
    )


@router.get(
    AUDIT_QUESTIONS.path,
    response_model=QuestionAuditList,
    summary="Audit status per question: groups by status, the latest agreement",
)
async def questions(
    question_ids: QuestionIdsQuery, miner: MinerDep, tenant: TenantDep = "default"
) -> QuestionAuditList:
    ids = question_id_list(question_ids)
    return await miner.call(
        "GET",
        AUDIT_QUESTIONS.path,
        response_model=QuestionAuditList,
        tenant=tenant,
        params={"question_ids": ",".join(ids)},
    )


@router.delete(AUDIT_DELETE.path, response_model=AuditDeleted, summary="Delete audit records")
async def remove(
    miner: MinerDep, question_id: QuestionQuery = None, tenant: TenantDep = "default"
) -> AuditDeleted:
    return await miner.call(
        "DELETE",
        AUDIT_DELETE.path,
        response_model=AuditDeleted,
        tenant=tenant,
        params=_question(question_id),
    )


@router.get(AUDIT_SIGNALS.path, response_model=AuditSignals, summary="Drift and gaming signals")
async def signals(
    miner: MinerDep, question_id: QuestionQuery = None, tenant: TenantDep = "default"
) -> AuditSignals:
    return await miner.call(
        "GET",
        AUDIT_SIGNALS.path,
        response_model=AuditSignals,
        tenant=tenant,
        params=_question(question_id),
    )


@router.get(
    AUDIT_SETTINGS.path, response_model=AuditTenantSettings, summary="The tenant's settings"
)
async def get_settings(miner: MinerDep, tenant: TenantDep = "default") -> AuditTenantSettings:
    return await miner.call(
        "GET", AUDIT_SETTINGS.path, response_model=AuditTenantSettings, tenant=tenant
    )


@router.put(
    AUDIT_SETTINGS_PUT.path,
    response_model=AuditTenantSettings,
    summary="Set the tenant's audit fraction and retention",
)
async def put_settings(
    body: AuditTenantSettings, miner: MinerDep, tenant: TenantDep = "default"
) -> AuditTenantSettings:
    return await miner.call(
        "PUT", AUDIT_SETTINGS_PUT.path, response_model=AuditTenantSettings, tenant=tenant, body=body
    )


@router.post(
    AUDIT_REPLAY.path,
    response_model=ReplayJob,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-score stored scorings with the live judge, the reference judge or the buffer",
)
async def replay(
    body: ReplayRequest, request: Request, miner: MinerDep, tenant: TenantDep = "default"
) -> ReplayJob:
    rubrics: list[Rubric] | None = None
    if body.judge == "buffer":
        assert body.question_id is not None  # the request's validator guarantees it
        rubrics = await _buffer_rubrics(request, body.question_id, tenant=tenant)
    forwarded = ReplayIn(**body.model_dump(), rubrics=rubrics)
    return await miner.call(
        "POST", AUDIT_REPLAY.path, response_model=ReplayJob, tenant=tenant, body=forwarded
    )


@router.get(
    AUDIT_REPLAY_JOBS.path,
    response_model=ReplayJobList,
    summary="The tenant's replay jobs, newest first (without results)",
)
async def replay_jobs(
    miner: MinerDep,
    limit: Annotated[int, Query(ge=1, le=REPLAY_JOBS_LIMIT_MAX)] = REPLAY_JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> ReplayJobList:
    return await miner.call(
        "GET",
        AUDIT_REPLAY_JOBS.path,
        response_model=ReplayJobList,
        tenant=tenant,
        params={"limit": str(limit)},
    )


@router.get(AUDIT_REPLAY_JOB.path, response_model=ReplayJob, summary="A replay job's progress")
async def replay_job(
    job_id: Annotated[str, Path(min_length=1, max_length=36)],
    miner: MinerDep,
    tenant: TenantDep = "default",
) -> ReplayJob:
    return await miner.call(
        "GET",
        f"/v1/audit/replay/{quote(job_id, safe='')}",
        response_model=ReplayJob,
        tenant=tenant,
    )


async def _buffer_rubrics(request: Request, question_id: str, *, tenant: str) -> list[Rubric]:
    """The question's current rubric buffer, from the store."""
    upstreams: Upstreams = request.app.state.upstreams
    try:
        buffer = await upstreams.store.request(
            "GET",
            f"/v1/buffers/{quote(question_id, safe='')}",
            response_model=BufferView,
            headers={TENANT_HEADER: tenant},
        )
    except UpstreamError as exc:
        if exc.status == 404:
            raise ServiceError(
                404,
                f"no rubric buffer for question {question_id!r}",
                type="not_found",
                field="question_id",
            ) from exc
        raise upstream_failure(exc) from exc
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
    response_model=RubricHistory,
    summary="Every rubric that was ever in the question's buffer, added and pruned when",
)
async def buffer_history(
    question_id: Annotated[str, Path(min_length=1, max_length=QUESTION_ID_LEN)],
    request: Request,
    tenant: TenantDep = "default",
) -> RubricHistory:
    upstreams: Upstreams = request.app.state.upstreams
    try:
        return await upstreams.store.request(
            "GET",
            f"/v1/buffers/{quote(question_id, safe='')}/history",
            response_model=RubricHistory,
            headers={TENANT_HEADER: tenant},
        )
    except UpstreamError as exc:
        raise upstream_failure(exc) from exc


@router.get(
    RUBRIC_HISTORY_EXPORT.path,
    response_class=StreamingResponse,
    summary="The tenant's rubric history as JSONL (publish a run's rubrics)",
)
async def rubric_history_export(
    request: Request, tenant: TenantDep = "default"
) -> StreamingResponse:
    upstreams: Upstreams = request.app.state.upstreams
    try:
        chunks = await upstreams.store.stream(
            "GET", RUBRIC_HISTORY_EXPORT.path, headers={TENANT_HEADER: tenant}
        )
    except UpstreamError as exc:
        raise upstream_failure(exc) from exc
    return StreamingResponse(
        chunks,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="rubric-history.jsonl"'},
    )
