"""Wire models of `POST /get_reward`, the OpenRLHF remote reward-model protocol.

OpenRLHF sends `{"query": [...], "prompts": [...], "labels": [...]}` (query = prompt + response
as decoded text) and reads `{"rewards": [...], "scores": [...], "extra_logs": {...}}`. The
veRL and TRL adapters of the SDK speak the same protocol.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubricate_client.constants import STAGES
from rubricate_client.schemas.rubrics import Polarity, RubricSpec, Stage, TrainingStep

RewardKind = Literal["stagewise", "nugget", "step"]
STAGE_COMPONENTS: tuple[str, ...] = tuple(f"R_{s}" for s in STAGES)
"""The stagewise kind's reward components, in stage order: R_plan, R_research, R_review,
R_answer."""
KIND_COMPONENTS: dict[str, tuple[str, ...]] = {
    "stagewise": STAGE_COMPONENTS,
    "nugget": ("nugget",),
    "step": ("step",),
}
"""The components each reward kind gives, beside its scalar reward."""
COMPONENT_ORDER: tuple[str, ...] = tuple(n for names in KIND_COMPONENTS.values() for n in names)
"""Every component name in its fixed order; a response lists those of the kinds in its
batch, in this order."""
MAX_REWARD_BATCH = 4096
MAX_GROUP_SIZE = 64
"""The most samples of one stagewise group (the gateway's default `max_rollouts`)."""


class GetRewardRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(min_length=1, max_length=MAX_REWARD_BATCH)
    """Prompt + response, decoded, one per sample."""
    prompts: list[str] | None = None
    """The prompt of each sample (same length as `query`); its text is cut off the query."""
    labels: list[str | dict[str, Any] | None] | None = None
    """Per sample: a JSON object (as text or as an object) with the fields of `RewardLabel`;
    any other text is kept as `reference` only."""
    kind: RewardKind | None = None
    """Rubricate extension: the reward kind for the whole batch (overrides the default;
    a label's own `kind` overrides this)."""
    rubric_scores: bool = False
    """Rubricate extension: also return each sample's per-rubric scores (`rubric_scores` of
    the response: the stagewise rubrics it was judged on, or the nuggets it was verified
    against)."""


class RewardLabel(BaseModel):
    """What a dataset row tells the platform about one sample (all fields optional)."""

    model_config = ConfigDict(extra="ignore")

    kind: RewardKind | None = None
    question: str | None = Field(default=None, max_length=20_000)
    """The question the judge sees (default: the prompt text)."""
    question_id: str | None = None
    """Groups samples of one question and keys its rubric buffer."""
    rubrics: list[RubricSpec] = Field(default_factory=list, max_length=50)
    """Stagewise: the question's persistent answer-stage rubrics."""
    nuggets: list[str | dict[str, Any]] | None = None
    """Nugget reward: the nuggets to verify the response against, as texts or
    `{"text": ..., "importance": "vital" | "okay"}` objects."""
    nugget_mode: Literal["long", "short"] | None = None
    """Nugget reward: `long` (default; answer split in blocks) or `short` (one ground truth)."""
    outcome: float | None = None
    """Step reward: the trajectory's outcome, which the step rewards split (default 1.0)."""
    step: TrainingStep | None = None
    """The trainer's step; part of the sample's group (docs/gateway.md, "Group assembly")."""
    group_size: int | None = Field(default=None, ge=1, le=MAX_GROUP_SIZE)
    """Stagewise: how many samples the group has (the trainer's samples per prompt). The
    gateway gathers that many samples of the group, from any number of requests, and scores
    them once; default: the gateway's `RUBRICATE_GATEWAY_GROUP_SIZE`. Unset there too, or 1:
    this request's samples of the question are the whole group."""
    group_key: str | None = Field(default=None, max_length=256)
    """Stagewise: an extra key of the group (e.g. the prompt's uid), for trainers that sample
    one question twice in a step."""
    reference: str | None = None
    """A plain-text label, kept for reward kinds that use a reference answer."""


class RewardComponent(BaseModel):
    """One reward component over the batch: a named column, one value per sample."""

    name: str
    """`R_plan`, `R_research`, `R_review`, `R_answer` (stagewise), `nugget`, `step`."""
    values: list[float | None]
    """Per sample, in request order; null where the sample has no such score: it was not
    scored (the judge failed), the stage was not judged (an answer-only fallback, a stage
    with no rubric) or the sample is of another kind. Never 0.0 for a missing score."""


class RubricScore(BaseModel):
    """One rubric (or nugget) scored on one sample."""

    id: str
    """The rubric's id in the question's buffer; `nugget-<i>` for the i-th nugget."""
    stage: Stage | None = None
    """The rubric's stage; null for a nugget."""
    title: str
    """The rubric's title, or the nugget's text."""
    weight: float
    """The rubric's weight (1-3), or the nugget's (vital 1, okay 0.5)."""
    polarity: Polarity = "positive"
    score: float | None
    """In [0, 1], higher is better: a rubric's 0/1/2 judgment / 2 (a negative rubric's
    inverted first), a nugget's support 1 / partial 0.5 / not 0. Null: not judged on this
    sample (never 0.0 for a missing judgment)."""


class GetRewardResponse(BaseModel):
    rewards: list[float | None]
    """The reward of each sample, in request order; null where the platform could not score
    the sample (never 0.0: a failure is not a reward; see docs/gateway.md, "Failures are
    never rewards", and the trainer's integration page for what its adapter does)."""
    scores: list[float | None]
    """The same values in [0, 1] (OpenRLHF's dynamic filtering reads these)."""
    extra_logs: dict[str, list[float]]
    """Per-sample diagnostics, each list as long as `rewards`: `rubricate/scored` is 1.0 where
    the platform scored the sample and 0.0 where it could not (then the reward is null);
    `rubricate/fallback` is 1.0 where only the answer stage was scored; stagewise kinds add
    `rubricate/R_<stage>` (0.0 where the stage has no score: read it with `scored`)."""
    components: list[RewardComponent] = Field(default_factory=list)
    """The reward's components beside the scalar, named, in `COMPONENT_ORDER` (the
    components of the kinds in the batch): the per-stage rewards R_plan … R_answer of the
    stagewise kind, `nugget` and `step` for those kinds; null where a sample has no such
    score, never 0.0."""
    rubric_scores: list[list[RubricScore]] | None = None
    """When the request asks (`rubric_scores`): per sample, its rubrics' scores, ordered by
    stage then rubric id (nuggets in label order); empty for a sample with none (the step
    kind, an empty response, a sample the platform could not score)."""

    def component(self, name: str) -> list[float | None]:
        """The values of one component, one per sample; all null where the batch has no
        such component."""
        for component in self.components:
            if component.name == name:
                return list(component.values)
        return [None] * len(self.rewards)
