from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageRubricsResponse
from rubricate.stagewise.generator.service import TASK, RubricGeneratorService

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


def get_service(request: Request) -> RubricGeneratorService:
    service: RubricGeneratorService = request.app.state.service
    return service


ServiceDep = Annotated[RubricGeneratorService, Depends(get_service)]


@router.post("/stage-rubrics", response_model=StageRubricsResponse)
async def stage_rubrics(body: StageRubricsRequest, service: ServiceDep) -> StageRubricsResponse:
    try:
        return await service.stage_rubrics(body)
    except LLMError as exc:
        raise as_service_error(exc, task=TASK) from exc
