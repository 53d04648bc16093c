"""Wire models of the rubric-generator's nugget-mining tasks (Search-Gen-V §3.2, App. C)."""

from pydantic import BaseModel, ConfigDict, Field

from rubricate.common.schemas import TaskResponse
from rubricate.mining.domain.search import Operation
from rubricate_client.schemas.nuggets import Importance

_TEXT = 20_000


class QueryRewritesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=_TEXT)
    query: str = Field(min_length=1, max_length=_TEXT)
    passage: str = Field(min_length=1, max_length=_TEXT)
    max_queries: int = Field(default=3, ge=1, le=10)


class RewrittenQuery(BaseModel):
    query: str
    operations: list[Operation]


class QueryRewritesResponse(TaskResponse):
    queries: list[RewrittenQuery]


class NuggetExtractionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=_TEXT)
    passage: str = Field(min_length=1, max_length=_TEXT)
    max_nuggets: int = Field(default=5, ge=1, le=30)


class NuggetExtractionResponse(TaskResponse):
    nuggets: list[str]
    """Empty when the passage holds nothing that helps answer the question."""


class NuggetMergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=_TEXT)
    nuggets: list[str] = Field(min_length=1, max_length=100)


class MergedNugget(BaseModel):
    text: str
    ids: list[int]
    """0-based positions in the request's `nuggets`."""


class NuggetMergeResponse(TaskResponse):
    groups: list[MergedNugget]
    """Groups of two or more merged nuggets; the others stay as they were."""


class NuggetImportanceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=_TEXT)
    nuggets: list[str] = Field(min_length=1, max_length=100)


class NuggetImportanceResponse(TaskResponse):
    labels: list[Importance]
