from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.stagewise.endpoints import STAGE_RUBRICS
from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageRubricsResponse
from rubricate.stagewise.generator.service import RubricGeneratorService

router = APIRouter(tags=["tasks"])


def get_service(request: Request) -> RubricGeneratorService:
    service: RubricGeneratorService = request.app.state.service
    return service


ServiceDep = Annotated[RubricGeneratorService, Depends(get_service)]


@router.post(STAGE_RUBRICS.path, name=STAGE_RUBRICS.name, response_model=StageRubricsResponse)
async def stage_rubrics(body: StageRubricsRequest, service: ServiceDep) -> StageRubricsResponse:
    return await service.stage_rubrics(body)
