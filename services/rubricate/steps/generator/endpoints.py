"""The step generator's task as an internal route value, declared once (`common.endpoints`)."""

from rubricate.common.endpoints import post
from rubricate.steps.generator.schemas import StepRubricTaskRequest, StepRubricTaskResponse

STEP_RUBRIC = post(
    "step_rubric_generation", "/v1/tasks/step-rubric", StepRubricTaskRequest, StepRubricTaskResponse
)
"""The generator writes a weighted rubric for the agent's next action."""
