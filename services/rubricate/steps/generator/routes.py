"""The rubric-generator's step-rubric task route (a model failure is answered by the model
server's one `LLMError` handler, named after the route: `step_rubric_generation`)."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.steps.generator.endpoints import STEP_RUBRIC
from rubricate.steps.generator.service import StepRubricService

STATE_NAME = "step_rubrics"
"""The attribute of `app.state` holding the `StepRubricService`."""

router = task_router(STATE_NAME, TaskRoute(STEP_RUBRIC, StepRubricService.generate))
