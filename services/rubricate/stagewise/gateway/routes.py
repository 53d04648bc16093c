"""The gateway's public stagewise routes: parse, call the service object, respond. The buffer
read, the question list and curation are pure proxies: one call of the store's route
(`stagewise.store.endpoints`) for the caller's tenant, through `common.forward.Forwarder`."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from rubricate.common.auth import request_actor
from rubricate.common.forward import StoreDep
from rubricate.common.routing import state_service
from rubricate.common.tenancy import TenantDep
from rubricate.common.tenant_limits import admit_rollouts
from rubricate.stagewise.domain.ssgrpo import (
    group_advantages,
    stage_returns,
    validate_lambda,
    validate_scores,
)
from rubricate.stagewise.gateway.service import StagewiseService
from rubricate.stagewise.store import endpoints as store_api
from rubricate.stagewise.store.schemas import (
    MAX_SEARCH_CHARS,
    QUESTIONS_PAGE_DEFAULT,
    QUESTIONS_PAGE_MAX,
    CurateRubricRequest,
)
from rubricate_client.endpoints import (
    GET_BUFFER,
    QUESTIONS_LIST,
    RUBRIC_CURATE,
    RUBRIC_CURATIONS,
    STAGEWISE_ADVANTAGES,
    STAGEWISE_SCORE,
)
from rubricate_client.schemas.buffers import (
    BufferView,
    QuestionList,
    QuestionSort,
    RubricCurationResult,
)
from rubricate_client.schemas.curation import CurationList, RubricCurationRequest
from rubricate_client.schemas.limits import MAX_LIST_OFFSET, RUBRIC_ID_LEN
from rubricate_client.schemas.stagewise import (
    AdvantagesRequest,
    AdvantagesResponse,
    QuestionId,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
)

router = APIRouter(tags=["rewards"])


StagewiseDep = Annotated[StagewiseService, Depends(state_service(StagewiseService, "stagewise"))]
RubricIdPath = Annotated[str, Path(min_length=1, max_length=RUBRIC_ID_LEN)]


@router.post(
    STAGEWISE_SCORE.path,
    response_model=StagewiseScoreResponse,
    response_model_by_alias=True,
    summary="Stagewise rubric scores, SS-GRPO returns and advantages for a rollout group",
)
async def stagewise_score(
    body: StagewiseScoreRequest,
    request: Request,
    service: StagewiseDep,
    tenant: TenantDep = "default",
) -> StagewiseScoreResponse:
    admit_rollouts(request, len(body.rollouts))
    return await service.score(body, tenant=tenant)


@router.post(
    STAGEWISE_ADVANTAGES.path,
    response_model=AdvantagesResponse,
    summary="SS-GRPO returns and advantages from your own stage scores",
)
async def advantages(body: AdvantagesRequest) -> AdvantagesResponse:
    scores = validate_scores(body.scores)
    lam = None if body.lambda_ is None else validate_lambda(body.lambda_)
    returns = stage_returns(scores, lam=lam, mode=body.mode)
    return AdvantagesResponse(returns=returns, advantages=group_advantages(returns))


@router.get(
    GET_BUFFER.path,
    response_model=BufferView,
    summary="The question's current judge rubric buffer, per stage",
)
async def get_buffer(question_id: Annotated[QuestionId, Path()], store: StoreDep) -> BufferView:
    return await store(store_api.BUFFER, path={"question_id": question_id})


@router.get(
    QUESTIONS_LIST.path,
    response_model=QuestionList,
    summary="The tenant's questions with their buffer sizes, one page at a time",
)
async def list_questions(
    store: StoreDep,
    search: Annotated[
        str | None,
        Query(
            max_length=MAX_SEARCH_CHARS,
            description="A case-insensitive substring of the question id or text.",
        ),
    ] = None,
    sort: Annotated[
        QuestionSort, Query(description="recent | question_id | rubrics (most live first).")
    ] = "recent",
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=QUESTIONS_PAGE_MAX)] = QUESTIONS_PAGE_DEFAULT,
) -> QuestionList:
    search = (search or "").strip() or None
    query = {"sort": sort, "offset": offset, "limit": limit, "search": search}
    return await store(store_api.QUESTIONS, query=query)


@router.post(
    RUBRIC_CURATE.path,
    response_model=RubricCurationResult,
    summary="Pin, unpin, retire or edit one rubric of a question's buffer",
)
async def curate_rubric(
    question_id: Annotated[QuestionId, Path()],
    rubric_id: RubricIdPath,
    body: RubricCurationRequest,
    request: Request,
    store: StoreDep,
) -> RubricCurationResult:
    # the author is named by the gateway, never the caller; a curation is sent once
    change = CurateRubricRequest.model_validate(
        {**body.model_dump(), "author": request_actor(request)}
    )
    path = {"question_id": question_id, "rubric_id": rubric_id}
    return await store(store_api.RUBRIC_CURATE, path=path, body=change, retry=False)


@router.get(
    RUBRIC_CURATIONS.path,
    response_model=CurationList,
    summary="Who pinned, retired or edited which rubric of the question, newest first",
)
async def rubric_curations(
    question_id: Annotated[QuestionId, Path()], store: StoreDep
) -> CurationList:
    return await store(store_api.CURATIONS, path={"question_id": question_id})
