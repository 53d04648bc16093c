"""The verifier's stagewise task route: stage scores of one trajectory."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.stagewise.verifier.endpoints import STAGE_SCORES
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate.stagewise.verifier.service import StageScoringService

router = APIRouter(tags=["tasks"])

STATE_NAME = "stage_scoring"
"""The attribute of `app.state` holding the `StageScoringService`."""

ServiceDep = Annotated[StageScoringService, Depends(task_service(STATE_NAME))]


@router.post(STAGE_SCORES.path, name=STAGE_SCORES.name, response_model=StageScoresResponse)
async def stage_scores(body: StageScoresRequest, service: ServiceDep) -> StageScoresResponse:
    return await service.stage_scores(body)
