"""Public wire model of a question's judge rubric buffer (`GET /v1/buffers/{question_id}`)."""

from datetime import datetime

from pydantic import BaseModel, Field, field_validator

from rubricate_client.constants import STAGES
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
