"""Public wire models of the step-level endpoints (Co-ReAct, ARCO)."""

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from rubricate_client.constants import (
    NEUTRAL_LABELS,
    RANK_JUDGES,
    STEP_PASS_THRESHOLD,
    STEP_RUBRIC_K,
    STEP_RUBRIC_MAX_K,
)
from rubricate_client.schemas.common import UsageOut
from rubricate_client.schemas.stagewise import Timing

Span = tuple[int, int]
Question = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
MAX_CANDIDATES = len(NEUTRAL_LABELS)


# --- trajectories -------------------------------------------------------------------------


class FunctionIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=256)
    arguments: str | dict[str, Any] = ""
    """A JSON string (OpenAI) or an object."""


class ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    type: str = "function"
    function: FunctionIn


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = "text"
    text: str = ""


class MessageIn(BaseModel):
    """An OpenAI-style chat message; content may be a string or a list of text parts."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[ToolCallIn] = Field(default_factory=list)
    tool_call_id: str | None = None


Trajectory = str | list[MessageIn]
"""Decoded text with ``<call_tool>`` or ``<tool_call>`` markup, or an OpenAI message list."""


class PreSplitStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: str = Field(min_length=1)
    """What the agent produced in this step (reasoning and tool call, or the answer)."""
    observation: str | None = None
    """The tool's result, if any."""


class StepOut(BaseModel):
    index: int
    kind: Literal["tool", "final"]
    span: Span
    """[start, end) of the whole step in the segmented text; the spans tile the text."""
    action_span: Span
    observation_span: Span | None
    message_span: Span | None
    """For message input: [first, last + 1) message indices of the step."""


class Segmented(BaseModel):
    markup: Literal["call_tool", "tool_call", "messages", "steps", "none"]
    rendered: str | None
    """The text the spans index when the input was not a string (messages or pre-split
    steps); null when the spans index the trajectory string itself."""
    prompt_messages: int = 0
    """Leading system/user messages taken as the prompt (message input)."""


class SegmentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trajectory: Trajectory


class SegmentResponse(Segmented):
    steps: list[StepOut]


# --- rubrics ------------------------------------------------------------------------------


class CriterionIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1, max_length=2000)
    weight: float = Field(default=1.0, gt=0)
    """Any positive number; the rubric's weights are normalized to sum to 1."""

    @field_validator("weight")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be finite")
        return value


class StepRubricIn(BaseModel):
    """A step rubric; the object `/v1/steps/rubric` returns can be sent back as is."""

    model_config = ConfigDict(extra="ignore")

    criteria: list[CriterionIn] = Field(min_length=1, max_length=STEP_RUBRIC_MAX_K)


class CriterionOut(BaseModel):
    text: str
    weight: float


class StepRubricOut(BaseModel):
    criteria: list[CriterionOut]
    """Weights sum to 1."""
    rendered: str
    """The block to inject into the agent's context before it acts."""


class StepRubricRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Question
    history: Trajectory = ""
    """The trajectory prefix h_t (text or messages); empty before the first step."""
    k: int = Field(default=STEP_RUBRIC_K, ge=1, le=STEP_RUBRIC_MAX_K)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Sampling temperature of the generator (default: the server's, 0)."""
    seed: int | None = None


class StepRubricResponse(StepRubricOut):
    usage: UsageOut


# --- verification -------------------------------------------------------------------------


class VerifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Question
    history: Trajectory = ""
    action: str = Field(min_length=1)
    """The proposed next action (reasoning and tool call)."""
    rubric: StepRubricIn
    threshold: float = Field(default=STEP_PASS_THRESHOLD, ge=0.0, le=1.0)
    """τ: the step passes when the weighted satisfied fraction is ≥ τ."""
    attempt: int = Field(default=0, ge=0)
    """0 for the first proposal of this step, 1 for its retry."""


class VerdictOut(BaseModel):
    index: int
    criterion: str
    weight: float
    satisfied: bool


class VerifyResponse(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    verdicts: list[VerdictOut]
    score: float
    """Weighted fraction of satisfied criteria."""
    passed: bool = Field(serialization_alias="pass")
    threshold: float
    feedback: str | None
    """The failed criteria, ready to pin in the agent's context
    for its single retry; null when every criterion is satisfied."""
    retry: bool
    """True when the step failed and its one retry (Co-ReAct App. A) is still unused."""
    usage: UsageOut
    judge_addressing: list[str] = Field(default_factory=list)
    """What in the material addresses the judge, each prefixed with where (`action: ...`,
    `history: ...`, `criterion 2: ...`); empty for ordinary material. An action that
    addresses the judge meets no criterion; such a criterion is met by no action; such a
    history was withheld from the judge."""


# --- step rewards (ARCO) ------------------------------------------------------------------


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Question
    trajectory: Trajectory | None = None
    steps: list[PreSplitStep] | None = Field(default=None, min_length=1)
    """Pre-split steps instead of `trajectory` (exactly one of the two)."""
    outcome: float
    """The terminal reward to decompose over the steps."""
    k: int = Field(default=STEP_RUBRIC_K, ge=1, le=STEP_RUBRIC_MAX_K)
    rubrics: list[StepRubricIn | None] | None = None
    """Optional rubric per step (one entry per step; null entries are generated)."""

    @field_validator("outcome")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class ScoredStep(StepOut):
    status: Literal["ok", "failed"]
    rubric: StepRubricOut | None
    verdicts: list[VerdictOut]
    score: float | None
    """q_t: the weighted satisfied fraction of the step's rubric."""
    share: float | None
    """The step's fraction of the outcome."""
    reward: float | None
    """r_t; null for a failed step (see `failed_steps`)."""
    error: str | None = None
    judge_addressing: list[str] = Field(default_factory=list)
    """What in the step's material addresses the judge (as `VerifyResponse.judge_addressing`);
    an action flagged here met no criterion."""


class ScoreResponse(Segmented):
    steps: list[ScoredStep]
    outcome: float
    decomposition: Literal["proportional", "uniform", "zero_outcome"]
    """`uniform`: every scored step had score 0, so the outcome was split evenly."""
    failed_steps: list[int]
    """Steps whose rubric or verification failed after retries; their reward is null and the
    outcome is decomposed over the other steps."""
    usage: UsageOut
    timing: Timing
    judge_addressing: bool = False
    """True when some step's material addressed the judge (see `steps[i].judge_addressing`)."""


# --- listwise reward and ranking (Co-ReAct) -----------------------------------------------

RankingIn = list[int | list[int]]
"""Candidate indices best first; a nested list is a tie: [2, [0, 3], 1]."""


class CandidateAddressing(BaseModel):
    index: int
    """The candidate's index in the request."""
    markers: list[str]
    """What in the candidate addresses the judge."""


class ListwiseRewardRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Question
    history: Trajectory = ""
    candidates: list[Annotated[str, StringConstraints(min_length=1)]] = Field(
        min_length=2, max_length=MAX_CANDIDATES
    )
    """The slate of candidate next actions (4 in Co-ReAct)."""
    expert_ranking: RankingIn | None = None
    judge_rankings: list[RankingIn] | None = Field(default=None, min_length=1, max_length=32)
    """Several judges' rankings, aggregated by Borda count (give this or `expert_ranking`)."""
    rubrics: list[str] = Field(min_length=1, max_length=64)
    """The G sampled rubrics, as the generator wrote them:
    {"criteria": [{"criterion": "...", "weight": 2}, ...]}."""
    k: int | None = Field(default=None, ge=1, le=STEP_RUBRIC_MAX_K)
    """Expected number of criteria for the format term (default: any from 1 to 10)."""


class RubricRewardOut(BaseModel):
    index: int
    status: Literal["ok", "unparseable", "error"]
    """`unparseable`: no rubric in the text (reward from the shaping terms, r_rank = 0);
    `error`: the verifier failed on a candidate after retries (reward null)."""
    criteria: list[CriterionOut] | None
    candidate_scores: list[float] | None
    """Each candidate's weighted satisfied fraction under this rubric."""
    induced_ranking: list[list[int]] | None
    rho: float | None
    r_rank: float | None
    r_atom: float
    r_fmt: float
    repetition: float
    gated: bool
    reward: float | None
    advantage: float | None
    """Group-relative advantage over the rubrics with a reward (Co-ReAct Eq. 5)."""
    error: str | None = None
    judge_addressing: list[str] = Field(default_factory=list)
    """What in this rubric's criteria addresses the judge (`criterion i: ...`); such a
    criterion is met by no candidate."""


class ListwiseRewardResponse(BaseModel):
    consensus: list[list[int]]
    """The expert (or Borda consensus) ranking, tiers best first."""
    borda_points: list[float] | None
    rubrics: list[RubricRewardOut]
    usage: UsageOut
    timing: Timing
    judge_addressing: bool = False
    """True when a candidate, a rubric or the history addressed the judge."""
    candidate_addressing: list[CandidateAddressing] = Field(default_factory=list)
    """The candidates that address the judge (they meet no criterion of any rubric)."""
    history_addressing: list[str] = Field(default_factory=list)
    """What in the history addresses the judge (the history was withheld from it)."""


class RankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Question
    history: Trajectory = ""
    candidates: list[Annotated[str, StringConstraints(min_length=1)]] = Field(
        min_length=2, max_length=MAX_CANDIDATES
    )
    judges: int = Field(default=RANK_JUDGES, ge=1, le=16)
    """J: judges are the configured judge servers in turn, or samples of the verifier."""
    min_valid: int | None = Field(default=None, ge=1, le=16)
    """Fewest parseable rankings to accept (default: 2, or 1 with a single judge)."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    seed: int | None = None
    """Seeds the per-judge shuffles (and sampling); random when absent, and reported."""


class JudgeOut(BaseModel):
    judge: int
    server: str
    status: Literal["ok", "dropped"]
    order: list[int]
    """The candidate indices in the order this judge saw them."""
    labels: dict[str, int]
    """Neutral label → candidate index, for this judge."""
    ranking: list[list[int]] | None
    rationale: str | None
    error: str | None
    usage: UsageOut


class RankResponse(BaseModel):
    consensus: list[list[int]]
    """Candidate indices best first; equal Borda points are tied."""
    borda_points: list[float]
    judges: list[JudgeOut]
    dropped: list[int]
    """Judges without a parseable ranking (after retries)."""
    seed: int
    usage: UsageOut
    timing: Timing
    judge_addressing: bool = False
    """True when a candidate or the history addressed the judge."""
    candidate_addressing: list[CandidateAddressing] = Field(default_factory=list)
    """The candidates that address the judge: withheld from every judge and ranked last."""
    history_addressing: list[str] = Field(default_factory=list)
    """What in the history addresses the judge (the history was withheld from it)."""
