"""Rubric ids and score contributions (RubricEM App. C.1–C.3); the shapes are the client's."""

import hashlib

from rubricate.core.normalize import normalize_question
from rubricate_client.constants import SCORE_MAX, Stage
from rubricate_client.schemas.rubrics import Origin, Polarity, Rubric, RubricSpec


def rubric_id(*, stage: Stage, spec: RubricSpec) -> str:
    """Content-derived id, so the same criterion proposed twice is stored once."""
    key = "\x1f".join(
        (
            stage,
            spec.polarity,
            normalize_question(spec.title),
            normalize_question(spec.description),
        )
    )
    return "r_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def make_rubric(
    *, stage: Stage, spec: RubricSpec, origin: Origin, step: int | None = None
) -> Rubric:
    return Rubric(
        id=rubric_id(stage=stage, spec=spec),
        stage=stage,
        origin=origin,
        created_step=step,
        **spec.model_dump(),
    )


def contribution(*, score: float, polarity: Polarity) -> float:
    """A 0..2 score mapped to [0, 1]; negative rubrics are inverted (0 = flaw avoided)."""
    value = score if polarity == "positive" else SCORE_MAX - score
    return value / SCORE_MAX
