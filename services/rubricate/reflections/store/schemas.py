"""The store's wire models for the agent rubric bank and its snapshots."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from rubricate.db.limits import QUESTION_ID_LEN
from rubricate.reflections.domain.reflection import (
    CATEGORIES,
    MAX_REFLECTION_CHARS,
    MAX_TAKEAWAYS,
    MIN_TAKEAWAYS,
)
from rubricate_client.schemas.bank import (
    DEFAULT_RETRIEVE_K,
    MAX_RETRIEVE_K,
    BankItemView,
    RetrievalMode,
    RetrievedItem,
)
from rubricate_client.schemas.curation import BankItemCurationRequest
from rubricate_client.schemas.rubrics import TrainingStep

QuestionText = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
QuestionHash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Line = Annotated[str, StringConstraints(min_length=1, max_length=MAX_REFLECTION_CHARS)]
Author = Annotated[str, StringConstraints(min_length=1, max_length=200)]
"""`common.auth.request_actor`, set by the gateway (at most 200 characters)."""


class BankItemIn(BaseModel):
    """An accepted reflection offered to the bank."""

    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    rubrics: dict[str, list[Line]] = Field(min_length=1, max_length=len(CATEGORIES))
    """Reflection rubrics: category -> guidance lines."""
    takeaways: list[Line] = Field(min_length=MIN_TAKEAWAYS, max_length=MAX_TAKEAWAYS)
    reflection: str = Field(min_length=1, max_length=50_000)
    """The candidate's full text."""
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    """Its utility u."""
    step: TrainingStep | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    """Where it came from (scoring id, rollout id, candidate index, judge model...)."""


class OfferResponse(BaseModel):
    written: bool
    """False when the bank holds a reflection from a newer step (it is kept), or when a
    person retired the question's item (a retired question takes no reflections)."""
    reason: str
    item: BankItemView
    """The bank's item for the question after the offer."""
    indexed: bool
    """Whether the question's embedding is in the vector index (cross-episode retrieval)."""


class BankCurationIn(BankItemCurationRequest):
    """A person's approval, edit or retirement of a bank item, with its author (the gateway
    sets it from the caller's credential)."""

    author: Author


class ReindexResponse(BaseModel):
    indexed: int


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    mode: RetrievalMode
    k: int = Field(default=DEFAULT_RETRIEVE_K, ge=1, le=MAX_RETRIEVE_K)
    """Cross-episode: how many similar questions; within-episode returns at most one item."""


class RetrieveResponse(BaseModel):
    mode: RetrievalMode
    question_hash: str
    items: list[RetrievedItem]


# --- snapshots ----------------------------------------------------------------------------


class SnapshotRecord(BaseModel):
    """One JSONL line of an exported snapshot after the header."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["bank", "buffer"]
    key: str = Field(min_length=1, max_length=QUESTION_ID_LEN)
    payload: dict[str, Any]


class SnapshotHeader(BaseModel):
    """The first JSONL line of an exported snapshot."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["rubricate.bank-snapshot.v1"]
    step: TrainingStep
    created_at: datetime
    bank_items: int = Field(ge=0)
    questions: int = Field(ge=0)
    rubrics: int = Field(ge=0)
