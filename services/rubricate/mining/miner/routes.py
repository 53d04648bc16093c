"""The miner's HTTP routes: parse, call the service object, respond."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, status

from rubricate.common.tenancy import TenantDep
from rubricate.mining.miner.service import MinerService
from rubricate_client.schemas.mining import (
    CORPUS_PATTERN,
    CorpusList,
    IngestRequest,
    JobList,
    JobStateName,
    JobView,
    MineRequest,
    NuggetsView,
)

router = APIRouter(prefix="/v1", tags=["mining"])

JOBS_LIMIT_MAX = 200
JOBS_LIMIT_DEFAULT = 50


def get_service(request: Request) -> MinerService:
    service: MinerService = request.app.state.miner
    return service


ServiceDep = Annotated[MinerService, Depends(get_service)]


@router.post(
    "/corpora",
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(
    body: IngestRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> JobView:
    return await service.ingest(body, tenant=tenant)


@router.get("/corpora", response_model=CorpusList, summary="The tenant's corpora")
async def corpora(service: ServiceDep, tenant: TenantDep = "default") -> CorpusList:
    return await service.corpora(tenant=tenant)


@router.post(
    "/nuggets/mine",
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Mine a question's nuggets from a corpus (Search-Gen-V §3.2) as a job",
)
async def mine(body: MineRequest, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.mine(body, tenant=tenant)


@router.get("/jobs", response_model=JobList, summary="The tenant's jobs, newest first")
async def jobs(
    service: ServiceDep,
    state: Annotated[JobStateName | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=JOBS_LIMIT_MAX)] = JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> JobList:
    return await service.jobs(tenant=tenant, state=state, limit=limit)


@router.get("/jobs/{job_id}", response_model=JobView, summary="A job's state, progress and result")
async def job(job_id: str, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.job(job_id, tenant=tenant)


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobView,
    summary="Cancel a job: at once when queued, after the step in flight when running",
)
async def cancel(job_id: str, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.cancel(job_id, tenant=tenant)


@router.post(
    "/jobs/{job_id}/resume",
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-run a failed job from its stored tree",
)
async def resume(job_id: str, service: ServiceDep, tenant: TenantDep = "default") -> JobView:
    return await service.resume(job_id, tenant=tenant)


@router.get(
    "/nuggets",
    response_model=NuggetsView,
    summary="The nuggets mined for a question, with provenance (passage ids, query path)",
)
async def nuggets(
    service: ServiceDep,
    question: Annotated[str, Query(min_length=1, max_length=4000)],
    corpus: Annotated[str | None, Query(pattern=CORPUS_PATTERN)] = None,
    tenant: TenantDep = "default",
) -> NuggetsView:
    return await service.nuggets(question=question, corpus=corpus, tenant=tenant)
