"""The miner's audit routes (declared in `audit.miner.endpoints`): the gateway's
submissions, and the reads and settings the gateway forwards (docs/audit.md)."""

from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Request, status

from rubricate.audit.miner import endpoints as audit
from rubricate.audit.miner.schemas import (
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

T = TypeVar("T")

STATE_NAME = "audit"
"""The `AuditService` on the miner's `app.state`."""

router = APIRouter(tags=["audit"])


def get_service(request: Request) -> AuditService:
    service: AuditService | None = getattr(request.app.state, STATE_NAME, None)
    if service is None:
        raise ServiceError(503, "the audit is not enabled on this miner", type="audit_unavailable")
    return service


ServiceDep = Annotated[AuditService, Depends(get_service)]


def found(value: T | None, what: str) -> T:
    """`value`, or a 404 saying there is no `what`."""
    if value is None:
        raise ServiceError(404, f"no {what}", type="not_found")
    return value


@router.post(
    audit.SUBMIT.path,
    response_model=Submitted,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Take a scored group; queue it for the reference judge when it is sampled",
)
async def submit(
    body: AuditSubmission, service: ServiceDep, tenant: TenantDep = "default"
) -> Submitted:
    return await service.submit(body, tenant=tenant)


@router.post(
    audit.ADDRESSING.path,
    response_model=Recorded,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Take a request of another judge kind in which something addressed the judge",
)
async def record_addressing(
    body: AddressingReportIn, service: ServiceDep, tenant: TenantDep = "default"
) -> Recorded:
    return await service.record_addressing(body, tenant=tenant)


@router.get(audit.GROUPS.path, response_model=AuditList, summary="The latest audited groups")
async def latest(
    service: ServiceDep,
    question_id: audit.QuestionQuery = None,
    limit: audit.AuditsLimitQuery = audit.AUDITS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> AuditList:
    return await service.latest(tenant, question_id=question_id, limit=limit)


@router.get(audit.GROUP.path, response_model=AuditView, summary="One group's audit")
async def one(
    scoring_id: ScoringId, service: ServiceDep, tenant: TenantDep = "default"
) -> AuditView:
    record = await service.get(tenant, scoring_id)
    return found(record, f"audit record for scoring {scoring_id!r}")


@router.get(
    audit.TRAJECTORIES.path,
    response_model=ScoringTrajectories,
    summary="The trajectories kept with an audited scoring (null when not kept)",
)
async def trajectories(
    scoring_id: ScoringId, service: ServiceDep, tenant: TenantDep = "default"
) -> ScoringTrajectories:
    kept = await service.trajectories(tenant, scoring_id)
    return found(kept, f"audit record for scoring {scoring_id!r}")


@router.get(
    audit.QUESTIONS.path,
    response_model=QuestionAuditList,
    summary="Audit status per question: groups by status, the latest agreement",
)
async def questions(
    question_ids: audit.QuestionIdsQuery, service: ServiceDep, tenant: TenantDep = "default"
) -> QuestionAuditList:
    return await service.question_audits(tenant, question_id_list(question_ids))


@router.delete(audit.DELETE.path, response_model=AuditDeleted, summary="Delete audit records")
async def remove(
    service: ServiceDep, question_id: audit.QuestionQuery = None, tenant: TenantDep = "default"
) -> AuditDeleted:
    return AuditDeleted(deleted=await service.delete(tenant, question_id=question_id))


@router.get(audit.SIGNALS.path, response_model=AuditSignals, summary="Drift and gaming signals")
async def signals(
    service: ServiceDep, question_id: audit.QuestionQuery = None, tenant: TenantDep = "default"
) -> AuditSignals:
    return await service.signals(tenant, question_id=question_id)


@router.get(
    audit.SETTINGS.path, response_model=AuditTenantSettings, summary="The tenant's settings"
)
async def get_settings(service: ServiceDep, tenant: TenantDep = "default") -> AuditTenantSettings:
    return await service.tenant_settings(tenant)


@router.put(
    audit.SETTINGS_PUT.path, response_model=AuditTenantSettings, summary="Set the tenant's settings"
)
async def put_settings(
    body: AuditTenantSettings, service: ServiceDep, tenant: TenantDep = "default"
) -> AuditTenantSettings:
    return await service.put_tenant_settings(tenant, body)


@router.post(
    audit.REPLAY.path,
    response_model=ReplayJob,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-score stored scorings with a chosen judge, as a job with progress",
)
async def replay(body: ReplayIn, service: ServiceDep, tenant: TenantDep = "default") -> ReplayJob:
    return await service.replay(body, tenant=tenant)


@router.get(
    audit.REPLAY_JOBS.path, response_model=ReplayJobList, summary="The tenant's replay jobs"
)
async def replay_jobs(
    service: ServiceDep,
    limit: audit.ReplayJobsLimitQuery = audit.REPLAY_JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> ReplayJobList:
    return await service.replay_jobs(tenant, limit=limit)


@router.get(audit.REPLAY_JOB.path, response_model=ReplayJob, summary="A replay job's progress")
async def replay_job(
    job_id: audit.ReplayJobPath, service: ServiceDep, tenant: TenantDep = "default"
) -> ReplayJob:
    return found(await service.replay_job(tenant, job_id), f"replay job {job_id!r}")
