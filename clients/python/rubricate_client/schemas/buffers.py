"""Public wire model of a question's judge rubric buffer (`GET /v1/buffers/{question_id}`)."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from rubricate_client.constants import STAGES
from rubricate_client.schemas.curation import CurationEvent
from rubricate_client.schemas.rubrics import Rubric, Stage


def empty_buffer_rubrics() -> dict[Stage, list[Rubric]]:
    return {s: [] for s in STAGES}


class BufferView(BaseModel):
    """A question's buffer: rubrics not pruned, per stage, each in insertion order."""

    question_id: str
    question: str = ""
    version: int = 0
    """Incremented by every write that changed the buffer (0: never written)."""
    updated_at: datetime | None = None
    rubrics: dict[Stage, list[Rubric]] = Field(default_factory=empty_buffer_rubrics)
    """Every stage is present, in causal order (plan, research, review, answer)."""

    @field_validator("rubrics")
    @classmethod
    def _every_stage(cls, value: dict[Stage, list[Rubric]]) -> dict[Stage, list[Rubric]]:
        return {s: value.get(s, []) for s in STAGES}

    @classmethod
    def empty(cls, question_id: str) -> "BufferView":
        return cls(question_id=question_id)

    def all_rubrics(self) -> list[Rubric]:
        """Every rubric, stage by stage."""
        return [r for s in STAGES for r in self.rubrics[s]]


QuestionSort = Literal["recent", "question_id", "rubrics"]
"""`recent`: last buffer change first; `question_id`: alphabetical; `rubrics`: most live
rubrics first."""


class QuestionSummary(BaseModel):
    """One question of the tenant's, as `GET /v1/questions` lists it."""

    question_id: str
    question: str
    created_at: datetime
    updated_at: datetime
    version: int
    rubrics: int
    """Live rubrics (not pruned or retired)."""
    per_stage: dict[Stage, int]
    """Live rubrics per stage; every stage present."""
    pinned: int
    retired: int


class QuestionList(BaseModel):
    questions: list[QuestionSummary]
    total: int
    """Questions matching the search, over all pages."""
    offset: int
    limit: int


class RubricCurationResult(BaseModel):
    event: CurationEvent
    rubric: Rubric
    """The rubric after the change (for `edit`: the new rubric)."""
    buffer_version: int
