"""The nugget verifier's task as an internal route value, declared once (`common.endpoints`): its
route takes path and name (the task's label) from here, the gateway calls it with
`ServiceClient.call(NUGGET_LABELS, body)`."""

from rubricate.common.endpoints import post
from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest, NuggetLabelsResponse

NUGGET_LABELS = post(
    "nugget_verification", "/v1/tasks/nugget-labels", NuggetLabelsRequest, NuggetLabelsResponse
)
"""The verifier labels every (block, nugget) pair of an answer and withholds blocks that
address the judge."""
