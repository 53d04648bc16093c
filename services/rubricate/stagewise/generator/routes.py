"""The rubric generator's stagewise task route: stage rubrics for a group."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.stagewise.generator.endpoints import STAGE_RUBRICS
from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageRubricsResponse
from rubricate.stagewise.generator.service import StageRubricService

router = APIRouter(tags=["tasks"])

STATE_NAME = "stage_rubrics"
"""The attribute of `app.state` holding the `StageRubricService`."""

ServiceDep = Annotated[StageRubricService, Depends(task_service(STATE_NAME))]


@router.post(STAGE_RUBRICS.path, name=STAGE_RUBRICS.name, response_model=StageRubricsResponse)
async def stage_rubrics(body: StageRubricsRequest, service: ServiceDep) -> StageRubricsResponse:
    return await service.stage_rubrics(body)
