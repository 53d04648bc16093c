"""Wire models of the verifier's step tasks: action verdicts and listwise ranking."""

from pydantic import BaseModel, ConfigDict, Field

from rubricate.common.schemas import TaskResponse
from rubricate_client.constants import NEUTRAL_LABELS, STEP_RUBRIC_MAX_K


class StepVerdictsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    history: str = ""
    """The trajectory prefix h_t as text."""
    action: str = Field(min_length=1)
    """The proposed (or taken) action to verify."""
    criteria: list[str] = Field(min_length=1, max_length=STEP_RUBRIC_MAX_K)


class CriterionVerdict(BaseModel):
    """The verifier's verdict on one criterion (the gateway adds index, text and weight)."""

    satisfied: bool


class StepVerdictsResponse(TaskResponse):
    verdicts: list[CriterionVerdict]
    """One per criterion, in the request's order."""
    judge_addressing: list[str] = Field(default_factory=list)
    """What in the material addresses the judge, each prefixed with where (`action: ...`,
    `history: ...`, `criterion 2: ...`); empty for ordinary material. An action that
    addresses the judge meets no criterion (no model call); such a criterion is met by no
    action; such a history is withheld from the judge (GitHub issue 25)."""


class LabeledCandidate(BaseModel):
    label: str = Field(min_length=1, max_length=4)
    text: str = Field(min_length=1)


class RankTaskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    history: str = ""
    candidates: list[LabeledCandidate] = Field(min_length=2, max_length=len(NEUTRAL_LABELS))
    """In the order this judge sees them, already relabelled."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = None


class RankTaskResponse(TaskResponse):
    ranking: list[str]
    """Every label once, best first."""
    rationale: str
    judge_addressing: dict[str, list[str]] = Field(default_factory=dict)
    """Per candidate label, what in it addresses the judge (`history` for the history).
    Such candidates are withheld from the judge and ranked last, in the slate's order
    (GitHub issue 25)."""
