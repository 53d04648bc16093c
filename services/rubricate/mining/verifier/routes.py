"""Routes of the verifier's nugget-mining judgments (declared in
`mining.verifier.endpoints`; a model failure is answered by the model server's one `LLMError`
handler, named after the route: the task's label)."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.mining.verifier.endpoints import QUERY_DUPLICATE, TEMPORAL_CHECK
from rubricate.mining.verifier.service import MiningJudgeService

SERVICE_NAME = "mining"
"""Name of the service object on `app.state` (one of the model server's task services)."""

router = task_router(
    SERVICE_NAME,
    TaskRoute(TEMPORAL_CHECK, MiningJudgeService.temporal_check),
    TaskRoute(QUERY_DUPLICATE, MiningJudgeService.query_duplicate),
    tags=["mining tasks"],
)
