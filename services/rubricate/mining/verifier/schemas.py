"""Wire models of the verifier's nugget-mining judgments (Search-Gen-V §3.2, App. C)."""

from pydantic import BaseModel, ConfigDict, Field

from rubricate.common.schemas import TaskResponse
from rubricate.mining.prompts.pipeline import TimeConstraint

_TEXT = 20_000


class TemporalCheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=_TEXT)
    passage: str = Field(min_length=1, max_length=_TEXT)


class TemporalCheckResponse(TaskResponse):
    constraint: TimeConstraint
    """The kind of time constraint the judge read in the query."""
    satisfied: bool


class QueryDuplicateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=_TEXT)
    existing: list[str] = Field(min_length=1, max_length=200)


class QueryDuplicateResponse(TaskResponse):
    duplicate: bool
    similar_to: int | None
    """0-based position in `existing` of the query it repeats, when the judge named one."""
