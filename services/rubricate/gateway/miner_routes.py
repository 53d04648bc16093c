"""The gateway's mining routes: corpora, mining jobs and mined nuggets, served by the miner."""

from typing import Annotated, TypeVar
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Query, Request, status
from pydantic import BaseModel

from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.gateway.clients import ServiceClient, UpstreamError
from rubricate.gateway.routes import upstream_failure
from rubricate.gateway.settings import GatewaySettings
from rubricate.miner.schemas import (
    CORPUS_PATTERN,
    CorpusList,
    IngestRequest,
    JobView,
    MineRequest,
    NuggetsView,
)

M = TypeVar("M", bound=BaseModel)

STATE_NAME = "miner_client"
"""The miner client's name on `app.state` (built in the gateway's lifespan)."""

router = APIRouter(prefix="/v1", tags=["mining"])


def build_miner_client(settings: GatewaySettings) -> ServiceClient:
    return ServiceClient(
        service="miner",
        base_url=settings.miner_url,
        timeout_s=settings.store_timeout_s,
        retries=settings.upstream_retries,
    )


def get_client(request: Request) -> ServiceClient:
    client: ServiceClient = getattr(request.app.state, STATE_NAME)
    return client


ClientDep = Annotated[ServiceClient, Depends(get_client)]


async def _forward(
    client: ServiceClient,
    method: str,
    path: str,
    *,
    response_model: type[M],
    tenant: str,
    body: BaseModel | None = None,
) -> M:
    try:
        return await client.request(
            method,
            path,
            response_model=response_model,
            json=None if body is None else body.model_dump(mode="json", exclude_none=True),
            headers={TENANT_HEADER: tenant},
        )
    except UpstreamError as exc:
        raise upstream_failure(exc) from exc


@router.post(
    "/corpora",
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(body: IngestRequest, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await _forward(
        client, "POST", "/v1/corpora", response_model=JobView, tenant=tenant, body=body
    )


@router.get("/corpora", response_model=CorpusList, summary="The tenant's corpora")
async def corpora(client: ClientDep, tenant: TenantDep = "default") -> CorpusList:
    return await _forward(client, "GET", "/v1/corpora", response_model=CorpusList, tenant=tenant)


@router.post(
    "/nuggets/mine",
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Mine a question's nuggets from a corpus (Search-Gen-V §3.2) as a job",
)
async def mine(body: MineRequest, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await _forward(
        client, "POST", "/v1/nuggets/mine", response_model=JobView, tenant=tenant, body=body
    )


@router.get("/jobs/{job_id}", response_model=JobView, summary="A job's state, progress and result")
async def job(job_id: str, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await _forward(
        client, "GET", f"/v1/jobs/{quote(job_id, safe='')}", response_model=JobView, tenant=tenant
    )


@router.post("/jobs/{job_id}/cancel", response_model=JobView, summary="Cancel a job")
async def cancel(job_id: str, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await _forward(
        client,
        "POST",
        f"/v1/jobs/{quote(job_id, safe='')}/cancel",
        response_model=JobView,
        tenant=tenant,
    )


@router.get(
    "/nuggets",
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
    return await _forward(
        client,
        "GET",
        f"/v1/nuggets?{urlencode(params)}",
        response_model=NuggetsView,
        tenant=tenant,
    )
