"""The gateway's reflection-reward and rubric-bank routes, and the stored-scoring reads:
parse, call the service, respond. The bank, snapshot and scoring reads and writes are pure
proxy routes: each forwards to its store route (`reflections.store.endpoints`,
`stagewise.store.endpoints`) for the caller's tenant in one line (`common.forward`); the
snapshot export and import stream their bodies (`bank_proxy`)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response, StreamingResponse

from rubricate.common.auth import request_actor
from rubricate.common.forward import StoreDep
from rubricate.common.routing import state_service
from rubricate.common.tenancy import TenantDep
from rubricate.reflections.gateway.bank_proxy import BankProxy
from rubricate.reflections.gateway.service import ReflectionService
from rubricate.reflections.store import endpoints as bank_store
from rubricate.reflections.store.schemas import BankCurationIn
from rubricate.stagewise.store import endpoints as scoring_store
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


ServiceDep = Annotated[ReflectionService, Depends(state_service(ReflectionService, STATE_NAME))]
ProxyDep = Annotated[BankProxy, Depends(state_service(BankProxy, PROXY_STATE_NAME))]
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
async def get_item(question_hash: QuestionHashPath, store: StoreDep) -> RetrievedItem:
    return await store(bank_store.BANK_ITEM, path={"question_hash": question_hash})


@router.get(
    BANK_ITEMS_LIST.path,
    response_model=BankItemList,
    summary="The tenant's bank items with their review state, the most recently updated first",
)
async def list_items(
    store: StoreDep,
    status: Annotated[BankStatus | None, Query()] = None,
    search: Annotated[
        str | None, Query(max_length=1000, description="a part of the question, any case")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> BankItemList:
    query = {"offset": offset, "limit": limit, "status": status, "search": search or None}
    return await store(bank_store.BANK_ITEMS, query=query)


@router.post(
    BANK_ITEM_CURATE.path,
    response_model=BankItemCurationResult,
    summary="Approve, edit or retire a bank item; the caller is recorded as its author",
)
async def curate_item(
    question_hash: QuestionHashPath,
    body: BankItemCurationRequest,
    request: Request,
    store: StoreDep,
) -> BankItemCurationResult:
    return await store(
        bank_store.BANK_ITEM_CURATE,
        path={"question_hash": question_hash},
        body=BankCurationIn(**body.model_dump(), author=request_actor(request)),
        retry=False,  # not twice: a second approval is a second version
    )


@router.get(
    BANK_ITEM_HISTORY.path,
    response_model=BankItemHistory,
    summary="Every version of a bank item (who did what, when), oldest first",
)
async def item_history(question_hash: QuestionHashPath, store: StoreDep) -> BankItemHistory:
    return await store(bank_store.BANK_ITEM_HISTORY, path={"question_hash": question_hash})


@router.get(
    SCORINGS_LIST.path,
    response_model=ScoringList,
    summary="A question's latest stored scorings: every rollout's judgments and justifications",
)
async def list_scorings(
    store: StoreDep,
    question_id: Annotated[str, Query(min_length=1, max_length=QUESTION_ID_LEN)],
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> ScoringList:
    return await store(scoring_store.SCORINGS, query={"question_id": question_id, "limit": limit})


@router.get(
    SCORING_GET.path,
    response_model=StoredScoring,
    summary="One stored scoring (unknown or expired: 404)",
)
async def get_scoring(
    scoring_id: Annotated[str, Path(min_length=1, max_length=SCORING_ID_LEN)], store: StoreDep
) -> StoredScoring:
    return await store(scoring_store.SCORING, path={"scoring_id": scoring_id})


@router.get(BANK_STATS.path, response_model=BankStats, summary="Bank size and indexed items")
async def stats(store: StoreDep) -> BankStats:
    return await store(bank_store.BANK_STATS)


@router.post(
    BANK_SNAPSHOT.path,
    response_model=SnapshotInfo,
    status_code=201,
    summary="Snapshot the bank and the judge rubric buffers as of a training step",
)
async def snapshot(body: SnapshotRequest, store: StoreDep) -> SnapshotInfo:
    return await store(bank_store.SNAPSHOT_CREATE, body=body)


@router.get(BANK_SNAPSHOTS.path, response_model=SnapshotList, summary="The tenant's snapshots")
async def list_snapshots(store: StoreDep) -> SnapshotList:
    return await store(bank_store.SNAPSHOTS)


@router.post(
    BANK_RESTORE.path,
    response_model=RestoreResponse,
    summary="Bring back the bank and the judge rubric buffers of a snapshot",
)
async def restore(body: RestoreRequest, store: StoreDep) -> RestoreResponse:
    return await store(bank_store.SNAPSHOT_RESTORE, body=body)


@router.get(
    BANK_SNAPSHOT_EXPORT.path,
    response_class=StreamingResponse,
    summary="A snapshot as JSONL",
)
async def export(
    step: Annotated[int, Path(ge=0, le=MAX_STEP)], proxy: ProxyDep, tenant: TenantDep = "default"
) -> StreamingResponse:
    return await proxy.export(tenant=tenant, step=step)


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
    return await proxy.import_(tenant=tenant, body=await request.body(), replace=replace)
