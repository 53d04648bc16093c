"""The store's bank and snapshot routes: parse, call the bank service, respond."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse

from rubricate.common.errors import ErrorMapping, ServiceError
from rubricate.common.routing import answered_as, found, route, state_service
from rubricate.common.tenancy import TenantDep
from rubricate.reflections.store import schemas
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
from rubricate.reflections.store.service import BankService, IndexUnavailableError
from rubricate.reflections.store.snapshots import SnapshotExistsError, SnapshotNotFoundError
from rubricate_client.constants import MAX_STEP
from rubricate_client.headers import DEFAULT_TENANT
from rubricate_client.schemas import bank as views
from rubricate_client.schemas.curation import BankStatus
from rubricate_client.schemas.limits import MAX_LIST_OFFSET

router = APIRouter(tags=["bank"])
STATE_NAME = "bank"
get_bank = state_service(BankService, STATE_NAME)
BankDep = Annotated[BankService, Depends(get_bank)]


QuestionHashPath = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
MAX_BANK_PAGE = 200


def _index_unavailable(exc: Exception) -> ServiceError:
    return ServiceError(
        503,
        f"bank vector index unavailable: {exc}",
        type="index_unavailable",
        headers={"Retry-After": "5"},
    )


BANK_ERRORS: ErrorMapping = {
    IndexUnavailableError: _index_unavailable,
    SnapshotNotFoundError: answered_as(404, "not_found", "step"),
    SnapshotExistsError: answered_as(409, "conflict", "step"),
    BankItemNotFoundError: answered_as(404, "not_found", "question_hash"),
    BankItemConflictError: answered_as(409, "conflict", "action"),
}
"""The bank service's errors as the store answers them, registered once on the store app:
the vector index down is a 503 the caller may retry, known conflicts are 404/409. (A
database down or saturated: `rubricate.store.app.DATABASE_ERRORS`.)"""


@route(router, BANK_OFFER, summary="Offer an accepted reflection")
async def offer(
    body: schemas.BankItemIn, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> schemas.OfferResponse:
    return await bank.offer(tenant, body)


@route(router, BANK_ITEMS, summary="The tenant's bank items, the most recently updated first")
async def list_items(
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
    status: Annotated[BankStatus | None, Query()] = None,
    search: Annotated[str | None, Query(max_length=1000)] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_BANK_PAGE)] = 50,
) -> views.BankItemList:
    return await bank.list_items(tenant, status=status, search=search, offset=offset, limit=limit)


@route(
    router,
    BANK_ITEM_CURATE,
    summary="Approve, edit or retire a bank item (the author comes in the body)",
)
async def curate_item(
    question_hash: QuestionHashPath,
    body: schemas.BankCurationIn,
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> views.BankItemCurationResult:
    return await bank.curate(tenant, question_hash, body)


@route(router, BANK_ITEM_HISTORY, summary="Every version of a bank item, oldest first")
async def item_history(
    question_hash: QuestionHashPath, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> views.BankItemHistory:
    versions = await bank.history(tenant, question_hash)
    if versions is None:
        raise BankItemNotFoundError(f"no bank item for {question_hash}")
    return versions


@route(router, BANK_ITEM, summary="The bank's item for a question hash")
async def get_item(
    question_hash: QuestionHashPath, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> views.RetrievedItem:
    return found(await bank.get(tenant, question_hash), f"no bank item for {question_hash}")


@route(
    router,
    BANK_RETRIEVE,
    summary="Within-episode (exact question) or cross-episode (top-k similar) items",
)
async def retrieve(
    body: schemas.RetrieveRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> schemas.RetrieveResponse:
    return await bank.retrieve(tenant, body)


@route(router, BANK_STATS)
async def stats(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> views.BankStats:
    return await bank.stats(tenant)


@route(router, BANK_REINDEX, summary="Rebuild the tenant's vector index from the database")
async def reindex(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> schemas.ReindexResponse:
    return schemas.ReindexResponse(indexed=await bank.reindex(tenant))


@route(
    router,
    SNAPSHOT_CREATE,
    status_code=201,
    summary="Snapshot the bank and the judge rubric buffers as of a training step",
)
async def snapshot(
    body: views.SnapshotRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> views.SnapshotInfo:
    return await bank.snapshot(tenant, body.step, replace=body.replace)


@route(router, SNAPSHOTS)
async def list_snapshots(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> views.SnapshotList:
    return views.SnapshotList(snapshots=await bank.list_snapshots(tenant))


@route(router, SNAPSHOT_RESTORE, summary="Bring back the bank and the rubric buffers of a snapshot")
async def restore(
    body: views.RestoreRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> views.RestoreResponse:
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


@route(
    router,
    SNAPSHOT_IMPORT,
    status_code=201,
    summary="Store an exported JSONL snapshot (restore it with /v1/bank/restore)",
)
async def import_snapshot(
    request: Request,
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
    replace: Annotated[bool, Query()] = False,
) -> views.SnapshotInfo:
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServiceError(422, "the snapshot file is not UTF-8", type="invalid_request") from exc
    return await bank.import_lines(tenant, text.splitlines(), replace=replace)
