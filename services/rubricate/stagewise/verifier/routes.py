"""The verifier's stagewise task routes: stage scores of one trajectory, and of a group's
trajectories in one call."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.stagewise.verifier.endpoints import GROUP_STAGE_SCORES, STAGE_SCORES
from rubricate.stagewise.verifier.service import StageScoringService

STATE_NAME = "stage_scoring"
"""The attribute of `app.state` holding the `StageScoringService`."""

router = task_router(
    STATE_NAME,
    TaskRoute(STAGE_SCORES, StageScoringService.stage_scores),
    TaskRoute(GROUP_STAGE_SCORES, StageScoringService.group_stage_scores),
)
