"""The gateway's reflection-reward and rubric-bank routes, and the stored-scoring reads:
parse, call the service (or forward to the store), respond."""

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response, StreamingResponse

from rubricate.common.auth import request_actor
from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.reflections.gateway.bank_proxy import BankProxy
from rubricate.reflections.gateway.service import ReflectionService
from rubricate.reflections.store.schemas import BankCurationIn
from rubricate_client.constants import MAX_STEP
from rubricate_client.endpoints import (
    BANK_ITEM,
    BANK_ITEM_CURATE,
    BANK_ITEM_HISTORY,
    BANK_ITEMS_LIST,
    BANK_RESTORE,
    BANK_RETRIEVE,
    BANK_SNAPSHOT,
    BANK_SNAPSHOT_EXPORT,
    BANK_SNAPSHOT_IMPORT,
    BANK_SNAPSHOTS,
    BANK_STATS,
    REFLECTIONS_SCORE,
    SCORING_GET,
    SCORINGS_LIST,
)
from rubricate_client.schemas.bank import (
    BankItemCurationResult,
    BankItemHistory,
    BankItemList,
    BankStats,
    RestoreRequest,
    RestoreResponse,
    RetrievedItem,
    SnapshotInfo,
    SnapshotList,
    SnapshotRequest,
)
from rubricate_client.schemas.curation import BankItemCurationRequest, BankStatus
from rubricate_client.schemas.limits import MAX_LIST_OFFSET, QUESTION_ID_LEN, SCORING_ID_LEN
from rubricate_client.schemas.reflections import (
    BankRetrieveRequest,
    BankRetrieveResponse,
    ReflectionScoreRequest,
    ReflectionScoreResponse,
)
from rubricate_client.schemas.scorings import ScoringList, StoredScoring

router = APIRouter(tags=["reflections"])
STATE_NAME = "reflections"
PROXY_STATE_NAME = "bank_proxy"


def get_service(request: Request) -> ReflectionService:
    service: ReflectionService = getattr(request.app.state, STATE_NAME)
    return service


def get_proxy(request: Request) -> BankProxy:
    proxy: BankProxy = getattr(request.app.state, PROXY_STATE_NAME)
    return proxy


ServiceDep = Annotated[ReflectionService, Depends(get_service)]
ProxyDep = Annotated[BankProxy, Depends(get_proxy)]
QuestionHashPath = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]


@router.post(
    REFLECTIONS_SCORE.path,
    response_model=ReflectionScoreResponse,
    summary="Judge reflection candidates; the best valid one goes to the rubric bank",
)
async def score_reflections(
    body: ReflectionScoreRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> ReflectionScoreResponse:
    return await service.score(body, tenant=tenant)


@router.post(
    BANK_RETRIEVE.path,
    response_model=BankRetrieveResponse,
    summary="Bank items for a question and the <reference_examples> block to prepend",
)
async def retrieve(
    body: BankRetrieveRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> BankRetrieveResponse:
    return await service.retrieve(body, tenant=tenant)


@router.get(
    BANK_ITEM.path,
    response_model=RetrievedItem,
    summary="The bank's item for a question hash (sha256 of the normalized question)",
)
async def get_item(
    question_hash: QuestionHashPath,
    service: ServiceDep,
    tenant: TenantDep = "default",
) -> RetrievedItem:
    return await service.store.request(
            "GET",
            f"/v1/bank/items/{question_hash}",
            response_model=RetrievedItem,
            headers={TENANT_HEADER: tenant},
        )


@router.get(
    BANK_ITEMS_LIST.path,
    response_model=BankItemList,
    summary="The tenant's bank items with their review state, the most recently updated first",
)
async def list_items(
    service: ServiceDep,
    tenant: TenantDep = "default",
    status: Annotated[BankStatus | None, Query()] = None,
    search: Annotated[
        str | None, Query(max_length=1000, description="a part of the question, any case")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> BankItemList:
    params = {"offset": str(offset), "limit": str(limit)}
    if status is not None:
        params["status"] = status
    if search:
        params["search"] = search
    return await service.store.request(
            "GET",
            "/v1/bank/items",
            params=params,
            response_model=BankItemList,
            headers={TENANT_HEADER: tenant},
        )


@router.post(
    BANK_ITEM_CURATE.path,
    response_model=BankItemCurationResult,
    summary="Approve, edit or retire a bank item; the caller is recorded as its author",
)
async def curate_item(
    question_hash: QuestionHashPath,
    body: BankItemCurationRequest,
    request: Request,
    service: ServiceDep,
    tenant: TenantDep = "default",
) -> BankItemCurationResult:
    internal = BankCurationIn(**body.model_dump(), author=request_actor(request))
    return await service.store.request(
            "POST",
            f"/v1/bank/items/{question_hash}/curate",
            json=internal.model_dump(mode="json"),
            response_model=BankItemCurationResult,
            headers={TENANT_HEADER: tenant},
            retry=False,  # not twice: a second approval is a second version
        )


@router.get(
    BANK_ITEM_HISTORY.path,
    response_model=BankItemHistory,
    summary="Every version of a bank item (who did what, when), oldest first",
)
async def item_history(
    question_hash: QuestionHashPath, service: ServiceDep, tenant: TenantDep = "default"
) -> BankItemHistory:
    return await service.store.request(
            "GET",
            f"/v1/bank/items/{question_hash}/history",
            response_model=BankItemHistory,
            headers={TENANT_HEADER: tenant},
        )


@router.get(
    SCORINGS_LIST.path,
    response_model=ScoringList,
    summary="A question's latest stored scorings: every rollout's judgments and justifications",
)
async def list_scorings(
    service: ServiceDep,
    question_id: Annotated[str, Query(min_length=1, max_length=QUESTION_ID_LEN)],
    tenant: TenantDep = "default",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> ScoringList:
    return await service.store.request(
            "GET",
            "/v1/scorings",
            params={"question_id": question_id, "limit": str(limit)},
            response_model=ScoringList,
            headers={TENANT_HEADER: tenant},
        )


@router.get(
    SCORING_GET.path,
    response_model=StoredScoring,
    summary="One stored scoring (unknown or expired: 404)",
)
async def get_scoring(
    scoring_id: Annotated[str, Path(min_length=1, max_length=SCORING_ID_LEN)],
    service: ServiceDep,
    tenant: TenantDep = "default",
) -> StoredScoring:
    return await service.store.request(
            "GET",
            f"/v1/scorings/{quote(scoring_id, safe='')}",
            response_model=StoredScoring,
            headers={TENANT_HEADER: tenant},
        )


@router.get(BANK_STATS.path, response_model=BankStats, summary="Bank size and indexed items")
async def stats(service: ServiceDep, tenant: TenantDep = "default") -> BankStats:
    return await service.store.request(
            "GET", "/v1/bank/stats", response_model=BankStats, headers={TENANT_HEADER: tenant}
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
    return await service.store.request(
            "POST",
            "/v1/bank/snapshots",
            json=body.model_dump(mode="json"),
            response_model=SnapshotInfo,
            headers={TENANT_HEADER: tenant},
        )


@router.get(BANK_SNAPSHOTS.path, response_model=SnapshotList, summary="The tenant's snapshots")
async def list_snapshots(service: ServiceDep, tenant: TenantDep = "default") -> SnapshotList:
    return await service.store.request(
            "GET",
            "/v1/bank/snapshots",
            response_model=SnapshotList,
            headers={TENANT_HEADER: tenant},
        )


@router.post(
    BANK_RESTORE.path,
    response_model=RestoreResponse,
    summary="Bring back the bank and the judge rubric buffers of a snapshot",
)
async def restore(
    body: RestoreRequest, service: ServiceDep, tenant: TenantDep = "default"
) -> RestoreResponse:
    return await service.store.request(
            "POST",
            "/v1/bank/restore",
            json=body.model_dump(mode="json"),
            response_model=RestoreResponse,
            headers={TENANT_HEADER: tenant},
        )


@router.get(
    BANK_SNAPSHOT_EXPORT.path,
    response_class=StreamingResponse,
    summary="A snapshot as JSONL",
)
async def export(
    step: Annotated[int, Path(ge=0, le=MAX_STEP)], proxy: ProxyDep, tenant: TenantDep = "default"
) -> StreamingResponse:
    chunks = await proxy.export(tenant=tenant, step=step)
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
    answer = await proxy.import_(tenant=tenant, body=body, replace=replace)
    return Response(
        content=answer.content, status_code=answer.status_code, media_type="application/json"
    )
