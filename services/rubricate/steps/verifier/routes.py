"""The verifier's step task routes: action verdicts and listwise ranking."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.steps.verifier.schemas import (
    RankTaskRequest,
    RankTaskResponse,
    StepVerdictsRequest,
    StepVerdictsResponse,
)
from rubricate.steps.verifier.service import RANK_TASK, VERIFY_TASK, StepJudgeService

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])

STATE_NAME = "step_judge"
"""The attribute of `app.state` holding the `StepJudgeService`."""


def get_service(request: Request) -> StepJudgeService:
    service: StepJudgeService = getattr(request.app.state, STATE_NAME)
    return service


ServiceDep = Annotated[StepJudgeService, Depends(get_service)]


@router.post("/step-verdicts", response_model=StepVerdictsResponse)
async def step_verdicts(body: StepVerdictsRequest, service: ServiceDep) -> StepVerdictsResponse:
    try:
        return await service.verdicts(body)
    except LLMError as exc:
        raise as_service_error(exc, task=VERIFY_TASK) from exc


@router.post("/rank", response_model=RankTaskResponse)
async def rank(body: RankTaskRequest, service: ServiceDep) -> RankTaskResponse:
    try:
        return await service.rank(body)
    except LLMError as exc:
        raise as_service_error(exc, task=RANK_TASK) from exc
