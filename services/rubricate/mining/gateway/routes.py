"""The gateway's mining routes: corpora, mining jobs and mined nuggets, served by the miner."""

from typing import Annotated, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request, status
from pydantic import BaseModel

from rubricate.common.errors import ServiceError
from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.common.upstream import ServiceClient, UpstreamError, Upstreams, upstream_failure
from rubricate_client.endpoints import (
    CANCEL_JOB,
    CORPORA_INGEST,
    CORPORA_LIST,
    GET_JOB,
    JOBS_LIST,
    MINED_NUGGETS,
    NUGGETS_MINE,
)
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

M = TypeVar("M", bound=BaseModel)

STATE_NAME = "upstreams"
"""The gateway's upstream clients on `app.state` (built in its lifespan); the miner's is used."""

router = APIRouter(tags=["mining"])

JOBS_LIMIT_MAX = 200
JOBS_LIMIT_DEFAULT = 50
"""The job list's page size (the miner checks the same bounds)."""


class MinerCalls:
    """Calls the miner through its `ServiceClient` and hands its errors on with their status,
    type and field. Only GETs are retried: a POST creates a job and must not run twice."""

    def __init__(self, client: ServiceClient) -> None:
        self.client = client

    async def request(
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
                json=None if body is None else body.model_dump(mode="json", exclude_none=True),
                params=params,
                headers={TENANT_HEADER: tenant},
                response_model=response_model,
                retry=method == "GET",
            )
        except UpstreamError as exc:
            raise upstream_failure(exc) from exc


def get_client(request: Request) -> MinerCalls:
    upstreams: Upstreams = getattr(request.app.state, STATE_NAME)
    if upstreams.miner is None:
        raise ServiceError(503, "no miner is configured", type="upstream_unreachable")
    return MinerCalls(upstreams.miner)


ClientDep = Annotated[MinerCalls, Depends(get_client)]


@router.post(
    CORPORA_INGEST.path,
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(body: IngestRequest, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
        "POST", "/v1/corpora", response_model=JobView, tenant=tenant, body=body
    )


@router.get(CORPORA_LIST.path, response_model=CorpusList, summary="The tenant's corpora")
async def corpora(client: ClientDep, tenant: TenantDep = "default") -> CorpusList:
    return await client.request("GET", "/v1/corpora", response_model=CorpusList, tenant=tenant)


@router.post(
    NUGGETS_MINE.path,
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Mine a question's nuggets from a corpus (Search-Gen-V §3.2) as a job",
)
async def mine(body: MineRequest, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
        "POST", "/v1/nuggets/mine", response_model=JobView, tenant=tenant, body=body
    )


@router.get(JOBS_LIST.path, response_model=JobList, summary="The tenant's jobs, newest first")
async def jobs(
    client: ClientDep,
    state: Annotated[JobStateName | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=JOBS_LIMIT_MAX)] = JOBS_LIMIT_DEFAULT,
    tenant: TenantDep = "default",
) -> JobList:
    params = {"limit": str(limit)} | ({"state": state} if state is not None else {})
    return await client.request(
        "GET", JOBS_LIST.path, response_model=JobList, tenant=tenant, params=params
    )


@router.get(GET_JOB.path, response_model=JobView, summary="A job's state, progress and result")
async def job(job_id: str, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
        "GET", f"/v1/jobs/{quote(job_id, safe='')}", response_model=JobView, tenant=tenant
    )


@router.post(CANCEL_JOB.path, response_model=JobView, summary="Cancel a job")
async def cancel(job_id: str, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
        "POST",
        f"/v1/jobs/{quote(job_id, safe='')}/cancel",
        response_model=JobView,
        tenant=tenant,
    )


@router.get(
    MINED_NUGGETS.path,
    response_model=NuggetsView,
    summary="The nuggets mined for a question, with provenance (passage ids, query path)",
)
async def nuggets(
    client: ClientDep,
    question: Annotated[str, Query(min_length=1, max_length=4000)],
    corpus: Annotated[str | None, Query(pattern=CORPUS_PATTERN)] = None,
    tenant: TenantDep = "default",
) -> NuggetsView:
    params = {"question": question} | ({"corpus": corpus} if corpus else {})
    return await client.request(
        "GET", "/v1/nuggets", response_model=NuggetsView, tenant=tenant, params=params
    )
