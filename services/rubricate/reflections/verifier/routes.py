"""The verifier's reflection-judging task route (a model failure is answered by the model
server's one `LLMError` handler, named after the route: `reflection_judging`)."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.reflections.verifier.endpoints import REFLECTION_JUDGING
from rubricate.reflections.verifier.service import ReflectionJudgeService

STATE_NAME = "reflections"
"""The attribute of `app.state` holding the `ReflectionJudgeService`."""

router = task_router(
    STATE_NAME,
    TaskRoute(
        REFLECTION_JUDGING,
        ReflectionJudgeService.score,
        "Score one reflection candidate with privileged access to the trajectory's grades.",
    ),
)
