"""The store's internal wire models of the rubric buffer and of stored stagewise scorings."""

from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
)

from rubricate.db.limits import QUESTION_ID_LEN, RUBRIC_ID_LEN, SCORING_ID_LEN
from rubricate_client.constants import ACTIVE_CAPS, STAGES
from rubricate_client.schemas.buffers import BufferView, QuestionSort
from rubricate_client.schemas.curation import RubricCurationRequest
from rubricate_client.schemas.limits import MAX_LIST_OFFSET
from rubricate_client.schemas.rubrics import Rubric, RubricView, Stage, TrainingStep
from rubricate_client.schemas.scorings import ScoredRollout

MAX_RUBRICS_PER_REQUEST = 1000
MAX_VARIANCES_PER_REQUEST = 10_000

RubricId = Annotated[str, StringConstraints(min_length=1, max_length=RUBRIC_ID_LEN)]
Variance = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Cap = Annotated[int, Field(ge=0, le=10_000)]
QuestionText = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
ScoringId = Annotated[
    str, StringConstraints(min_length=1, max_length=SCORING_ID_LEN, pattern=r"^[A-Za-z0-9_\-]+$")
]


def _storable_id(rubric: Rubric) -> Rubric:
    if not 1 <= len(rubric.id) <= RUBRIC_ID_LEN:
        raise ValueError(f"id must be 1 to {RUBRIC_ID_LEN} characters")
    return rubric


StorableRubric = Annotated[Rubric, AfterValidator(_storable_id)]


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


# --- curation and the question list -------------------------------------------------------

MAX_AUTHOR_CHARS = 1000
MAX_SEARCH_CHARS = 500
QUESTIONS_PAGE_MAX = 200
QUESTIONS_PAGE_DEFAULT = 50


class CurateRubricRequest(RubricCurationRequest):
    """The public curation request plus its author, whom the gateway names from the
    caller's credential (`rubricate.common.auth.request_actor`)."""

    model_config = ConfigDict(extra="forbid")

    author: str = Field(min_length=1, max_length=MAX_AUTHOR_CHARS)


class QuestionQuery(BaseModel):
    """A page of the question list: the gateway's query parameters, as the store takes them."""

    model_config = ConfigDict(extra="forbid")

    search: str | None = Field(default=None, max_length=MAX_SEARCH_CHARS)
    """A case-insensitive substring of the question id or of the question's text."""
    sort: QuestionSort = "recent"
    offset: int = Field(default=0, ge=0, le=MAX_LIST_OFFSET)
    limit: int = Field(default=QUESTIONS_PAGE_DEFAULT, ge=1, le=QUESTIONS_PAGE_MAX)


class StoreStats(BaseModel):
    questions: int
    rubrics: int
    """Rubrics in buffers (not pruned)."""
    pruned_rubrics: int


# --- stored stagewise scorings ------------------------------------------------------------


class ScoringIn(BaseModel):
    """What `/v1/stagewise/score` judged, kept so a reflection can refer to it by id (stored,
    it reads back as the client's `StoredScoring`)."""

    model_config = ConfigDict(extra="forbid")

    scoring_id: ScoringId
    question_id: str = Field(min_length=1, max_length=QUESTION_ID_LEN)
    question: QuestionText
    step: TrainingStep | None = None
    rubrics: list[RubricView]
    rollouts: dict[str, ScoredRollout] = Field(min_length=1)
