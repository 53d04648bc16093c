"""The gateway's public wire models (HTTP; gRPC mirrors them)."""

from typing import Annotated, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from rubricate_client.schemas.common import UsageOut
from rubricate_client.schemas.rubrics import (
    Judgment,
    Origin,
    RubricSpec,
    RubricView,
    Stage,
    TrainingStep,
)

QuestionId = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")
]
StageMap = dict[Stage, float]
OptionalStageMap = dict[Stage, float | None]
"""Stage -> value, null where the stage has no judgment (flagged, excluded, never 0)."""


class Rollout(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    trajectory: str = Field(min_length=1)
    """The full Plan/Research/Review/Answer trajectory as decoded text."""

    @field_validator("trajectory")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("trajectory must not be empty or whitespace")
        return value


class StagewiseScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    question: str = Field(min_length=1, max_length=20_000)
    question_id: QuestionId | None = None
    """Buffer key. Default: sha256 of the normalized question."""
    rollouts: list[Rollout] = Field(min_length=1)
    """The group: n rollouts of the same question."""
    persistent_rubrics: list[RubricSpec] = Field(default_factory=list, max_length=50)
    """Dataset rubrics for the answer stage; stored once, never pruned."""
    lambda_: list[list[float]] | None = Field(default=None, alias="lambda")
    """The 4×4 causal stage-dependence matrix Λ (default: RubricEM's)."""
    mode: Literal["stagewise", "terminal"] = "stagewise"
    """`terminal` broadcasts the answer score to every stage (plain GRPO)."""
    evolve: bool = True
    """Generate new rubrics for this group and prune the buffer afterwards."""
    step: TrainingStep | None = None
    """The trainer's step, recorded on new rubrics."""
    caps: dict[Stage, Annotated[int, Field(ge=0, le=50)]] | None = None
    """Override of the per-stage caps on active rubrics (default 3, 2, 2, 3)."""
    missing_stage_score: float = Field(default=0.0, ge=0.0, le=1.0)
    """R given to a stage that a rollout lacks."""


class Fallback(BaseModel):
    kind: Literal["answer_only", "unscored"]
    """`answer_only`: stagewise scoring failed; the answer score is broadcast to all
    stages. `unscored`: no score could be obtained; the rollout is left out."""
    reason: str


class Integrity(BaseModel):
    """How much of a rollout's answer score its text tried to get without asserting it
    (docs/verifier.md, "Assertion units"): a reward-hacking signal to log per sample."""

    refused_verdicts: int = Field(ge=0)
    """Answer verdicts the platform refused: their evidence was not an assertion carrying
    the rubric, or the answer asserted nothing."""
    refused_credit: float = Field(ge=0.0, le=1.0)
    """The R_answer those verdicts would have added had they stood."""


class RolloutResult(BaseModel):
    id: str
    spans: dict[Stage, tuple[int, int] | None]
    """Stage → [start, end) character offsets into the trajectory, or null if missing."""
    missing_stages: list[Stage]
    scores: OptionalStageMap | None
    """R per stage; null for the whole rollout when it could not be scored (`fallback`
    `unscored`), null for a stage in `unscored_stages` (no rubric, so no judgment). A null
    is never a reward: leave it out, do not read it as 0."""
    returns: OptionalStageMap | None
    advantages: OptionalStageMap | None
    """A per stage, normalized over the rollouts that have a value for that stage."""
    judgments: list[Judgment]
    fallback: Fallback | None = None
    integrity: Integrity | None = None
    """What the answer's reading as assertion units refused: null when nothing was."""


class RubricOut(RubricView):
    """A rubric of the buffer as a stagewise response shows it."""

    origin: Origin


class GenerationInfo(BaseModel):
    status: Literal["ok", "skipped", "failed"]
    """`failed` means no new rubrics this round (scoring went on with the buffer)."""
    new_rubric_ids: list[str] = Field(default_factory=list)
    error: str | None = None


class Timing(BaseModel):
    total_s: float
    upstream_s: float
    """Wall time spent waiting on the model servers and the store."""
    overhead_s: float
    """The gateway's own time: total minus upstream waits."""


class StagewiseScoreResponse(BaseModel):
    question_id: str
    scoring_id: str | None = None
    """Refer to this scoring's judgments by id in `/v1/reflections/score`; null only when the
    store could not keep them (then `scoring_not_stored` says why; send the judgments
    inline)."""
    scoring_not_stored: str | None = None
    """Set exactly when `scoring_id` is null: why the scoring record was not stored."""
    mode: Literal["stagewise", "terminal"]
    lambda_: list[list[float]] = Field(
        serialization_alias="lambda", validation_alias=AliasChoices("lambda", "lambda_")
    )
    rollouts: list[RolloutResult]
    rubrics: dict[Stage, list[RubricOut]]
    """The rubric set the group was scored on, per stage."""
    pruned: list[str]
    generation: GenerationInfo
    unscored_stages: list[Stage]
    """Stages with no rubric in the set: no judgment, so their score, return and advantage
    are null for every rollout (excluded, never 0)."""
    usage: UsageOut
    timing: Timing


class AdvantagesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    scores: list[list[float]] = Field(min_length=1, max_length=4096)
    """n×4 stage scores in [0, 1], columns plan, research, review, answer."""
    lambda_: list[list[float]] | None = Field(default=None, alias="lambda")
    mode: Literal["stagewise", "terminal"] = "stagewise"


class AdvantagesResponse(BaseModel):
    returns: list[list[float]]
    advantages: list[list[float]]
