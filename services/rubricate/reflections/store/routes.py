"""The store's bank and snapshot routes: parse, call the bank service, respond."""

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.types import DecoratedCallable

from rubricate.common.errors import ErrorMapping, ServiceError
from rubricate.common.tenancy import TenantDep
from rubricate.reflections.store.endpoints import (
    BANK_ITEM,
    BANK_ITEM_CURATE,
    BANK_ITEM_HISTORY,
    BANK_ITEMS,
    BANK_OFFER,
    BANK_REINDEX,
    BANK_RETRIEVE,
    BANK_STATS,
    SNAPSHOT_CREATE,
    SNAPSHOT_EXPORT,
    SNAPSHOT_IMPORT,
    SNAPSHOT_RESTORE,
    SNAPSHOTS,
)
from rubricate.reflections.store.repository import (
    BankItemConflictError,
    BankItemNotFoundError,
)
from rubricate.reflections.store.schemas import (
    BankCurationIn,
    BankItemIn,
    OfferResponse,
    ReindexResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from rubricate.reflections.store.service import BankService, IndexUnavailableError
from rubricate.reflections.store.snapshots import SnapshotExistsError, SnapshotNotFoundError
from rubricate_client.constants import MAX_STEP
from rubricate_client.endpoints import Endpoint
from rubricate_client.headers import DEFAULT_TENANT
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
from rubricate_client.schemas.curation import BankStatus
from rubricate_client.schemas.limits import MAX_LIST_OFFSET

router = APIRouter(tags=["bank"])
STATE_NAME = "bank"


def get_bank(request: Request) -> BankService:
    service: BankService = getattr(request.app.state, STATE_NAME)
    return service


BankDep = Annotated[BankService, Depends(get_bank)]


def _route(
    endpoint: Endpoint[Any, Any], **kwargs: Any
) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """The decorator of the route serving `endpoint`: its method, path and response model."""
    return router.api_route(
        endpoint.path, methods=[endpoint.method], response_model=endpoint.response, **kwargs
    )


QuestionHashPath = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
MAX_BANK_PAGE = 200


def _index_unavailable(exc: Exception) -> ServiceError:
    return ServiceError(
        503,
        f"bank vector index unavailable: {exc}",
        type="index_unavailable",
        headers={"Retry-After": "5"},
    )


def _as(status_code: int, type: str, field: str) -> Callable[[Exception], ServiceError]:
    return lambda exc: ServiceError(status_code, str(exc), type=type, field=field)


BANK_ERRORS: ErrorMapping = {
    IndexUnavailableError: _index_unavailable,
    SnapshotNotFoundError: _as(404, "not_found", "step"),
    SnapshotExistsError: _as(409, "conflict", "step"),
    BankItemNotFoundError: _as(404, "not_found", "question_hash"),
    BankItemConflictError: _as(409, "conflict", "action"),
}
"""The bank service's errors as the store answers them, registered once on the store app:
the vector index down is a 503 the caller may retry, known conflicts are 404/409. (A
database down or saturated: `rubricate.store.app.DATABASE_ERRORS`.)"""


@_route(BANK_OFFER, summary="Offer an accepted reflection")
async def offer(
    body: BankItemIn, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> OfferResponse:
    return await bank.offer(tenant, body)


@_route(BANK_ITEMS, summary="The tenant's bank items, the most recently updated first")
async def list_items(
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
    status: Annotated[BankStatus | None, Query()] = None,
    search: Annotated[str | None, Query(max_length=1000)] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_BANK_PAGE)] = 50,
) -> BankItemList:
    return await bank.list_items(tenant, status=status, search=search, offset=offset, limit=limit)


@_route(
    BANK_ITEM_CURATE, summary="Approve, edit or retire a bank item (the author comes in the body)"
)
async def curate_item(
    question_hash: QuestionHashPath,
    body: BankCurationIn,
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> BankItemCurationResult:
    return await bank.curate(tenant, question_hash, body)


@_route(BANK_ITEM_HISTORY, summary="Every version of a bank item, oldest first")
async def item_history(
    question_hash: QuestionHashPath, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> BankItemHistory:
    found = await bank.history(tenant, question_hash)
    if found is None:
        raise BankItemNotFoundError(f"no bank item for {question_hash}")
    return found


@_route(BANK_ITEM, summary="The bank's item for a question hash")
async def get_item(
    question_hash: QuestionHashPath, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> RetrievedItem:
    item = await bank.get(tenant, question_hash)
    if item is None:
        raise ServiceError(404, f"no bank item for {question_hash}", type="not_found")
    return item


@_route(
    BANK_RETRIEVE, summary="Within-episode (exact question) or cross-episode (top-k similar) items"
)
async def retrieve(
    body: RetrieveRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> RetrieveResponse:
    return await bank.retrieve(tenant, body)


@_route(BANK_STATS)
async def stats(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> BankStats:
    return await bank.stats(tenant)


@_route(BANK_REINDEX, summary="Rebuild the tenant's vector index from the database")
async def reindex(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> ReindexResponse:
    return ReindexResponse(indexed=await bank.reindex(tenant))


@_route(
    SNAPSHOT_CREATE,
    status_code=201,
    summary="Snapshot the bank and the judge rubric buffers as of a training step",
)
async def snapshot(
    body: SnapshotRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> SnapshotInfo:
    return await bank.snapshot(tenant, body.step, replace=body.replace)


@_route(SNAPSHOTS)
async def list_snapshots(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> SnapshotList:
    return SnapshotList(snapshots=await bank.list_snapshots(tenant))


@_route(SNAPSHOT_RESTORE, summary="Bring back the bank and the rubric buffers of a snapshot")
async def restore(
    body: RestoreRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> RestoreResponse:
    return await bank.restore(tenant, body.step)


@router.get(
    SNAPSHOT_EXPORT.path,
    response_class=StreamingResponse,
    summary="A snapshot as JSONL (header line, then one line per bank item or buffer)",
)
async def export(
    step: Annotated[int, Path(ge=0, le=MAX_STEP)], bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> StreamingResponse:
    lines = await bank.export_lines(tenant, step)
    return StreamingResponse(
        lines,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="bank-step-{step}.jsonl"'},
    )


@_route(
    SNAPSHOT_IMPORT,
    status_code=201,
    summary="Store an exported JSONL snapshot (restore it with /v1/bank/restore)",
)
async def import_snapshot(
    request: Request,
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
    replace: Annotated[bool, Query()] = False,
) -> SnapshotInfo:
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServiceError(422, "the snapshot file is not UTF-8", type="invalid_request") from exc
    return await bank.import_lines(tenant, text.splitlines(), replace=replace)
