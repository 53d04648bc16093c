"""The gateway's public wire models for reflection rewards and the agent rubric bank."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubricate_client.schemas.bank import (
    DEFAULT_RETRIEVE_K,
    MAX_RETRIEVE_K,
    RetrievalMode,
    RetrievedItem,
)
from rubricate_client.schemas.common import UsageOut
from rubricate_client.schemas.rubrics import Judgment, Stage, TrainingStep
from rubricate_client.schemas.stagewise import RubricOut, Timing

MAX_CANDIDATES = 32

Dimension = Literal["diagnostic_accuracy", "specificity", "scope_balance"]
CandidateStatus = Literal["scored", "invalid_format", "judge_failed"]


class StagewiseEvidence(BaseModel):
    """The stagewise judgments of the trajectory, as `/v1/stagewise/score` returned them:
    the rollout's `judgments` (and `scores`), plus the response's `rubrics` so the judge
    sees what each rubric asks. Other fields of a rollout result are ignored."""

    model_config = ConfigDict(extra="ignore")

    judgments: list[Judgment] = Field(min_length=1)
    scores: dict[Stage, float | None] | None = None
    """The rollout's stage scores; a null stage (no judgment) is not shown to the judge."""
    rubrics: dict[Stage, list[RubricOut]] | None = None
    """The rubric set the group was scored on (the stagewise response's `rubrics`)."""


class ReflectionScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    trajectory: str = Field(min_length=1)
    """The trajectory the reflections are about (the policy saw it when reflecting)."""
    judgments: StagewiseEvidence | None = None
    """The trajectory's stagewise judgments, inline. Or give `scoring_id` instead."""
    scoring_id: str | None = Field(default=None, min_length=1, max_length=64)
    """The `scoring_id` of a `/v1/stagewise/score` response: its judgments are used."""
    rollout_id: str | None = Field(default=None, min_length=1, max_length=256)
    """Which rollout of that scoring (optional when it had one rollout)."""
    candidates: list[str] = Field(min_length=1, max_length=MAX_CANDIDATES)
    """The reflection texts the policy sampled for this trajectory (n = 8 typical)."""
    step: TrainingStep | None = None
    """The trainer's step; a bank item from a newer step is never replaced."""
    write_to_bank: bool = True

    @field_validator("trajectory")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("trajectory must not be empty or whitespace")
        return value


class UseScoresOut(BaseModel):
    diagnostic_accuracy: float
    specificity: float
    scope_balance: float


class CandidateResult(BaseModel):
    index: int
    status: CandidateStatus
    """`scored`; `invalid_format` (reward 0, see `reason`); `judge_failed` (no reward: the
    judge could not score it after retries; leave it out of the update, do not read 0)."""
    valid: bool
    """Whether it has the two-block format."""
    reason: str | None = None
    within: UseScoresOut | None = None
    cross: UseScoresOut | None = None
    u_within: float | None = None
    u_cross: float | None = None
    u: float | None
    """The reward: ½(u_within + u_cross); 0 for a malformed candidate; null if not judged."""
    rationale: str | None = None
    written: bool = False
    """Whether this candidate was written to the bank."""
    judge_addressing: list[str] = Field(default_factory=list)
    """What in the candidate (`candidate: ...`) or the trajectory (`trajectory: ...`)
    addresses the judge. A flagged candidate scored 0 on every dimension without a model
    call; a flagged trajectory was withheld from the judge's prompt."""


class BankWrite(BaseModel):
    written: bool
    reason: str
    question_hash: str
    version: int | None = None
    """The bank item's version after the write (None when nothing was written)."""


class ReflectionScoreResponse(BaseModel):
    question_hash: str
    candidates: list[CandidateResult]
    best_index: int | None
    """The highest-u judged candidate with a valid format (None if there is none)."""
    bank: BankWrite
    weights: dict[Dimension, float]
    usage: UsageOut
    timing: Timing
    judge_addressing: bool = False
    """True when some judged candidate or the trajectory addressed the judge (see
    `candidates[i].judge_addressing`)."""


class BankRetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    mode: RetrievalMode
    k: int = Field(default=DEFAULT_RETRIEVE_K, ge=1, le=MAX_RETRIEVE_K)


class BankRetrieveResponse(BaseModel):
    mode: RetrievalMode
    question_hash: str
    items: list[RetrievedItem]
    block: str
    """The `<reference_examples>` block ("" when nothing was found)."""
    prompt: str
    """The block followed by the question: the user message to give the policy."""
