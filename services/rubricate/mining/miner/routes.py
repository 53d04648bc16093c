"""The miner's HTTP routes (declared in `mining.miner.endpoints`): parse, call the service
object, respond."""

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, status

from rubricate.common.routing import route, state_service
from rubricate.common.tenancy import TenantDep
from rubricate.mining.miner.endpoints import (
    CORPORA,
    INGEST,
    JOB,
    JOB_CANCEL,
    JOB_RESUME,
    JOBS,
    JOBS_LIMIT_DEFAULT,
    MINE,
    NUGGETS,
    CorpusQuery,
    JobsLimitQuery,
    JobStateQuery,
    QuestionQuery,
)
from rubricate.mining.miner.service import MinerService
from rubricate_client.endpoints import Endpoint, NoBody
from rubricate_client.schemas import mining

router = APIRouter(tags=["mining"])
get_service = state_service(MinerService, "miner")
ServiceDep = Annotated[MinerService, Depends(get_service)]
ACCEPTED = status.HTTP_202_ACCEPTED


@route(
    router,
    INGEST,
    status_code=ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(
    body: mining.IngestRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> mining.JobView:
    return await service.ingest(body, tenant=tenant)


@route(router, CORPORA, summary="The tenant's corpora")
async def corpora(service: ServiceDep, tenant: TenantDep = "default") -> mining.CorpusList:
    return await service.corpora(tenant=tenant)


@route(
    router,
    MINE,
    status_code=ACCEPTED,
    summary="Mine a question's nuggets from a corpus (Search-Gen-V §3.2) as a job",
)
async def mine(
    body: mining.MineRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> mining.JobView:
    return await service.mine(body, tenant=tenant)


@route(router, JOBS, summary="The tenant's jobs, newest first")
async def jobs(
    service: ServiceDep,
    state: JobStateQuery = None,
    limit: JobsLimitQuery = JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> mining.JobList:
    return await service.jobs(tenant=tenant, state=state, limit=limit)


def _job_action(
    endpoint: Endpoint[NoBody, mining.JobView],
    action: Callable[..., Awaitable[mining.JobView]],
    summary: str,
    status_code: int | None = None,
) -> None:
    """Serve `endpoint` as the route named after `action` (a `MinerService` method): the
    action on the job the path names, answered as the job."""

    async def handler(
        job_id: str, service: ServiceDep, tenant: TenantDep = "default"
    ) -> mining.JobView:
        result: mining.JobView = await action(service, job_id, tenant=tenant)
        return result

    handler.__name__ = action.__name__
    route(router, endpoint, status_code=status_code, summary=summary)(handler)


_job_action(JOB, MinerService.job, "A job's state, progress and result")
_job_action(
    JOB_CANCEL,
    MinerService.cancel,
    "Cancel a job: at once when queued, after the step in flight when running",
)
_job_action(JOB_RESUME, MinerService.resume, "Re-run a failed job from its stored tree", ACCEPTED)


@route(
    router,
    NUGGETS,
    summary="The nuggets mined for a question, with provenance (passage ids, query path)",
)
async def nuggets(
    service: ServiceDep,
    question: QuestionQuery,
    corpus: CorpusQuery = None,
    tenant: TenantDep = "default",
) -> mining.NuggetsView:
    return await service.nuggets(question=question, corpus=corpus, tenant=tenant)
