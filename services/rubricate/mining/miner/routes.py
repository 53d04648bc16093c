"""The miner's HTTP routes (declared in `mining.miner.endpoints`): parse, call the service
object, respond."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request, status

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
from rubricate_client.schemas.mining import (
    CorpusList,
    IngestRequest,
    JobList,
    JobView,
    MineRequest,
    NuggetsView,
)

router = APIRouter(tags=["mining"])


def get_service(request: Request) -> MinerService:
    service: MinerService = request.app.state.miner
    return service


ServiceDep = Annotated[MinerService, Depends(get_service)]


@router.post(
    INGEST.path,
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(
    body: IngestRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> JobView:
    return await service.ingest(body, tenant=tenant)


@router.get(CORPORA.path, response_model=CorpusList, summary="The tenant's corpora")
async def corpora(service: ServiceDep, tenant: TenantDep = "default") -> CorpusList:
    return await service.corpora(tenant=tenant)


@router.post(
    MINE.path,
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Mine a question's nuggets from a corpus (Search-Gen-V §3.2) as a job",
)
async def mine(body: MineRequest, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.mine(body, tenant=tenant)


@router.get(JOBS.path, response_model=JobList, summary="The tenant's jobs, newest first")
async def jobs(
    service: ServiceDep,
    state: JobStateQuery = None,
    limit: JobsLimitQuery = JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> JobList:
    return await service.jobs(tenant=tenant, state=state, limit=limit)


@router.get(JOB.path, response_model=JobView, summary="A job's state, progress and result")
async def job(job_id: str, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.job(job_id, tenant=tenant)


@router.post(
    JOB_CANCEL.path,
    response_model=JobView,
    summary="Cancel a job: at once when queued, after the step in flight when running",
)
async def cancel(job_id: str, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.cancel(job_id, tenant=tenant)


@router.post(
    JOB_RESUME.path,
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-run a failed job from its stored tree",
)
async def resume(job_id: str, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.resume(job_id, tenant=tenant)


@router.get(
    NUGGETS.path,
    response_model=NuggetsView,
    summary="The nuggets mined for a question, with provenance (passage ids, query path)",
)
async def nuggets(
    service: ServiceDep,
    question: QuestionQuery,
    corpus: CorpusQuery = None,
    tenant: TenantDep = "default",
) -> NuggetsView:
    return await service.nuggets(question=question, corpus=corpus, tenant=tenant)
