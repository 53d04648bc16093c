"""Wire models of the miner API."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Self

from rubricate_client.schemas.nuggets import Importance

DocFormat = Literal["text", "markdown", "rst", "html", "jsonl"]

CORPUS_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
CorpusName = Field(pattern=CORPUS_PATTERN, description="Letters, digits, `_ . -`; 1–64 chars.")


class Provenance(BaseModel):
    passage_id: str
    query_path: list[str]


class MinedNugget(BaseModel):
    text: str
    importance: Importance
    provenance: list[Provenance]


class CorpusDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=512)
    content: str = Field(min_length=1)
    format: DocFormat = "text"
    """text | markdown | rst | html | jsonl (one document per line)."""


class IngestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = CorpusName
    documents: list[CorpusDocument] | None = Field(default=None, min_length=1)
    path: str | None = None
    """A server-side file or directory under one of RUBRICATE_MINER_INGEST_ROOTS."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.documents is None) == (self.path is None):
            raise ValueError("give exactly one of `documents` and `path`")
        return self


class MineRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=4000)
    corpus: str = CorpusName
    max_depth: int | None = Field(default=None, ge=0, le=20)
    max_nodes: int | None = Field(default=None, ge=2, le=10_000)
    rewrites_per_passage: int | None = Field(default=None, ge=0, le=10)
    similarity_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    max_hits_per_query: int | None = Field(default=None, ge=1, le=500)
    max_nuggets_per_passage: int | None = Field(default=None, ge=1, le=30)


JobStateName = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobView(BaseModel):
    id: str
    kind: Literal["mine", "ingest"]
    state: JobStateName
    corpus: str
    question: str | None
    params: dict[str, Any]
    """Mining limits; for ingestion, the source (document count or path)."""
    progress: dict[str, Any]
    """Mining: phase, nodes_expanded, passages_kept, passages_examined, nuggets_so_far, …
    Ingestion: documents_total, documents_done, passages."""
    result: dict[str, Any] | None
    error: str | None
    cancel_requested: bool
    attempts: int
    """Times a worker took the job; above 1 it was resumed from its stored tree."""
    steps: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class CorpusView(BaseModel):
    name: str
    documents: int
    passages: int
    embedding_model: str
    dim: int
    created_at: datetime
    updated_at: datetime


class CorpusList(BaseModel):
    corpora: list[CorpusView]


class NuggetsView(BaseModel):
    question: str
    corpus: str
    job_id: str
    mined_at: datetime
    nuggets: list[MinedNugget]


class JobList(BaseModel):
    jobs: list[JobView]
    """Newest first."""
