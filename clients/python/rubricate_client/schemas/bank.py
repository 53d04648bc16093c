"""Public wire models of the agent rubric bank: items, retrieval results, snapshots."""

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from rubricate_client.schemas.curation import BankStatus, CurationEvent
from rubricate_client.schemas.rubrics import TrainingStep

RetrievalMode = Literal["within", "cross"]

# RubricEM App. D.5: cross-episode retrieval returns the top-k items, k = 2 by default.
DEFAULT_RETRIEVE_K: Final = 2
MAX_RETRIEVE_K: Final = 50


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
    """1 when first written, +1 per write of the item (a replacement, a person's curation, a
    snapshot restore); each version is in the item's history (`BankItemHistory`)."""


class RetrievedItem(BankItem):
    similarity: float | None = None
    """Inner product of the question embeddings (cross-episode); None for within-episode."""


class BankStats(BaseModel):
    items: int
    indexed: int | None
    """Points of this tenant in the vector index (None when the index is unreachable)."""


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


class BankItemView(BankItem):
    """A bank item with its review state, as the bank's listing and curation show it."""

    status: BankStatus
    """`pending` until a person approves it; `retired` items are never retrieved."""
    reviewed_by: str | None = None
    reviewed_at: datetime | None = None


class BankItemList(BaseModel):
    items: list[BankItemView]
    total: int
    offset: int
    limit: int


class BankItemVersion(BaseModel):
    """One version of a bank item: what it said after `action`, by whom and when."""

    version: int
    action: Literal["accepted", "replaced", "approve", "edit", "retire", "restored"]
    """`accepted`/`replaced`: a reflection the bank took (RubricEM's newer-wins rule);
    the others: a person's curation; `restored`: a snapshot restore."""
    author: str | None
    """None for the platform's own writes (`accepted`, `replaced`, `restored`)."""
    reason: str | None = None
    at: datetime
    status: BankStatus
    rubrics: dict[str, list[str]]
    takeaways: list[str]
    reflection: str
    score: float
    step: int | None


class BankItemHistory(BaseModel):
    question_hash: str
    versions: list[BankItemVersion]
    """Oldest first; the last is the item as it is now."""


class BankItemCurationResult(BaseModel):
    event: CurationEvent
    item: BankItemView
