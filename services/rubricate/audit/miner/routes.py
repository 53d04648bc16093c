"""The miner's audit routes: the gateway's submissions, and the reads and settings the
gateway forwards (docs/audit.md)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, status

from rubricate.audit.miner.schemas import (
    QUESTION_IDS_TEXT_LEN,
    AddressingReportIn,
    AuditSubmission,
    Recorded,
    ReplayIn,
    Submitted,
    question_id_list,
)
from rubricate.audit.miner.service import AuditService
from rubricate.common.errors import ServiceError
from rubricate.common.tenancy import TenantDep
from rubricate.db.limits import QUESTION_ID_LEN
from rubricate.stagewise.store.schemas import ScoringId
from rubricate_client.schemas.audit import (
    AuditDeleted,
    AuditList,
    AuditSignals,
    AuditTenantSettings,
    AuditView,
    QuestionAuditList,
    ReplayJob,
    ReplayJobList,
    ScoringTrajectories,
)

STATE_NAME = "audit"
"""The `AuditService` on the miner's `app.state`."""

router = APIRouter(prefix="/v1/audit", tags=["audit"])

QuestionQuery = Annotated[str | None, Query(min_length=1, max_length=QUESTION_ID_LEN)]
QuestionIdsQuery = Annotated[str, Query(min_length=1, max_length=QUESTION_IDS_TEXT_LEN)]

REPLAY_JOBS_LIMIT_MAX = 200
REPLAY_JOBS_LIMIT_DEFAULT = 50


def get_service(request: Request) -> AuditService:
    service: AuditService | None = getattr(request.app.state, STATE_NAME, None)
    if service is None:
        raise ServiceError(503, "the audit is not enabled on this miner", type="audit_unavailable")
    return service


ServiceDep = Annotated[AuditService, Depends(get_service)]


@router.post(
    "/groups",
    response_model=Submitted,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Take a scored group; queue it for the reference judge when it is sampled",
)
async def submit(
    body: AuditSubmission, service: ServiceDep, tenant: TenantDep = "default"
) -> Submitted:
    return await service.submit(body, tenant=tenant)


@router.post(
    "/addressing",
    response_model=Recorded,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Take a request of another judge kind in which something addressed the judge",
)
async def record_addressing(
    body: AddressingReportIn, service: ServiceDep, tenant: TenantDep = "default"
) -> Recorded:
    return await service.record_addressing(body, tenant=tenant)


@router.get("/groups", response_model=AuditList, summary="The latest audited groups")
async def latest(
    service: ServiceDep,
    question_id: QuestionQuery = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    tenant: TenantDep = "default",
) -> AuditList:
    return await service.latest(tenant, question_id=question_id, limit=limit)


@router.get("/groups/{scoring_id}", response_model=AuditView, summary="One group's audit")
async def one(
    scoring_id: ScoringId, service: ServiceDep, tenant: TenantDep = "default"
) -> AuditView:
    found = await service.get(tenant, scoring_id)
    if found is None:
        raise ServiceError(404, f"no audit record for scoring {scoring_id!r}", type="not_found")
    return found


@router.get(
    "/groups/{scoring_id}/trajectories",
    response_model=ScoringTrajectories,
    summary="The trajectories kept with an audited scoring (null when not kept)",
)
async def trajectories(
    scoring_id: ScoringId, service: ServiceDep, tenant: TenantDep = "default"
) -> ScoringTrajectories:
    found = await service.trajectories(tenant, scoring_id)
    if found is None:
        raise ServiceError(404, f"no audit record for scoring {scoring_id!r}", type="not_found")
    return found


@router.get(
    "/questions",
    response_model=QuestionAuditList,
    summary="Audit status per question: groups by status, the latest agreement",
)
async def questions(
    question_ids: QuestionIdsQuery, service: ServiceDep, tenant: TenantDep = "default"
) -> QuestionAuditList:
    return await service.question_audits(tenant, question_id_list(question_ids))


@router.delete("/groups", response_model=AuditDeleted, summary="Delete audit records")
async def remove(
    service: ServiceDep, question_id: QuestionQuery = None, tenant: TenantDep = "default"
) -> AuditDeleted:
    return AuditDeleted(deleted=await service.delete(tenant, question_id=question_id))


@router.get("/signals", response_model=AuditSignals, summary="Drift and gaming signals")
async def signals(
    service: ServiceDep, question_id: QuestionQuery = None, tenant: TenantDep = "default"
) -> AuditSignals:
    return await service.signals(tenant, question_id=question_id)


@router.get("/settings", response_model=AuditTenantSettings, summary="The tenant's settings")
async def get_settings(service: ServiceDep, tenant: TenantDep = "default") -> AuditTenantSettings:
    return await service.tenant_settings(tenant)


@router.put("/settings", response_model=AuditTenantSettings, summary="Set the tenant's settings")
async def put_settings(
    body: AuditTenantSettings, service: ServiceDep, tenant: TenantDep = "default"
) -> AuditTenantSettings:
    return await service.put_tenant_settings(tenant, body)


@router.post(
    "/replay",
    response_model=ReplayJob,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-score stored scorings with a chosen judge, as a job with progress",
)
async def replay(body: ReplayIn, service: ServiceDep, tenant: TenantDep = "default") -> ReplayJob:
    return await service.replay(body, tenant=tenant)


@router.get("/replay", response_model=ReplayJobList, summary="The tenant's replay jobs")
async def replay_jobs(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=REPLAY_JOBS_LIMIT_MAX)] = REPLAY_JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> ReplayJobList:
    return await service.replay_jobs(tenant, limit=limit)


@router.get("/replay/{job_id}", response_model=ReplayJob, summary="A replay job's progress")
async def replay_job(
    job_id: Annotated[str, Path(min_length=1, max_length=36)],
    service: ServiceDep,
    tenant: TenantDep = "default",
) -> ReplayJob:
    found = await service.replay_job(tenant, job_id)
    if found is None:
        raise ServiceError(404, f"no replay job {job_id!r}", type="not_found")
    return found
