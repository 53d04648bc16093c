"""The miner's internal contract for the audit: what the gateway submits after a group is
scored. Public shapes (audit views, signals, tenant settings) are in
`rubricate_client.schemas.audit`."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from rubricate.common.errors import ServiceError
from rubricate.db.limits import QUESTION_ID_LEN
from rubricate.stagewise.store.schemas import ScoringId
from rubricate_client.schemas.audit import AddressingReport, ReplayRequest
from rubricate_client.schemas.rubrics import Judgment, Rubric, Stage, TrainingStep

MAX_AUDIT_ROLLOUTS = 1024
MAX_QUESTION_IDS = 200
"""Question ids one `GET /v1/audit/questions` may ask about."""
QUESTION_IDS_TEXT_LEN = MAX_QUESTION_IDS * (QUESTION_ID_LEN + 1)
"""The longest `question_ids` query value: that many ids and their commas."""


def question_id_list(raw: str) -> list[str]:
    """The ids of a comma-separated `question_ids` (each stripped, repeats dropped, order
    kept); a 422 naming `question_ids` for an empty id, one too long, or more than
    `MAX_QUESTION_IDS`."""
    ids: dict[str, None] = {}
    for part in raw.split(","):
        question_id = part.strip()
        if not question_id or len(question_id) > QUESTION_ID_LEN:
            raise ServiceError(
                422,
                f"each question id is 1 to {QUESTION_ID_LEN} characters, comma-separated",
                type="validation_error",
                field="question_ids",
            )
        ids[question_id] = None
        if len(ids) > MAX_QUESTION_IDS:
            raise ServiceError(
                422,
                f"at most {MAX_QUESTION_IDS} question ids at once",
                type="validation_error",
                field="question_ids",
            )
    return list(ids)


class AuditRollout(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    trajectory: str = Field(min_length=1)
    spans: dict[Stage, tuple[int, int] | None]
    """Stage → [start, end) character offsets into the trajectory, as the live scoring
    parsed them; a missing stage is null."""
    scores: dict[Stage, float | None] | None
    """The live judge's stage scores R (null: the rollout was not scored)."""
    judgments: list[Judgment]
    fallback: str | None = None
    """The live scoring's fallback kind (answer_only | unscored), if any."""

    def stage_text(self, stage: Stage) -> str | None:
        span = self.spans.get(stage)
        return None if span is None else self.trajectory[span[0] : span[1]]


class AuditSubmission(BaseModel):
    """A scored group, sent by the gateway after the trainer has its answer."""

    model_config = ConfigDict(extra="forbid")

    scoring_id: ScoringId
    question_id: str = Field(min_length=1, max_length=QUESTION_ID_LEN)
    question: str = Field(min_length=1, max_length=20_000)
    step: TrainingStep | None = None
    rubrics: list[Rubric]
    """The rubric set the group was scored on (the reference judge gets the same)."""
    rollouts: list[AuditRollout] = Field(min_length=1, max_length=MAX_AUDIT_ROLLOUTS)


MAX_REPORT_MARKERS = 32
MARKER_LEN = 200


class AddressingReportIn(AddressingReport):
    """A flagged request of another judge kind, sent by the gateway after its response
    (`POST /v1/audit/addressing`)."""

    model_config = ConfigDict(extra="forbid")

    items: int = Field(ge=0, le=1_000_000)
    flagged: int = Field(ge=0, le=1_000_000)
    markers: list[Annotated[str, StringConstraints(max_length=MARKER_LEN)]] = Field(
        min_length=1, max_length=MAX_REPORT_MARKERS
    )


class Recorded(BaseModel):
    id: str


class Submitted(BaseModel):
    scoring_id: str
    status: str
    """`pending` (sampled: the reference judge will re-score it) or `skipped`."""


class ReplayIn(ReplayRequest):
    """The gateway's replay request to the miner: the public request, plus the question's
    current buffer for `judge=buffer` (the gateway reads it from the store)."""

    rubrics: list[Rubric] | None = None
