"""The verifier's stagewise task as an internal route value, declared once (`common.endpoints`):
its route takes path and name (the task's label) from here; the gateway and the audit's replay
call it with `ServiceClient.call(STAGE_SCORES, body)`."""

from rubricate.common.endpoints import TASKS, post
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse

STAGE_SCORES = post(
    "stage_scoring", f"{TASKS}/stage-scores", StageScoresRequest, StageScoresResponse
)
"""The verifier scores every rollout of a group against the stage rubrics."""
