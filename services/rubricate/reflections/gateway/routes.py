"""The gateway's reflection-reward and rubric-bank routes: parse, call the service, respond."""

from collections.abc import Awaitable
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response, StreamingResponse

from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.common.upstream import UpstreamError, upstream_failure
from rubricate.reflections.gateway.bank_proxy import BankProxy
from rubricate.reflections.gateway.service import ReflectionService
from rubricate_client.constants import MAX_STEP
from rubricate_client.endpoints import (
    BANK_ITEM,
    BANK_RESTORE,
    BANK_RETRIEVE,
    BANK_SNAPSHOT,
    BANK_SNAPSHOT_EXPORT,
    BANK_SNAPSHOT_IMPORT,
    BANK_SNAPSHOTS,
    BANK_STATS,
    REFLECTIONS_SCORE,
)
from rubricate_client.schemas.bank import (
    BankStats,
    RestoreRequest,
    RestoreResponse,
    RetrievedItem,
    SnapshotInfo,
    SnapshotList,
    SnapshotRequest,
)
from rubricate_client.schemas.reflections import (
    BankRetrieveRequest,
    BankRetrieveResponse,
    ReflectionScoreRequest,
    ReflectionScoreResponse,
)

router = APIRouter(tags=["reflections"])
STATE_NAME = "reflections"
PROXY_STATE_NAME = "bank_proxy"

T = TypeVar("T")


def get_service(request: Request) -> ReflectionService:
    service: ReflectionService = getattr(request.app.state, STATE_NAME)
    return service


def get_proxy(request: Request) -> BankProxy:
    proxy: BankProxy = getattr(request.app.state, PROXY_STATE_NAME)
    return proxy


ServiceDep = Annotated[ReflectionService, Depends(get_service)]
ProxyDep = Annotated[BankProxy, Depends(get_proxy)]


async def _upstream(call: Awaitable[T]) -> T:
    try:
        return await call
    except UpstreamError as exc:
        raise upstream_failure(exc) from exc


@router.post(
    REFLECTIONS_SCORE.path,
    response_model=ReflectionScoreResponse,
    summary="Judge reflection candidates; the best valid one goes to the rubric bank",
)
async def score_reflections(
    body: ReflectionScoreRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> ReflectionScoreResponse:
    return await _upstream(service.score(body, tenant=tenant))


@router.post(
    BANK_RETRIEVE.path,
    response_model=BankRetrieveResponse,
    summary="Bank items for a question and the <reference_examples> block to prepend",
)
async def retrieve(
    body: BankRetrieveRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> BankRetrieveResponse:
    return await _upstream(service.retrieve(body, tenant=tenant))


@router.get(
    BANK_ITEM.path,
    response_model=RetrievedItem,
    summary="The bank's item for a question hash (sha256 of the normalized question)",
)
async def get_item(
    question_hash: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")],
    service: ServiceDep,
    tenant: TenantDep = "default",
) -> RetrievedItem:
    return await _upstream(
        service.store.request(
            "GET",
            f"/v1/bank/items/{question_hash}",
            response_model=RetrievedItem,
            headers={TENANT_HEADER: tenant},
        )
    )


@router.get(BANK_STATS.path, response_model=BankStats, summary="Bank size and indexed items")
async def stats(service: ServiceDep, tenant: TenantDep = "default") -> BankStats:
    return await _upstream(
        service.store.request(
            "GET", "/v1/bank/stats", response_model=BankStats, headers={TENANT_HEADER: tenant}
        )
    )


@router.post(
    BANK_SNAPSHOT.path,
    response_model=SnapshotInfo,
    status_code=201,
    summary="Snapshot the bank and the judge rubric buffers as of a training step",
)
async def snapshot(
    body: SnapshotRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> SnapshotInfo:
    return await _upstream(
        service.store.request(
            "POST",
            "/v1/bank/snapshots",
            json=body.model_dump(mode="json"),
            response_model=SnapshotInfo,
            headers={TENANT_HEADER: tenant},
        )
    )


@router.get(BANK_SNAPSHOTS.path, response_model=SnapshotList, summary="The tenant's snapshots")
async def list_snapshots(service: ServiceDep, tenant: TenantDep = "default") -> SnapshotList:
    return await _upstream(
        service.store.request(
            "GET",
            "/v1/bank/snapshots",
            response_model=SnapshotList,
            headers={TENANT_HEADER: tenant},
        )
    )


@router.post(
    BANK_RESTORE.path,
    response_model=RestoreResponse,
    summary="Bring back the bank and the judge rubric buffers of a snapshot",
)
async def restore(
    body: RestoreRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> RestoreResponse:
    return await _upstream(
        service.store.request(
            "POST",
            "/v1/bank/restore",
            json=body.model_dump(mode="json"),
            response_model=RestoreResponse,
            headers={TENANT_HEADER: tenant},
        )
    )


@router.get(
    BANK_SNAPSHOT_EXPORT.path,
    response_class=StreamingResponse,
    summary="A snapshot as JSONL",
)
async def export(
    step: Annotated[int, Path(ge=0, le=MAX_STEP)], proxy: ProxyDep, tenant: TenantDep = "default"
) -> StreamingResponse:
    chunks = await _upstream(proxy.export(tenant=tenant, step=step))
    return StreamingResponse(
        chunks,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="bank-step-{step}.jsonl"'},
    )


@router.post(
    BANK_SNAPSHOT_IMPORT.path,
    response_model=SnapshotInfo,
    status_code=201,
    summary="Store an exported JSONL snapshot (then restore it by step)",
)
async def import_snapshot(
    request: Request,
    proxy: ProxyDep,
    tenant: TenantDep = "default",
    replace: Annotated[bool, Query()] = False,
) -> Response:
    body = await request.body()
    answer = await _upstream(proxy.import_(tenant=tenant, body=body, replace=replace))
    return Response(
        content=answer.content, status_code=answer.status_code, media_type="application/json"
    )
