"""Public routes of the step level (Co-ReAct, ARCO): parse, call the service, respond."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.common.routing import state_service
from rubricate.common.tenancy import TenantDep
from rubricate.steps.gateway.service import StepsService
from rubricate_client.endpoints import (
    LISTWISE_REWARD,
    RANK,
    STEPS_RUBRIC,
    STEPS_SCORE,
    STEPS_SEGMENT,
    STEPS_VERIFY,
)
from rubricate_client.schemas.steps import (
    ListwiseRewardRequest,
    ListwiseRewardResponse,
    RankRequest,
    RankResponse,
    ScoreRequest,
    ScoreResponse,
    SegmentRequest,
    SegmentResponse,
    StepRubricRequest,
    StepRubricResponse,
    VerifyRequest,
    VerifyResponse,
)

router = APIRouter(tags=["steps"])

STATE_NAME = "steps"
"""The attribute of `app.state` holding the `StepsService`."""

StepsDep = Annotated[StepsService, Depends(state_service(StepsService, STATE_NAME))]


@router.post(
    STEPS_SEGMENT.path,
    response_model=SegmentResponse,
    summary="Split a ReAct trajectory into steps with character spans (no model call)",
)
async def segment(body: SegmentRequest, service: StepsDep) -> SegmentResponse:
    return service.segment(body)


@router.post(
    STEPS_RUBRIC.path,
    response_model=StepRubricResponse,
    summary="A weighted rubric for the agent's next action, and the text to inject",
)
async def step_rubric(body: StepRubricRequest, service: StepsDep) -> StepRubricResponse:
    return await service.rubric(body)


@router.post(
    STEPS_VERIFY.path,
    response_model=VerifyResponse,
    summary="Verify a proposed action against a step rubric: verdicts, score, pass, feedback",
)
async def verify(
    body: VerifyRequest, service: StepsDep, tenant: TenantDep = "default"
) -> VerifyResponse:
    return await service.verify(body, tenant)


@router.post(
    STEPS_SCORE.path,
    response_model=ScoreResponse,
    summary="Per-step rubrics, verdicts and step rewards that sum to the outcome (ARCO)",
)
async def score(
    body: ScoreRequest, service: StepsDep, tenant: TenantDep = "default"
) -> ScoreResponse:
    return await service.score(body, tenant)


@router.post(
    LISTWISE_REWARD.path,
    response_model=ListwiseRewardResponse,
    summary="GRPO rewards of sampled rubrics: Spearman vs consensus, atomicity, format",
)
async def listwise_reward(
    body: ListwiseRewardRequest, service: StepsDep, tenant: TenantDep = "default"
) -> ListwiseRewardResponse:
    return await service.ranking.listwise_reward(body, tenant)


@router.post(
    RANK.path,
    response_model=RankResponse,
    summary="Multi-judge listwise ranking of a candidate slate, Borda consensus",
)
async def rank(body: RankRequest, service: StepsDep, tenant: TenantDep = "default") -> RankResponse:
    return await service.ranking.rank(body, tenant)
