"""The store's wire models (HTTP)."""

from datetime import datetime
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from rubricate.core.constants import ACTIVE_CAPS, STAGES
from rubricate.core.rubrics import Rubric, Stage, TrainingStep
from rubricate.store.limits import RUBRIC_ID_LEN

MAX_RUBRICS_PER_REQUEST = 1000
MAX_VARIANCES_PER_REQUEST = 10_000

RubricId = Annotated[str, StringConstraints(min_length=1, max_length=RUBRIC_ID_LEN)]
Variance = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Cap = Annotated[int, Field(ge=0, le=10_000)]


def _storable_id(rubric: Rubric) -> Rubric:
    if not 1 <= len(rubric.id) <= RUBRIC_ID_LEN:
        raise ValueError(f"id must be 1 to {RUBRIC_ID_LEN} characters")
    return rubric


StorableRubric = Annotated[Rubric, AfterValidator(_storable_id)]


def _no_rubrics() -> dict[Stage, list[Rubric]]:
    return {s: [] for s in STAGES}


class BufferView(BaseModel):
    """A question's buffer: rubrics not pruned, per stage, each in insertion order."""

    question_id: str
    question: str = ""
    version: int = 0
    """Incremented by every write that changed the buffer (0: never written)."""
    updated_at: datetime | None = None
    rubrics: dict[Stage, list[Rubric]] = Field(default_factory=_no_rubrics)
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


class AddRubricsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    """The question text, stored when the buffer is created."""
    rubrics: list[StorableRubric] = Field(default_factory=list, max_length=MAX_RUBRICS_PER_REQUEST)
    """Rubrics to add; ones already in the buffer are left as they are (a persistent copy
    of an active rubric makes it persistent); pruned ones are re-activated. A rubric's
    `variance` is ignored: the store records variances from prune requests only."""
    step: TrainingStep | None = None
    """The trainer's step, recorded on rubrics that do not carry `created_step`."""


class StageCaps(BaseModel):
    """Per-stage caps on active rubrics (RubricEM App. C.4 defaults)."""

    model_config = ConfigDict(extra="forbid")

    plan: Cap = ACTIVE_CAPS["plan"]
    research: Cap = ACTIVE_CAPS["research"]
    review: Cap = ACTIVE_CAPS["review"]
    answer: Cap = ACTIVE_CAPS["answer"]

    def as_dict(self) -> dict[Stage, int]:
        return {s: getattr(self, s) for s in STAGES}


class PruneRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variances: dict[RubricId, Variance] = Field(
        default_factory=dict, max_length=MAX_VARIANCES_PER_REQUEST
    )
    """Rubric id → score variance over the group just scored (finite, ≥ 0)."""
    caps: StageCaps = Field(default_factory=StageCaps)
    step: TrainingStep | None = None
    """The trainer's step, recorded on the rubrics pruned."""


class PruneResponse(BaseModel):
    pruned: list[str]
    """Ids of the rubrics pruned by this request."""
    ignored: list[str]
    """Ids in `variances` not in the buffer (unknown, or pruned concurrently)."""
    buffer: BufferView


class StoreStats(BaseModel):
    questions: int
    rubrics: int
    """Rubrics in buffers (not pruned)."""
    pruned_rubrics: int
