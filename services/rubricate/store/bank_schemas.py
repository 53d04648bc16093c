"""The store's wire models for the agent rubric bank, its snapshots, and stored scorings."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from rubricate.core.bank import DEFAULT_RETRIEVE_K, MAX_RETRIEVE_K, RetrievalMode
from rubricate.core.reflection import (
    CATEGORIES,
    MAX_REFLECTION_CHARS,
    MAX_TAKEAWAYS,
    MIN_TAKEAWAYS,
)
from rubricate.core.rubrics import Judgment, Polarity, Stage, TrainingStep
from rubricate.store.bank_models import SCORING_ID_LEN
from rubricate.store.limits import QUESTION_ID_LEN

QuestionText = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
QuestionHash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
ScoringId = Annotated[
    str, StringConstraints(min_length=1, max_length=SCORING_ID_LEN, pattern=r"^[A-Za-z0-9_\-]+$")
]
Line = Annotated[str, StringConstraints(min_length=1, max_length=MAX_REFLECTION_CHARS)]


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


class BankItem(BaseModel):
    question_hash: str
    question: str
    rubrics: dict[str, list[str]]
    takeaways: list[str]
    reflection: str
    score: float
    step: int | None
    provenance: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    version: int
    """1 when first written, +1 per replacement."""


class OfferResponse(BaseModel):
    written: bool
    """False when the bank holds a reflection from a newer step (it is kept)."""
    reason: str
    item: BankItem
    """The bank's item for the question after the offer."""
    indexed: bool
    """Whether the question's embedding is in the vector index (cross-episode retrieval)."""


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    mode: RetrievalMode
    k: int = Field(default=DEFAULT_RETRIEVE_K, ge=1, le=MAX_RETRIEVE_K)
    """Cross-episode: how many similar questions; within-episode returns at most one item."""


class RetrievedItem(BankItem):
    similarity: float | None = None
    """Inner product of the question embeddings (cross-episode); None for within-episode."""


class RetrieveResponse(BaseModel):
    mode: RetrievalMode
    question_hash: str
    items: list[RetrievedItem]


class BankStats(BaseModel):
    items: int
    indexed: int | None
    """Points of this tenant in the vector index (None when the index is unreachable)."""


# --- snapshots ----------------------------------------------------------------------------


class SnapshotRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: TrainingStep
    replace: bool = False
    """Replace an existing snapshot of the same step (otherwise that is a 409)."""


class RestoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: TrainingStep


class SnapshotInfo(BaseModel):
    step: int
    created_at: datetime
    bank_items: int
    questions: int
    rubrics: int
    """Rubric rows in the snapshot's buffers (pruned ones included)."""


class SnapshotList(BaseModel):
    snapshots: list[SnapshotInfo]


class RestoreResponse(SnapshotInfo):
    indexed: bool
    """Whether the vector index was rebuilt for the restored bank."""


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


# --- stored stagewise scorings ------------------------------------------------------------


class ScoredRubric(BaseModel):
    id: str
    stage: Stage
    title: str
    description: str
    weight: int
    polarity: Polarity


class ScoredRollout(BaseModel):
    scores: dict[Stage, float] | None
    judgments: list[Judgment]
    fallback: str | None = None
    """The stagewise fallback kind (answer_only | unscored), if any."""


class ScoringIn(BaseModel):
    """What `/v1/stagewise/score` judged, kept so a reflection can refer to it by id."""

    model_config = ConfigDict(extra="forbid")

    scoring_id: ScoringId
    question_id: str = Field(min_length=1, max_length=QUESTION_ID_LEN)
    question: QuestionText
    step: TrainingStep | None = None
    rubrics: list[ScoredRubric]
    rollouts: dict[str, ScoredRollout] = Field(min_length=1)


class Scoring(ScoringIn):
    model_config = ConfigDict(extra="ignore")

    created_at: datetime
