"""The miner's audit routes (declared in `audit.miner.endpoints`): the gateway's
submissions, and the reads and settings the gateway forwards (docs/audit.md)."""

from typing import Annotated

from fastapi import APIRouter, Depends, status

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
from rubricate.common.routing import found, route, state_service
from rubricate.common.tenancy import TenantDep
from rubricate.stagewise.store.schemas import ScoringId
from rubricate_client.schemas import audit as views

STATE_NAME = "audit"
"""The `AuditService` on the miner's `app.state`."""

router = APIRouter(tags=["audit"])
ACCEPTED = status.HTTP_202_ACCEPTED


def _not_enabled() -> ServiceError:
    return ServiceError(503, "the audit is not enabled on this miner", type="audit_unavailable")


get_service = state_service(AuditService, STATE_NAME, missing=_not_enabled)
ServiceDep = Annotated[AuditService, Depends(get_service)]


@route(
    router,
    audit.SUBMIT,
    status_code=ACCEPTED,
    summary="Take a scored group; queue it for the reference judge when it is sampled",
)
async def submit(
    body: AuditSubmission, service: ServiceDep, tenant: TenantDep = "default"
) -> Submitted:
    return await service.submit(body, tenant=tenant)


@route(
    router,
    audit.ADDRESSING,
    status_code=ACCEPTED,
    summary="Take a request of another judge kind in which something addressed the judge",
)
async def record_addressing(
    body: AddressingReportIn, service: ServiceDep, tenant: TenantDep = "default"
) -> Recorded:
    return await service.record_addressing(body, tenant=tenant)


@route(router, audit.GROUPS, summary="The latest audited groups")
async def latest(
    service: ServiceDep,
    question_id: audit.QuestionQuery = None,
    limit: audit.AuditsLimitQuery = audit.AUDITS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> views.AuditList:
    return await service.latest(tenant, question_id=question_id, limit=limit)


@route(router, audit.GROUP, summary="One group's audit")
async def one(
    scoring_id: ScoringId, service: ServiceDep, tenant: TenantDep = "default"
) -> views.AuditView:
    record = await service.get(tenant, scoring_id)
    return found(record, f"no audit record for scoring {scoring_id!r}")


@route(
    router,
    audit.TRAJECTORIES,
    summary="The trajectories kept with an audited scoring (null when not kept)",
)
async def trajectories(
    scoring_id: ScoringId, service: ServiceDep, tenant: TenantDep = "default"
) -> views.ScoringTrajectories:
    kept = await service.trajectories(tenant, scoring_id)
    return found(kept, f"no audit record for scoring {scoring_id!r}")


@route(
    router,
    audit.QUESTIONS,
    summary="Audit status per question: groups by status, the latest agreement",
)
async def questions(
    question_ids: audit.QuestionIdsQuery, service: ServiceDep, tenant: TenantDep = "default"
) -> views.QuestionAuditList:
    return await service.question_audits(tenant, question_id_list(question_ids))


@route(router, audit.DELETE, summary="Delete audit records")
async def remove(
    service: ServiceDep, question_id: audit.QuestionQuery = None, tenant: TenantDep = "default"
) -> views.AuditDeleted:
    return views.AuditDeleted(deleted=await service.delete(tenant, question_id=question_id))


@route(router, audit.SIGNALS, summary="Drift and gaming signals")
async def signals(
    service: ServiceDep, question_id: audit.QuestionQuery = None, tenant: TenantDep = "default"
) -> views.AuditSignals:
    return await service.signals(tenant, question_id=question_id)


@route(router, audit.SETTINGS, summary="The tenant's settings")
async def get_settings(
    service: ServiceDep, tenant: TenantDep = "default"
) -> views.AuditTenantSettings:
    return await service.tenant_settings(tenant)


@route(router, audit.SETTINGS_PUT, summary="Set the tenant's settings")
async def put_settings(
    body: views.AuditTenantSettings, service: ServiceDep, tenant: TenantDep = "default"
) -> views.AuditTenantSettings:
    return await service.put_tenant_settings(tenant, body)


@route(
    router,
    audit.REPLAY,
    status_code=ACCEPTED,
    summary="Re-score stored scorings with a chosen judge, as a job with progress",
)
async def replay(
    body: ReplayIn, service: ServiceDep, tenant: TenantDep = "default"
) -> views.ReplayJob:
    return await service.replay(body, tenant=tenant)


@route(router, audit.REPLAY_JOBS, summary="The tenant's replay jobs")
async def replay_jobs(
    service: ServiceDep,
    limit: audit.ReplayJobsLimitQuery = audit.REPLAY_JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> views.ReplayJobList:
    return await service.replay_jobs(tenant, limit=limit)


@route(router, audit.REPLAY_JOB, summary="A replay job's progress")
async def replay_job(
    job_id: audit.ReplayJobPath, service: ServiceDep, tenant: TenantDep = "default"
) -> views.ReplayJob:
    return found(await service.replay_job(tenant, job_id), f"no replay job {job_id!r}")
