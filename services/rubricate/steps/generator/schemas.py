"""Wire models of the rubric-generator's step-rubric task."""

from pydantic import BaseModel, ConfigDict, Field

from rubricate.common.schemas import TaskResponse
from rubricate_client.constants import STEP_RUBRIC_K, STEP_RUBRIC_MAX_K


class StepRubricTaskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    history: str = ""
    """The trajectory prefix h_t as text; empty before the first step."""
    k: int = Field(default=STEP_RUBRIC_K, ge=1, le=STEP_RUBRIC_MAX_K)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    seed: int | None = None


class DraftCriterionOut(BaseModel):
    criterion: str
    weight: int
    """1–3 as the generator wrote it; the gateway normalizes the rubric's weights to sum 1."""


class StepRubricTaskResponse(TaskResponse):
    criteria: list[DraftCriterionOut]
