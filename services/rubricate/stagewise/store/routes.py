"""The store's buffer and stored-scoring routes: parse, run the unit of work in a worker
thread (`BufferStore`, `ScoringStore`), respond. A buffer read is served from the cache
(`BufferCache`) when it can be; every buffer write publishes the new buffer there.

Errors are answered once for the store app: the buffers' and scorings' own (`STAGEWISE_ERRORS`)
and a database that is down or saturated (503 `store_unavailable`,
`rubricate.store.app.DATABASE_ERRORS`)."""

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from rubricate.common.errors import ErrorMapping, ServiceError
from rubricate.common.routing import answered_as, found, route, state_service
from rubricate.common.tenancy import TenantDep
from rubricate.db.limits import QUESTION_ID_LEN, RUBRIC_ID_LEN, SCORING_ID_LEN
from rubricate.stagewise.store.endpoints import (
    BUFFER,
    BUFFER_ADD_RUBRICS,
    BUFFER_PRUNE,
    CURATIONS,
    QUESTIONS,
    RUBRIC_CURATE,
    SCORING,
    SCORING_PUT,
    SCORINGS,
)
from rubricate.stagewise.store.schemas import (
    MAX_SEARCH_CHARS,
    QUESTIONS_PAGE_DEFAULT,
    QUESTIONS_PAGE_MAX,
    AddRubricsRequest,
    CurateRubricRequest,
    PruneRequest,
    PruneResponse,
    QuestionQuery,
    ScoringIn,
)
from rubricate.stagewise.store.scorings import ScoringExistsError, ScoringStore
from rubricate.stagewise.store.service import (
    BufferCache,
    BufferNotFoundError,
    BufferStore,
    CurationConflictError,
    RubricNotFoundError,
)
from rubricate_client.headers import DEFAULT_TENANT
from rubricate_client.schemas.buffers import (
    BufferView,
    QuestionList,
    QuestionSort,
    RubricCurationResult,
)
from rubricate_client.schemas.curation import CurationList
from rubricate_client.schemas.limits import MAX_LIST_OFFSET
from rubricate_client.schemas.scorings import ScoringList, StoredScoring

router = APIRouter(tags=["buffers"])
scorings_router = APIRouter(tags=["scorings"])
MAX_SCORINGS_PAGE = 100


get_store = state_service(BufferStore, "store")
get_buffer_cache = state_service(BufferCache, "buffers")
get_scorings = state_service(ScoringStore, "scorings")
StoreDep = Annotated[BufferStore, Depends(get_store)]
CacheDep = Annotated[BufferCache, Depends(get_buffer_cache)]
ScoringsDep = Annotated[ScoringStore, Depends(get_scorings)]


QuestionIdPath = Annotated[
    str, Path(min_length=1, max_length=QUESTION_ID_LEN, description="The buffer's key.")
]
RubricIdPath = Annotated[str, Path(min_length=1, max_length=RUBRIC_ID_LEN)]
ScoringIdPath = Annotated[str, Path(min_length=1, max_length=SCORING_ID_LEN)]


def _scoring_exists(exc: Exception) -> ServiceError:
    return ServiceError(409, f"scoring {exc} exists", type="conflict", field="scoring_id")


STAGEWISE_ERRORS: ErrorMapping = {
    BufferNotFoundError: answered_as(404, "not_found"),
    RubricNotFoundError: answered_as(404, "not_found"),
    CurationConflictError: answered_as(409, "conflict"),
    ScoringExistsError: _scoring_exists,
}
"""The buffers' and stored scorings' errors as the store answers them, registered once on
the store app: an unknown buffer or rubric is a 404, a curation that does not apply or a
scoring id taken a 409."""


@route(router, BUFFER, summary="A question's rubric buffer (rubrics not pruned, per stage)")
async def get_buffer(
    question_id: QuestionIdPath,
    store: StoreDep,
    cache: CacheDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> BufferView:
    view = await cache.get(tenant, question_id)
    if view is None:
        view = await asyncio.to_thread(store.get, tenant, question_id)
        if view is None:
            raise BufferNotFoundError(tenant, question_id)
        await cache.publish(tenant, view)
    return view


@route(router, BUFFER_ADD_RUBRICS, summary="Add rubrics to a question's buffer (created if needed)")
async def add_rubrics(
    question_id: QuestionIdPath,
    body: AddRubricsRequest,
    store: StoreDep,
    cache: CacheDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> BufferView:
    view = await asyncio.to_thread(
        store.add, tenant, question_id, question=body.question, rubrics=body.rubrics, step=body.step
    )
    await cache.publish(tenant, view)
    return view


@route(
    router,
    BUFFER_PRUNE,
    summary="Record a group's rubric variances and prune actives over the caps",
)
async def prune(
    question_id: QuestionIdPath,
    body: PruneRequest,
    store: StoreDep,
    cache: CacheDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> PruneResponse:
    result = await asyncio.to_thread(
        store.prune,
        tenant,
        question_id,
        variances=body.variances,
        caps=body.caps.as_dict(),
        step=body.step,
    )
    await cache.publish(tenant, result.buffer)
    return result


@route(
    router, QUESTIONS, summary="The tenant's questions with their rubric counts, one page at a time"
)
async def list_questions(
    store: StoreDep,
    search: Annotated[str | None, Query(max_length=MAX_SEARCH_CHARS)] = None,
    sort: QuestionSort = "recent",
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=QUESTIONS_PAGE_MAX)] = QUESTIONS_PAGE_DEFAULT,
    tenant: TenantDep = DEFAULT_TENANT,
) -> QuestionList:
    query = QuestionQuery(
        search=(search or "").strip() or None, sort=sort, offset=offset, limit=limit
    )
    return await asyncio.to_thread(store.list_questions, tenant, query)


@route(
    router, RUBRIC_CURATE, summary="Pin, unpin, retire or edit one rubric (the author is recorded)"
)
async def curate(
    question_id: QuestionIdPath,
    rubric_id: RubricIdPath,
    body: CurateRubricRequest,
    store: StoreDep,
    cache: CacheDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> RubricCurationResult:
    result, view = await asyncio.to_thread(store.curate, tenant, question_id, rubric_id, body)
    await cache.publish(tenant, view)
    return result


@route(
    router,
    CURATIONS,
    summary="Who pinned, retired or edited which rubric of the question, newest first",
)
async def curations(
    question_id: QuestionIdPath, store: StoreDep, tenant: TenantDep = DEFAULT_TENANT
) -> CurationList:
    found = await asyncio.to_thread(store.curations, tenant, question_id)
    if found is None:
        raise BufferNotFoundError(tenant, question_id)
    return found


@route(
    scorings_router,
    SCORING_PUT,
    status_code=201,
    summary="Keep a stagewise scoring for reference by id",
)
async def put_scoring(
    body: ScoringIn, scorings: ScoringsDep, tenant: TenantDep = DEFAULT_TENANT
) -> StoredScoring:
    return await asyncio.to_thread(scorings.put_scoring, tenant, body)


@route(scorings_router, SCORINGS, summary="A question's latest stored scorings, newest first")
async def list_scorings(
    scorings: ScoringsDep,
    question_id: Annotated[str, Query(min_length=1, max_length=QUESTION_ID_LEN)],
    tenant: TenantDep = DEFAULT_TENANT,
    limit: Annotated[int, Query(ge=1, le=MAX_SCORINGS_PAGE)] = 20,
) -> ScoringList:
    found = await asyncio.to_thread(scorings.list_scorings, tenant, question_id, limit=limit)
    return ScoringList(scorings=found)


@route(scorings_router, SCORING)
async def get_scoring(
    scoring_id: ScoringIdPath, scorings: ScoringsDep, tenant: TenantDep = DEFAULT_TENANT
) -> StoredScoring:
    stored = await asyncio.to_thread(scorings.get_scoring, tenant, scoring_id)
    return found(stored, f"no stagewise scoring {scoring_id!r} (unknown or expired)")
