"""Wire models of the verifier's reflection-judging task."""

from pydantic import BaseModel, Field

from rubricate.common.schemas import TaskResponse
from rubricate.reflections.prompts.judging import Evidence
from rubricate_client.schemas.reflections import Dimension
from rubricate_client.schemas.rubrics import Stage


class ReflectionScoresRequest(BaseModel):
    question: str = Field(min_length=1)
    trajectory: str = Field(min_length=1)
    stage_scores: dict[Stage, float] | None = None
    """The evaluator's stage scores R (0-1) of the trajectory, when known."""
    evidence: list[Evidence] = Field(min_length=1)
    """The evaluator's per-rubric verdicts on the trajectory (privileged)."""
    candidate: str = Field(min_length=1)
    """One reflection candidate, already format-checked by the caller."""


class ReflectionScoresResponse(TaskResponse):
    within: dict[Dimension, float]
    """Dimension scores in [0, 1] for within-episode refinement."""
    cross: dict[Dimension, float]
    """Dimension scores in [0, 1] for cross-episode transfer."""
    rationale: str
    judge_addressing: list[str] = Field(default_factory=list)
    """What in the material addresses the judge, each prefixed with where (`candidate: ...`,
    `trajectory: ...`); empty for ordinary material. A candidate that addresses the judge is
    scored 0 on every dimension without a model call; such a trajectory is withheld from the
    judge's prompt (GitHub issue 25)."""
