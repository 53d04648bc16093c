"""The verifier's reflection-judging task route (a model failure is answered by the model
server's one `LLMError` handler, named after the route: `reflection_judging`)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.reflections.verifier.endpoints import REFLECTION_JUDGING
from rubricate.reflections.verifier.schemas import ReflectionScoresRequest, ReflectionScoresResponse
from rubricate.reflections.verifier.service import ReflectionJudgeService

router = APIRouter(tags=["tasks"])
STATE_NAME = "reflections"
"""The attribute of `app.state` holding the `ReflectionJudgeService`."""

ServiceDep = Annotated[ReflectionJudgeService, Depends(task_service(STATE_NAME))]


@router.post(
    REFLECTION_JUDGING.path, name=REFLECTION_JUDGING.name, response_model=ReflectionScoresResponse
)
async def reflection_judging(
    body: ReflectionScoresRequest, service: ServiceDep
) -> ReflectionScoresResponse:
    """Score one reflection candidate with privileged access to the trajectory's grades."""
    return await service.score(body)
