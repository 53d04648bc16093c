from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.stagewise.endpoints import STAGE_SCORES
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate.stagewise.verifier.service import VerifierService

router = APIRouter(tags=["tasks"])


def get_service(request: Request) -> VerifierService:
    service: VerifierService = request.app.state.service
    return service


ServiceDep = Annotated[VerifierService, Depends(get_service)]


@router.post(STAGE_SCORES.path, name=STAGE_SCORES.name, response_model=StageScoresResponse)
async def stage_scores(body: StageScoresRequest, service: ServiceDep) -> StageScoresResponse:
    return await service.stage_scores(body)
