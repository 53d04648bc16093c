"""The rubric-generator's step-rubric task route."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.steps.generator.schemas import StepRubricTaskRequest, StepRubricTaskResponse
from rubricate.steps.generator.service import TASK, StepRubricService

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])

STATE_NAME = "step_rubrics"
"""The attribute of `app.state` holding the `StepRubricService`."""


def get_service(request: Request) -> StepRubricService:
    service: StepRubricService = getattr(request.app.state, STATE_NAME)
    return service


ServiceDep = Annotated[StepRubricService, Depends(get_service)]


@router.post("/step-rubric", response_model=StepRubricTaskResponse)
async def step_rubric(body: StepRubricTaskRequest, service: ServiceDep) -> StepRubricTaskResponse:
    try:
        return await service.generate(body)
    except LLMError as exc:
        raise as_service_error(exc, task=TASK) from exc
