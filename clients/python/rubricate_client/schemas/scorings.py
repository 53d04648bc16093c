"""Public wire models of stored stagewise scorings: what `/v1/stagewise/score` judged, kept
so a reflection can refer to it by id and a person can read it (`GET /v1/scorings…`)."""

from datetime import datetime

from pydantic import BaseModel

from rubricate_client.schemas.rubrics import Judgment, RubricView, Stage


class ScoredRollout(BaseModel):
    scores: dict[Stage, float | None] | None
    """None for an unscored rollout; a None stage had no judgment (never 0)."""
    judgments: list[Judgment]
    fallback: str | None = None
    """The stagewise fallback kind (answer_only | unscored), if any."""


class StoredScoring(BaseModel):
    scoring_id: str
    question_id: str
    question: str
    step: int | None = None
    rubrics: list[RubricView]
    rollouts: dict[str, ScoredRollout]
    created_at: datetime


class ScoringList(BaseModel):
    scorings: list[StoredScoring]
    """Newest first."""
