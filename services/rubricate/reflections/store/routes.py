"""The store's bank, snapshot and stored-scoring routes: parse, call the bank service, respond."""

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse

from rubricate.common.errors import ErrorMapping, ServiceError
from rubricate.common.tenancy import TenantDep
from rubricate.db.limits import SCORING_ID_LEN
from rubricate.reflections.store.repository import (
    BankItemConflictError,
    BankItemNotFoundError,
    ScoringExistsError,
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
from rubricate.stagewise.store.schemas import ScoringIn
from rubricate_client.constants import MAX_STEP
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
from rubricate_client.schemas.limits import MAX_LIST_OFFSET, QUESTION_ID_LEN
from rubricate_client.schemas.scorings import ScoringList, StoredScoring

router = APIRouter(prefix="/v1", tags=["bank"])
STATE_NAME = "bank"


def get_bank(request: Request) -> BankService:
    service: BankService = getattr(request.app.state, STATE_NAME)
    return service


BankDep = Annotated[BankService, Depends(get_bank)]
QuestionHashPath = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
ScoringIdPath = Annotated[str, Path(min_length=1, max_length=SCORING_ID_LEN)]
MAX_BANK_PAGE = 200
MAX_SCORINGS_PAGE = 100


def _index_unavailable(exc: Exception) -> ServiceError:
    return ServiceError(
        503,
        f"bank vector index unavailable: {exc}",
        type="index_unavailable",
        headers={"Retry-After": "5"},
    )


def _scoring_exists(exc: Exception) -> ServiceError:
    return ServiceError(409, f"scoring {exc} exists", type="conflict", field="scoring_id")


def _as(status_code: int, type: str, field: str) -> Callable[[Exception], ServiceError]:
    return lambda exc: ServiceError(status_code, str(exc), type=type, field=field)


BANK_ERRORS: ErrorMapping = {
    IndexUnavailableError: _index_unavailable,
    SnapshotNotFoundError: _as(404, "not_found", "step"),
    SnapshotExistsError: _as(409, "conflict", "step"),
    ScoringExistsError: _scoring_exists,
    BankItemNotFoundError: _as(404, "not_found", "question_hash"),
    BankItemConflictError: _as(409, "conflict", "action"),
}
"""The bank service's errors as the store answers them, registered once on the store app:
the vector index down is a 503 the caller may retry, known conflicts are 404/409. (A
database down or saturated: `rubricate.store.app.DATABASE_ERRORS`.)"""


@router.post("/bank/items", response_model=OfferResponse, summary="Offer an accepted reflection")
async def offer(
    body: BankItemIn, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> OfferResponse:
    return await bank.offer(tenant, body)


@router.get(
    "/bank/items",
    response_model=BankItemList,
    summary="The tenant's bank items, the most recently updated first",
)
async def list_items(
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
    status: Annotated[BankStatus | None, Query()] = None,
    search: Annotated[str | None, Query(max_length=1000)] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_BANK_PAGE)] = 50,
) -> BankItemList:
    return await bank.list_items(tenant, status=status, search=search, offset=offset, limit=limit)


@router.post(
    "/bank/items/{question_hash}/curate",
    response_model=BankItemCurationResult,
    summary="Approve, edit or retire a bank item (the author comes in the body)",
)
async def curate_item(
    question_hash: QuestionHashPath,
    body: BankCurationIn,
    bank: BankDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> BankItemCurationResult:
    return await bank.curate(tenant, question_hash, body)


@router.get(
    "/bank/items/{question_hash}/history",
    response_model=BankItemHistory,
    summary="Every version of a bank item, oldest first",
)
async def item_history(
    question_hash: QuestionHashPath, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> BankItemHistory:
    found = await bank.history(tenant, question_hash)
    if found is None:
        raise ServiceError(
            404, f"no bank item for {question_hash}", type="not_found", field="question_hash"
        )
    return found


@router.get(
    "/bank/items/{question_hash}",
    response_model=RetrievedItem,
    summary="The bank's item for a question hash",
)
async def get_item(
    question_hash: QuestionHashPath, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> RetrievedItem:
    item = await bank.get(tenant, question_hash)
    if item is None:
        raise ServiceError(404, f"no bank item for {question_hash}", type="not_found")
    return item


@router.post(
    "/bank/retrieve",
    response_model=RetrieveResponse,
    summary="Within-episode (exact question) or cross-episode (top-k similar) items",
)
async def retrieve(
    body: RetrieveRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> RetrieveResponse:
    return await bank.retrieve(tenant, body)


@router.get("/bank/stats", response_model=BankStats)
async def stats(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> BankStats:
    return await bank.stats(tenant)


@router.post(
    "/bank/reindex",
    response_model=ReindexResponse,
    summary="Rebuild the tenant's vector index from the database",
)
async def reindex(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> ReindexResponse:
    return ReindexResponse(indexed=await bank.reindex(tenant))


@router.post(
    "/bank/snapshots",
    response_model=SnapshotInfo,
    status_code=201,
    summary="Snapshot the bank and the judge rubric buffers as of a training step",
)
async def snapshot(
    body: SnapshotRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> SnapshotInfo:
    return await bank.snapshot(tenant, body.step, replace=body.replace)


@router.get("/bank/snapshots", response_model=SnapshotList)
async def list_snapshots(bank: BankDep, tenant: TenantDep = DEFAULT_TENANT) -> SnapshotList:
    return SnapshotList(snapshots=await bank.list_snapshots(tenant))


@router.post(
    "/bank/restore",
    response_model=RestoreResponse,
    summary="Bring back the bank and the rubric buffers of a snapshot",
)
async def restore(
    body: RestoreRequest, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> RestoreResponse:
    return await bank.restore(tenant, body.step)


@router.get(
    "/bank/snapshots/{step}/export",
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


@router.post(
    "/bank/snapshots/import",
    response_model=SnapshotInfo,
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


@router.post(
    "/scorings",
    response_model=StoredScoring,
    status_code=201,
    summary="Keep a stagewise scoring for reference by id",
)
async def put_scoring(
    body: ScoringIn, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> StoredScoring:
    return await bank.put_scoring(tenant, body)


@router.get(
    "/scorings",
    response_model=ScoringList,
    summary="A question's latest stored scorings, newest first",
)
async def list_scorings(
    bank: BankDep,
    question_id: Annotated[str, Query(min_length=1, max_length=QUESTION_ID_LEN)],
    tenant: TenantDep = DEFAULT_TENANT,
    limit: Annotated[int, Query(ge=1, le=MAX_SCORINGS_PAGE)] = 20,
) -> ScoringList:
    return ScoringList(scorings=await bank.list_scorings(tenant, question_id, limit=limit))


@router.get("/scorings/{scoring_id}", response_model=StoredScoring)
async def get_scoring(
    scoring_id: ScoringIdPath, bank: BankDep, tenant: TenantDep = DEFAULT_TENANT
) -> StoredScoring:
    found = await bank.get_scoring(tenant, scoring_id)
    if found is None:
        raise ServiceError(
            404, f"no stagewise scoring {scoring_id!r} (unknown or expired)", type="not_found"
        )
    return found
