"""Rubrics and judgments as validated data (RubricEM App. C.1–C.3): the wire shapes."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from rubricate_client.constants import MAX_STEP, SCORE_MAX, SCORE_MIN, WEIGHT_MAX, WEIGHT_MIN
from rubricate_client.constants import Stage as Stage

Polarity = Literal["positive", "negative"]
Origin = Literal["persistent", "active"]

TrainingStep = Annotated[int, Field(ge=0, le=MAX_STEP)]
"""A trainer's step as every request and record takes it (fits the store's 64-bit column)."""

Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]
Description = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)
]


class RubricSpec(BaseModel):
    """A criterion as a user supplies it or a generator proposes it."""

    model_config = ConfigDict(extra="forbid")

    title: Title
    """Short name of the criterion."""
    description: Description
    """What the scorer checks; the sole scoring criterion."""
    weight: int = Field(default=2, ge=WEIGHT_MIN, le=WEIGHT_MAX)
    """1 = minor, 2 = important, 3 = critical."""
    polarity: Polarity = "positive"
    """Positive rubrics reward a quality; negative rubrics describe a flaw."""


class Rubric(RubricSpec):
    """A criterion in a question's buffer."""

    id: str
    """Stable id: derived from stage, polarity, title and description."""
    stage: Stage
    origin: Origin
    """`persistent` (from the dataset, never pruned) or `active` (judge-generated)."""
    created_step: int | None = None
    """Training step at which it entered the buffer, when the trainer sent one."""
    variance: float | None = None
    """Score variance across the last group that was scored on it (its discrimination)."""
    pinned: bool = False
    """Pinned by a person (`POST …/curate`): never pruned while pinned."""


class Judgment(BaseModel):
    """One rubric scored on one trajectory."""

    rubric_id: str
    stage: Stage
    score: int = Field(ge=SCORE_MIN, le=SCORE_MAX)
    justification: str = ""
    expected_score: float | None = Field(default=None, ge=SCORE_MIN, le=SCORE_MAX)
    """The expected score over 0..2 when the judge gives probabilities instead of a
    written verdict (the `choices` scoring design): smoother than `score`, which is then
    the more probable end of the scale. Stage scores use it when present."""
    evidence: list[str] = Field(default_factory=list)
    """The answer's unit ids the judge cited for this verdict (`generate` design, answer
    rubrics; the answer is read as assertion units, docs/verifier.md "Assertion units")."""
    refused: str | None = None
    """Why the platform refused the judge's verdict (its evidence is not an assertion that
    carries the rubric's content, or the answer asserts nothing): the rubric then counts as
    not met. None when the verdict stands."""
    claimed_score: int | None = Field(default=None, ge=SCORE_MIN, le=SCORE_MAX)
    """The judge's own score when `refused`: what the text would have been paid."""

    @property
    def value(self) -> float:
        """The score stage scores are computed from: `expected_score` when known."""
        return float(self.score) if self.expected_score is None else self.expected_score


class RubricText(BaseModel):
    """What a rubric says: the part a judge reads."""

    stage: Stage
    title: str
    description: str
    polarity: Polarity


class RubricView(RubricText):
    """A rubric as responses and stored scorings show it."""

    id: str
    weight: int
