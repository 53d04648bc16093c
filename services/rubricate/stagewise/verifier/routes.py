"""The verifier's stagewise task route: stage scores of one trajectory."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.stagewise.verifier.endpoints import STAGE_SCORES
from rubricate.stagewise.verifier.service import StageScoringService

STATE_NAME = "stage_scoring"
"""The attribute of `app.state` holding the `StageScoringService`."""

router = task_router(STATE_NAME, TaskRoute(STAGE_SCORES, StageScoringService.stage_scores))
