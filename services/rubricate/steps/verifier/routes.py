"""The verifier's step task routes: action verdicts and listwise ranking (a model failure is
answered by the model server's one `LLMError` handler, named after the route: `step_verify`,
`listwise_rank`)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.steps.verifier.endpoints import LISTWISE_RANK, STEP_VERDICTS
from rubricate.steps.verifier.schemas import (
    RankTaskRequest,
    RankTaskResponse,
    StepVerdictsRequest,
    StepVerdictsResponse,
)
from rubricate.steps.verifier.service import StepJudgeService

router = APIRouter(tags=["tasks"])

STATE_NAME = "step_judge"
"""The attribute of `app.state` holding the `StepJudgeService`."""

ServiceDep = Annotated[StepJudgeService, Depends(task_service(STATE_NAME))]


@router.post(STEP_VERDICTS.path, name=STEP_VERDICTS.name, response_model=StepVerdictsResponse)
async def step_verdicts(body: StepVerdictsRequest, service: ServiceDep) -> StepVerdictsResponse:
    return await service.verdicts(body)


@router.post(LISTWISE_RANK.path, name=LISTWISE_RANK.name, response_model=RankTaskResponse)
async def rank(body: RankTaskRequest, service: ServiceDep) -> RankTaskResponse:
    return await service.rank(body)
