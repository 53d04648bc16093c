"""The rubric generator's stagewise task route: stage rubrics for a group."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.stagewise.generator.endpoints import STAGE_RUBRICS
from rubricate.stagewise.generator.service import StageRubricService

STATE_NAME = "stage_rubrics"
"""The attribute of `app.state` holding the `StageRubricService`."""

router = task_router(STATE_NAME, TaskRoute(STAGE_RUBRICS, StageRubricService.stage_rubrics))
