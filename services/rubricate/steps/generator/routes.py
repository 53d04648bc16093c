"""The rubric-generator's step-rubric task route (a model failure is answered by the model
server's one `LLMError` handler, named after the route: `step_rubric_generation`)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.steps.generator.endpoints import STEP_RUBRIC
from rubricate.steps.generator.schemas import StepRubricTaskRequest, StepRubricTaskResponse
from rubricate.steps.generator.service import StepRubricService

router = APIRouter(tags=["tasks"])

STATE_NAME = "step_rubrics"
"""The attribute of `app.state` holding the `StepRubricService`."""

ServiceDep = Annotated[StepRubricService, Depends(task_service(STATE_NAME))]


@router.post(STEP_RUBRIC.path, name=STEP_RUBRIC.name, response_model=StepRubricTaskResponse)
async def step_rubric(body: StepRubricTaskRequest, service: ServiceDep) -> StepRubricTaskResponse:
    return await service.generate(body)
