"""The generator's stagewise task as an internal route value, declared once (`common.endpoints`):
its route takes path and name (the task's label) from here; the gateway calls it with
`ServiceClient.call(STAGE_RUBRICS, body)`."""

from rubricate.common.endpoints import TASKS, post
from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageRubricsResponse

STAGE_RUBRICS = post(
    "stage_rubric_generation", f"{TASKS}/stage-rubrics", StageRubricsRequest, StageRubricsResponse
)
"""The generator proposes new rubrics per stage from a contrasting group."""
