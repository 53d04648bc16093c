"""The verifier's reflection-judging task route."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.reflections.verifier.schemas import ReflectionScoresRequest, ReflectionScoresResponse
from rubricate.reflections.verifier.service import TASK, ReflectionJudgeService

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])
STATE_NAME = "reflections"
"""The service object's name on `app.state` (registered through `extra_services`)."""


def get_service(request: Request) -> ReflectionJudgeService:
    service: ReflectionJudgeService = getattr(request.app.state, STATE_NAME)
    return service


ServiceDep = Annotated[ReflectionJudgeService, Depends(get_service)]


@router.post("/reflection-scores", response_model=ReflectionScoresResponse)
async def reflection_scores(
    body: ReflectionScoresRequest, service: ServiceDep
) -> ReflectionScoresResponse:
    """Score one reflection candidate with privileged access to the trajectory's grades."""
    try:
        return await service.score(body)
    except LLMError as exc:
        raise as_service_error(exc, task=TASK) from exc
