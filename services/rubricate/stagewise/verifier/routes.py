from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate.stagewise.verifier.service import TASK, VerifierService

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


def get_service(request: Request) -> VerifierService:
    service: VerifierService = request.app.state.service
    return service


ServiceDep = Annotated[VerifierService, Depends(get_service)]


@router.post("/stage-scores", response_model=StageScoresResponse)
async def stage_scores(body: StageScoresRequest, service: ServiceDep) -> StageScoresResponse:
    try:
        return await service.stage_scores(body)
    except LLMError as exc:
        raise as_service_error(exc, task=TASK) from exc
