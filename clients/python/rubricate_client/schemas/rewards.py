"""Wire models of `POST /get_reward`, the OpenRLHF remote reward-model protocol.

OpenRLHF sends `{"query": [...], "prompts": [...], "labels": [...]}` (query = prompt + response
as decoded text) and reads `{"rewards": [...], "scores": [...], "extra_logs": {...}}`. The
veRL and TRL adapters of the SDK speak the same protocol.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubricate_client.schemas.rubrics import RubricSpec, TrainingStep

RewardKind = Literal["stagewise", "nugget", "step"]
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
