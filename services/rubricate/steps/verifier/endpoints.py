"""The step verifier's tasks as internal route values, declared once (`common.endpoints`): its
routes take path and name from here, the gateway calls them with `ServiceClient.call`. Each
name is the task's label (judge metrics, model-failure messages)."""

from rubricate.common.endpoints import post
from rubricate.steps.verifier.schemas import (
    RankTaskRequest,
    RankTaskResponse,
    StepVerdictsRequest,
    StepVerdictsResponse,
)

STEP_VERDICTS = post(
    "step_verify", "/v1/tasks/step-verdicts", StepVerdictsRequest, StepVerdictsResponse
)
"""The verifier judges one proposed action against a step rubric's criteria."""
LISTWISE_RANK = post("listwise_rank", "/v1/tasks/rank", RankTaskRequest, RankTaskResponse)
"""One rank judge (the verifier or a verifier-compatible server) ranks a relabelled slate."""
