"""The reflection judge's task as an internal route value, declared once (`common.endpoints`):
its route takes path and name (the task's label) from here, the gateway calls it with
`ServiceClient.call(REFLECTION_JUDGING, body)`."""

from rubricate.common.endpoints import post
from rubricate.reflections.verifier.schemas import ReflectionScoresRequest, ReflectionScoresResponse

REFLECTION_JUDGING = post(
    "reflection_judging",
    "/v1/tasks/reflection-scores",
    ReflectionScoresRequest,
    ReflectionScoresResponse,
)
"""The verifier judges one reflection candidate against the trajectory's judgments."""
