"""The store's HTTP routes: parse, call the buffer service, respond.

A database that is down or saturated is answered once for the store app (503
`store_unavailable`, `rubricate.store.app.DATABASE_ERRORS`), not at each call."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from rubricate.common.errors import ServiceError
from rubricate.common.tenancy import TenantDep
from rubricate.db.limits import QUESTION_ID_LEN, RUBRIC_ID_LEN
from rubricate.stagewise.store.endpoints import (
    BUFFER,
    BUFFER_ADD_RUBRICS,
    BUFFER_PRUNE,
    CURATIONS,
    QUESTIONS,
    RUBRIC_CURATE,
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
)
from rubricate.stagewise.store.service import (
    BufferNotFoundError,
    BufferService,
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

router = APIRouter(tags=["buffers"])


def get_buffers(request: Request) -> BufferService:
    service: BufferService = request.app.state.buffers
    return service


BuffersDep = Annotated[BufferService, Depends(get_buffers)]
QuestionIdPath = Annotated[
    str, Path(min_length=1, max_length=QUESTION_ID_LEN, description="The buffer's key.")
]
RubricIdPath = Annotated[str, Path(min_length=1, max_length=RUBRIC_ID_LEN)]


def _not_found(question_id: str) -> ServiceError:
    return ServiceError(
        404,
        f"no rubric buffer for question {question_id!r}",
        type="not_found",
    )


@router.get(
    BUFFER.path,
    response_model=BufferView,
    summary="A question's rubric buffer (rubrics not pruned, per stage)",
)
async def get_buffer(
    question_id: QuestionIdPath, buffers: BuffersDep, tenant: TenantDep = DEFAULT_TENANT
) -> BufferView:
    view = await buffers.get(tenant, question_id)
    if view is None:
        raise _not_found(question_id)
    return view


@router.post(
    BUFFER_ADD_RUBRICS.path,
    response_model=BufferView,
    summary="Add rubrics to a question's buffer (created if needed)",
)
async def add_rubrics(
    question_id: QuestionIdPath,
    body: AddRubricsRequest,
    buffers: BuffersDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> BufferView:
    return await buffers.add(
        tenant, question_id, question=body.question, rubrics=body.rubrics, step=body.step
    )


@router.post(
    BUFFER_PRUNE.path,
    response_model=PruneResponse,
    summary="Record a group's rubric variances and prune actives over the caps",
)
async def prune(
    question_id: QuestionIdPath,
    body: PruneRequest,
    buffers: BuffersDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> PruneResponse:
    try:
        return await buffers.prune(
            tenant,
            question_id,
            variances=body.variances,
            caps=body.caps.as_dict(),
            step=body.step,
        )
    except BufferNotFoundError as exc:
        raise _not_found(question_id) from exc


@router.get(
    QUESTIONS.path,
    response_model=QuestionList,
    summary="The tenant's questions with their rubric counts, one page at a time",
)
async def list_questions(
    buffers: BuffersDep,
    search: Annotated[str | None, Query(max_length=MAX_SEARCH_CHARS)] = None,
    sort: QuestionSort = "recent",
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=QUESTIONS_PAGE_MAX)] = QUESTIONS_PAGE_DEFAULT,
    tenant: TenantDep = DEFAULT_TENANT,
) -> QuestionList:
    query = QuestionQuery(
        search=(search or "").strip() or None, sort=sort, offset=offset, limit=limit
    )
    return await buffers.list_questions(tenant, query)


@router.post(
    RUBRIC_CURATE.path,
    response_model=RubricCurationResult,
    summary="Pin, unpin, retire or edit one rubric (the author is recorded)",
)
async def curate(
    question_id: QuestionIdPath,
    rubric_id: RubricIdPath,
    body: CurateRubricRequest,
    buffers: BuffersDep,
    tenant: TenantDep = DEFAULT_TENANT,
) -> RubricCurationResult:
    try:
        return await buffers.curate(tenant, question_id, rubric_id, body)
    except BufferNotFoundError as exc:
        raise _not_found(question_id) from exc
    except RubricNotFoundError as exc:
        raise ServiceError(404, str(exc), type="not_found") from exc
    except CurationConflictError as exc:
        raise ServiceError(409, str(exc), type="conflict") from exc


@router.get(
    CURATIONS.path,
    response_model=CurationList,
    summary="Who pinned, retired or edited which rubric of the question, newest first",
)
async def curations(
    question_id: QuestionIdPath, buffers: BuffersDep, tenant: TenantDep = DEFAULT_TENANT
) -> CurationList:
    found = await buffers.curations(tenant, question_id)
    if found is None:
        raise _not_found(question_id)
    return found
