"""Wire models of the reward audit: audited groups, drift and gaming signals, a tenant's
audit settings, replay jobs (docs/audit.md)."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from typing_extensions import Self

from rubricate_client.schemas.limits import QUESTION_ID_LEN, SCORING_ID_LEN
from rubricate_client.schemas.rubrics import Stage, TrainingStep

AuditStatus = Literal["skipped", "pending", "done", "failed"]
"""`skipped`: scored but not sampled (its length and judge-addressing signals still count);
`pending`: waiting for the reference judge; `done`: compared; `failed`: the reference judge
could not score it (never counted as agreement)."""
AuditReason = Literal["first", "sampled"]


class RubricAgreementView(BaseModel):
    rubric_id: str
    rollouts: int
    """Rollouts both judges scored this rubric on."""
    agreement: float
    """1 − mean |live − reference| / 2 over those rollouts (1 = the same scores)."""
    exact: float
    """Share of those rollouts with the same 0/1/2 score."""
    live_mean: float
    reference_mean: float


class AuditResult(BaseModel):
    agreement: float | None
    """The group's agreement: the rollout-weighted mean of its rubrics' agreements."""
    rubrics: list[RubricAgreementView]
    stage_deltas: dict[Stage, float | None]
    """Mean of reference − live stage score over the rollouts both scored (null: none)."""
    kendall_tau: float | None
    """Kendall's τ-b of the rollouts' rewards under both judges (null: undefined)."""
    best_changed: bool | None
    """True when the live judge's best rollout is not among the reference's best."""
    live_best: list[str]
    reference_best: list[str]
    rollout_deltas: dict[str, float]
    """Rollout id → reference − live reward (the mean of its stage scores)."""
    reference_model: str
    reference_design: str


class AuditView(BaseModel):
    scoring_id: str
    question_id: str
    step: int | None
    status: AuditStatus
    reason: AuditReason | None
    created_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    """Why the reference judge failed (status `failed`)."""
    addressing: dict[str, list[str]] = Field(default_factory=dict)
    """Rollout id → what in its trajectory addresses the judge (only rollouts with some)."""
    length_reward_correlation: float | None = None
    """Pearson's r of the rollouts' live reward and trajectory length in this group."""
    result: AuditResult | None = None


class AuditList(BaseModel):
    audits: list[AuditView]


class GamingCandidateView(BaseModel):
    rubric_id: str
    question_id: str
    steps: int
    live_rise: float
    """How much the rubric's live mean score rose over the steps (0..2 scale)."""
    reference_rise: float


class StepSignals(BaseModel):
    step: int
    groups: int
    """Scored groups seen at this step."""
    audited: int
    """Of them, audits done."""
    failed: int
    """Audits whose reference judge failed."""
    agreement: float | None
    length_reward_correlation: float | None
    """Pearson's r of reward and trajectory length over the step's rollouts."""
    addressing_rollouts: int
    """Rollouts whose trajectory addresses the judge."""
    refused_rollouts: int = 0
    """Rollouts with answer verdicts the platform refused (their evidence was not an
    assertion carrying the rubric, or the answer asserted nothing: docs/verifier.md)."""
    refused_credit: float | None = None
    """The mean, over the step's scored rollouts, of the R_answer refused verdicts would
    have added: how much reward the policy's text tries to get without asserting it."""


class AddressingView(BaseModel):
    scoring_id: str
    question_id: str
    step: int | None
    rollout_id: str
    markers: list[str]


AddressingKind = Literal["nugget", "step", "listwise", "rank", "reflection"]
"""The judge kinds whose flagged requests the audit counts besides stagewise (whose
rollouts are counted per step, `StepSignals.addressing_rollouts`)."""


class AddressingReport(BaseModel):
    """A request of one of those kinds in which something addressed the judge, as the
    gateway hands it to the audit (the miner keeps it for the signals)."""

    kind: AddressingKind
    step: TrainingStep | None = None
    """The trainer's step when the request said it."""
    items: int = Field(ge=0)
    """The request's items (steps, candidates, answers, ...)."""
    flagged: int = Field(ge=0)
    """Of them, the ones that addressed the judge (0 when only a history or a criterion
    did)."""
    markers: list[str]
    """What was found, each prefixed with where (`action: ...`, `candidate 2: ...`)."""


class AddressingKindCount(BaseModel):
    requests: int
    """Requests of this kind in which something addressed the judge."""
    items: int
    """The items those requests held (steps, candidates, answers, ...)."""
    flagged: int
    """Of those items, the ones flagged (a request flagged only for its history or a
    criterion counts as a request with no flagged item)."""


class AddressingRequestView(BaseModel):
    kind: AddressingKind
    step: int | None
    """The trainer's step when the request said it (reflections); null otherwise."""
    items: int
    flagged: int
    markers: list[str]
    """What was found, each prefixed with where (`action: ...`, `candidate 2: ...`)."""
    created_at: datetime


class AuditSignals(BaseModel):
    question_id: str | None
    """The question the signals are restricted to; null: all of the tenant's."""
    steps: list[StepSignals]
    agreement_first: float | None
    agreement_last: float | None
    agreement_drop: float | None
    """Mean agreement of the first audited steps minus that of the last (positive: the
    judges agree less than they did)."""
    gaming_candidates: list[GamingCandidateView]
    addressing: list[AddressingView]
    """The latest rollouts that address the judge (at most 100)."""
    addressing_window_h: float = 0.0
    """The hours over which `addressing_by_kind` and `addressing_requests` count."""
    addressing_by_kind: dict[AddressingKind, AddressingKindCount] = Field(default_factory=dict)
    """Flagged requests of the other judge kinds (nugget, step, listwise, rank, reflection)
    in the last `addressing_window_h` hours, by kind; a kind with none is absent."""
    addressing_requests: list[AddressingRequestView] = Field(default_factory=list)
    """The latest of those requests, newest last (at most 100)."""


class AuditTenantSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fraction: float | None = Field(default=None, ge=0.0, le=1.0)
    """Share of scored groups audited besides each question's first; null: the service
    default (RUBRICATE_AUDIT_FRACTION)."""
    retention_days: int | None = Field(default=None, ge=0, le=36_500)
    """Days the trajectories of audited groups are kept for replay; 0: not kept (off);
    null: the service default (RUBRICATE_AUDIT_RETENTION_DAYS)."""


class AuditDeleted(BaseModel):
    deleted: int
    """Audit records removed."""


# --- replay -------------------------------------------------------------------------------

ReplayJudge = Literal["live", "reference", "buffer"]
ReplayState = Literal["queued", "running", "succeeded", "failed"]
ScoringIdText = Annotated[
    str, StringConstraints(min_length=1, max_length=SCORING_ID_LEN, pattern=r"^[A-Za-z0-9_\-]+$")
]


class ReplayRequest(BaseModel):
    """Which stored scorings to re-score, and with which judge. Select by `scoring_ids`, or
    by `question_id` and/or a step range (`step_from`..`step_to`, inclusive)."""

    model_config = ConfigDict(extra="forbid")

    scoring_ids: list[ScoringIdText] | None = Field(default=None, min_length=1, max_length=1000)
    question_id: str | None = Field(default=None, min_length=1, max_length=QUESTION_ID_LEN)
    step_from: TrainingStep | None = None
    step_to: TrainingStep | None = None
    judge: ReplayJudge = "reference"
    """`live`: the live judge again, on the same rubrics (is it stable?); `reference`: the
    reference judge; `buffer`: the live judge on the question's current rubric buffer (needs
    `question_id`)."""
    limit: int = Field(default=200, ge=1, le=5000)
    """At most this many scorings, the latest first."""

    @model_validator(mode="after")
    def _one_selection(self) -> Self:
        ranged = self.step_from is not None or self.step_to is not None
        if self.scoring_ids is not None and (self.question_id is not None or ranged):
            raise ValueError("select by scoring_ids, or by question_id and steps: not both")
        if self.scoring_ids is None and self.question_id is None and not ranged:
            raise ValueError("select scorings: scoring_ids, question_id or a step range")
        if (
            self.step_from is not None
            and self.step_to is not None
            and self.step_from > self.step_to
        ):
            raise ValueError("step_from must not be after step_to")
        if self.judge == "buffer" and self.question_id is None:
            raise ValueError("judge 'buffer' re-scores one question's groups: send question_id")
        return self


class ReplayProgress(BaseModel):
    total: int
    """Scorings selected."""
    done: int
    failed: int
    """The judge failed on them (never counted as agreement)."""
    unavailable: int
    """Their trajectories are not kept (retention ran out, or off)."""


class ReplayGroup(BaseModel):
    scoring_id: str
    question_id: str
    step: int | None
    status: Literal["done", "failed", "unavailable"]
    error: str | None = None
    agreement: float | None = None
    """Agreement of the replay's judge with the stored live judgments."""
    kendall_tau: float | None = None
    best_changed: bool | None = None
    rollout_deltas: dict[str, float] = Field(default_factory=dict)
    """Rollout id → replayed − stored reward (the mean of its stage scores)."""
    rubrics: list[RubricAgreementView] = Field(default_factory=list)


class ReplayResult(BaseModel):
    agreement: float | None
    """Mean agreement over the groups replayed."""
    groups: list[ReplayGroup]


class ReplayJob(BaseModel):
    id: str
    state: ReplayState
    judge: ReplayJudge
    progress: ReplayProgress
    result: ReplayResult | None = None
    error: str | None = None
    created_at: datetime
    finished_at: datetime | None = None


# --- rubric history -------------------------------------------------------------------------


class RubricHistoryEntry(BaseModel):
    """A rubric that was in a question's buffer, with when it entered and left. A rubric
    pruned and later re-activated shows its latest entry (`added_at` is its first)."""

    question_id: str
    id: str
    stage: Stage
    title: str
    description: str
    weight: int
    polarity: Literal["positive", "negative"]
    origin: Literal["persistent", "active"]
    """`persistent` (from the dataset, never pruned) or `active` (judge-generated)."""
    added_step: int | None
    added_at: datetime
    pruned_step: int | None
    pruned_at: datetime | None
    """None while it is in the buffer."""
    variance: float | None
    """Its score variance over the last group scored on it: when pruned, the variance it
    was pruned for."""
    pinned: bool = False
    """Pinned by a person: never pruned while pinned."""
    retired_by: str | None = None
    """Who retired it (or edited it into another rubric); a retired rubric has `pruned_at`
    set and never returns to the buffer."""
    replaced_by: str | None = None
    """The id of the rubric an edit replaced it with."""
    created_by: str | None = None
    """The person whose edit created it; None for generated and dataset rubrics."""


class RubricHistory(BaseModel):
    question_id: str
    rubrics: list[RubricHistoryEntry]
    """In the order they entered the buffer."""


class ReplayJobList(BaseModel):
    jobs: list[ReplayJob]
    """Newest first."""


class QuestionAudit(BaseModel):
    """A question's audit status, as the console's question list shows it."""

    question_id: str
    groups: int
    """Groups of this question with an audit record (any status)."""
    done: int
    failed: int
    pending: int
    last_agreement: float | None
    """Agreement of the latest finished audit (None: none finished)."""
    last_audited_at: datetime | None


class QuestionAuditList(BaseModel):
    questions: list[QuestionAudit]
    """One per requested question id that has audit records."""


class ScoringTrajectories(BaseModel):
    """The trajectories of an audited scoring, kept for the tenant's retention period."""

    scoring_id: str
    question_id: str
    trajectories: dict[str, str] | None
    """Rollout id → trajectory text; None when they were not kept (retention off or over)."""
