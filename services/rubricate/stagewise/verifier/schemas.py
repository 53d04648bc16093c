"""Wire models of the verifier's task API."""

from pydantic import BaseModel, Field

from rubricate.common.schemas import TaskResponse
from rubricate_client.schemas.rubrics import Judgment, Rubric, Stage


class StageScoresRequest(BaseModel):
    question: str = Field(min_length=1)
    stages: dict[Stage, str | None]
    """The trajectory split into stages; a missing stage is null."""
    rubrics: list[Rubric] = Field(min_length=1)
    """The rubrics to score, each judged on its own stage's text."""


class StageScoresResponse(TaskResponse):
    judgments: list[Judgment]
