"""The gateway's public HTTP routes: parse, call the service object, respond."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from rubricate.common.errors import ServiceError
from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.core.ssgrpo import group_advantages, stage_returns, validate_lambda, validate_scores
from rubricate.gateway.clients import UpstreamError
from rubricate.gateway.schemas import (
    AdvantagesRequest,
    AdvantagesResponse,
    QuestionId,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
)
from rubricate.gateway.stagewise import StagewiseService
from rubricate.store.schemas import BufferView

router = APIRouter(prefix="/v1", tags=["rewards"])


def get_stagewise(request: Request) -> StagewiseService:
    service: StagewiseService = request.app.state.stagewise
    return service


StagewiseDep = Annotated[StagewiseService, Depends(get_stagewise)]


def upstream_failure(exc: UpstreamError) -> ServiceError:
    if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
        return ServiceError(exc.status, exc.message, type=exc.type)
    return ServiceError(
        503 if exc.status in (None, 503) else 502,
        f"{exc.service} failed: {exc.message}",
        type=exc.type,
        usage=exc.usage,
        headers={"Retry-After": "5"},
    )


@router.post(
    "/stagewise/score",
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
    "/advantages/stagewise",
    response_model=AdvantagesResponse,
    summary="SS-GRPO returns and advantages from your own stage scores",
)
async def advantages(body: AdvantagesRequest) -> AdvantagesResponse:
    scores = validate_scores(body.scores)
    lam = None if body.lambda_ is None else validate_lambda(body.lambda_)
    returns = stage_returns(scores, lam=lam, mode=body.mode)
    return AdvantagesResponse(returns=returns, advantages=group_advantages(returns))


@router.get(
    "/buffers/{question_id}",
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
