"""Wire models of the rubric-generator's task API."""

from pydantic import BaseModel, Field

from rubricate.common.schemas import TaskResponse
from rubricate_client.schemas.rubrics import Rubric, RubricSpec, Stage


class StageTexts(BaseModel):
    """One trajectory split into stages; a missing stage is null."""

    id: str = Field(min_length=1, max_length=256)
    stages: dict[Stage, str | None]


class StageRubricsRequest(BaseModel):
    question: str = Field(min_length=1)
    trajectories: list[StageTexts] = Field(min_length=1)
    existing: list[Rubric] = Field(default_factory=list)
    """The buffer's current rubrics, so the judge skips what they already cover."""


class StageRubricsResponse(TaskResponse):
    rubrics: dict[Stage, list[RubricSpec]]
