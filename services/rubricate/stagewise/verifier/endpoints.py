"""The verifier's stagewise task as internal route values, declared once (`common.endpoints`):
its routes take path and name (the task's label) from here; the gateway calls
`GROUP_STAGE_SCORES` once per group (and `STAGE_SCORES` for an answer-only retry), the audit's
replay `STAGE_SCORES`, with `ServiceClient.call(ENDPOINT, body)`."""

from rubricate.common.endpoints import TASKS, post
from rubricate.stagewise.verifier.schemas import (
    GroupStageScoresRequest,
    GroupStageScoresResponse,
    StageScoresRequest,
    StageScoresResponse,
)

STAGE_SCORES = post(
    "stage_scoring", f"{TASKS}/stage-scores", StageScoresRequest, StageScoresResponse
)
"""The verifier scores one trajectory against the stage rubrics."""

GROUP_STAGE_SCORES = post(
    "stage_scoring",
    f"{TASKS}/stage-scores/group",
    GroupStageScoresRequest,
    GroupStageScoresResponse,
)
"""The verifier scores a group's trajectories, each as `STAGE_SCORES` would, in one call: one
request, the question and rubrics sent once (the gateway's per-rollout calls were a third of
its CPU per rollout at 4,096 rollouts); a trajectory whose judge call fails gets its error in
its slot, the others their judgments."""
