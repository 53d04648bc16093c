"""The verifier's step task routes: action verdicts and listwise ranking (a model failure is
answered by the model server's one `LLMError` handler, named after the route: `step_verify`,
`listwise_rank`)."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.steps.verifier.endpoints import LISTWISE_RANK, STEP_VERDICTS
from rubricate.steps.verifier.service import StepJudgeService

STATE_NAME = "step_judge"
"""The attribute of `app.state` holding the `StepJudgeService`."""

router = task_router(
    STATE_NAME,
    TaskRoute(STEP_VERDICTS, StepJudgeService.verdicts),
    TaskRoute(LISTWISE_RANK, StepJudgeService.rank),
)
