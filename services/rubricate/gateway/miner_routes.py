"""The gateway's mining routes: corpora, mining jobs and mined nuggets, served by the miner."""

import asyncio
from typing import Annotated, TypeVar
from urllib.parse import quote

import httpx
from fastapi import APIRouter, Depends, Query, Request, status
from pydantic import BaseModel

from rubricate.common.auth import internal_headers
from rubricate.common.errors import ServiceError
from rubricate.common.logging import forward_headers
from rubricate.common.tenancy import TENANT_HEADER, TenantDep
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


class MinerClient:
    """Calls the miner and hands its errors on with their status, type and field."""

    def __init__(
        self, settings: GatewaySettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.retries = settings.upstream_retries
        self._client = httpx.AsyncClient(
            base_url=settings.miner_url,
            timeout=httpx.Timeout(settings.store_timeout_s, connect=10.0),
            transport=transport,
            headers=internal_headers(),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

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
        attempt = 0
        while True:
            try:
                response = await self._client.request(
                    method,
                    path,
                    json=None if body is None else body.model_dump(mode="json", exclude_none=True),
                    params=params,
                    headers=forward_headers({TENANT_HEADER: tenant}),  # + X-Request-ID
                )
                break
            except httpx.TransportError as exc:
                if method != "GET" or attempt >= self.retries:
                    raise ServiceError(
                        503,
                        f"miner unreachable: {type(exc).__name__}: {exc}",
                        type="upstream_unreachable",
                        headers={"Retry-After": "5"},
                    ) from exc
                attempt += 1
                await asyncio.sleep(0.25 * 2**attempt)
        if response.status_code < 400:
            return response_model.model_validate_json(response.content)
        try:
            error = response.json()["error"]
            message, kind = str(error["message"]), str(error.get("type") or "upstream_error")
            field = error.get("field")
        except (ValueError, KeyError, TypeError):
            message, kind, field = response.text[:500], "upstream_error", None
        if response.status_code >= 500:
            raise ServiceError(
                502 if response.status_code != 503 else 503,
                f"miner failed: {message}",
                type=kind,
                headers={"Retry-After": "5"},
            )
        raise ServiceError(response.status_code, message, type=kind, field=field)


def get_client(request: Request) -> MinerClient:
    client: MinerClient = getattr(request.app.state, STATE_NAME)
    return client


ClientDep = Annotated[MinerClient, Depends(get_client)]


@router.post(
    "/corpora",
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(body: IngestRequest, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
        "POST", "/v1/corpora", response_model=JobView, tenant=tenant, body=body
    )


@router.get("/corpora", response_model=CorpusList, summary="The tenant's corpora")
async def corpora(client: ClientDep, tenant: TenantDep = "default") -> CorpusList:
    return await client.request("GET", "/v1/corpora", response_model=CorpusList, tenant=tenant)


@router.post(
    "/nuggets/mine",
    response_model=JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Mine a question's nuggets from a corpus (Search-Gen-V §3.2) as a job",
)
async def mine(body: MineRequest, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
        "POST", "/v1/nuggets/mine", response_model=JobView, tenant=tenant, body=body
    )


@router.get("/jobs/{job_id}", response_model=JobView, summary="A job's state, progress and result")
async def job(job_id: str, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
        "GET", f"/v1/jobs/{quote(job_id, safe='')}", response_model=JobView, tenant=tenant
    )


@router.post("/jobs/{job_id}/cancel", response_model=JobView, summary="Cancel a job")
async def cancel(job_id: str, client: ClientDep, tenant: TenantDep = "default") -> JobView:
    return await client.request(
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
    return await client.request(
        "GET", "/v1/nuggets", response_model=NuggetsView, tenant=tenant, params=params
    )
