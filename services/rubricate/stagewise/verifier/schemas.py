"""Wire models of the verifier's task API."""

from typing import Self

from pydantic import BaseModel, Field, model_validator

from rubricate.common.schemas import TaskResponse
from rubricate_client.schemas.errors import ErrorBody
from rubricate_client.schemas.rubrics import Judgment, Rubric, Stage


class StageScoresRequest(BaseModel):
    question: str = Field(min_length=1)
    stages: dict[Stage, str | None]
    """The trajectory split into stages; a missing stage is null."""
    rubrics: list[Rubric] = Field(min_length=1)
    """The rubrics to score, each judged on its own stage's text."""


class StageScoresResponse(TaskResponse):
    judgments: list[Judgment]


class GroupTrajectory(BaseModel):
    stages: dict[Stage, str | None]
    """The trajectory split into stages; a missing stage is null."""
    rubrics: list[int] = Field(min_length=1)
    """Which of the group's rubrics it is scored on (indices into `rubrics`, in order)."""


class GroupStageScoresRequest(BaseModel):
    """A group's trajectories in one call: the question and the rubrics sent once."""

    question: str = Field(min_length=1)
    rubrics: list[Rubric] = Field(min_length=1)
    trajectories: list[GroupTrajectory] = Field(min_length=1)

    @model_validator(mode="after")
    def _indices_in_range(self) -> Self:
        for n, trajectory in enumerate(self.trajectories):
            wrong = [k for k in trajectory.rubrics if not 0 <= k < len(self.rubrics)]
            if wrong:
                raise ValueError(
                    f"trajectories[{n}].rubrics: {wrong} out of range for "
                    f"{len(self.rubrics)} rubrics"
                )
        return self


class TrajectoryScores(BaseModel):
    """One trajectory's judgments (on its rubrics, in order), or why it has none: the model
    failure in the one error shape, as `STAGE_SCORES` would have answered it alone."""

    judgments: list[Judgment] | None = None
    error: ErrorBody | None = None
    status: int | None = None
    """The HTTP status `STAGE_SCORES` would have answered the failure with."""


class GroupStageScoresResponse(TaskResponse):
    """Every trajectory's outcome, in request order; `usage` is the whole call's."""

    trajectories: list[TrajectoryScores]
