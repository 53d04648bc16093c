"""The gateway's public HTTP routes: parse, call the service object, respond."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.common.upstream import UpstreamError, upstream_failure
from rubricate.stagewise.domain.ssgrpo import (
    group_advantages,
    stage_returns,
    validate_lambda,
    validate_scores,
)
from rubricate.stagewise.gateway.service import StagewiseService
from rubricate_client.endpoints import GET_BUFFER, STAGEWISE_ADVANTAGES, STAGEWISE_SCORE
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.stagewise import (
    AdvantagesRequest,
    AdvantagesResponse,
    QuestionId,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
)

router = APIRouter(tags=["rewards"])


def get_stagewise(request: Request) -> StagewiseService:
    service: StagewiseService = request.app.state.stagewise
    return service


StagewiseDep = Annotated[StagewiseService, Depends(get_stagewise)]


@router.post(
    STAGEWISE_SCORE.path,
    response_model=StagewiseScoreResponse,
    response_model_by_alias=True,
    summary="Stagewise rubric scores, SS-GRPO returns and advantages for a rollout group",
)
async def stagewise_score(
    body: StagewiseScoreRequest, service: StagewiseDep, tenant: TenantDep = "default"
) -> StagewiseScoreResponse:
    try:
        return await service.score(body, tenant=tenant)
    except UpstreamError as exc:
        raise upstream_failure(exc) from exc


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
async def get_buffer(
    question_id: Annotated[QuestionId, Path()],
    service: StagewiseDep,
    tenant: TenantDep = "default",
) -> BufferView:
    try:
        return await service.up.store.request(
            "GET",
            f"/v1/buffers/{question_id}",
            response_model=BufferView,
            headers={TENANT_HEADER: tenant},
        )
    except UpstreamError as exc:
        raise upstream_failure(exc) from exc
