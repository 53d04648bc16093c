"""Lexical overlap between a nugget and a text: a cheap prior for nugget verification.

overlap = the fraction of the nugget's content words (lower-cased, crudely stemmed, stop
words removed) that occur in the text. Used as a baseline judge and as a prior that can
correct a small verifier model (docs/judge-quality.md); thresholds are calibrated on the
RAG24 dev file, never on evaluation topics.
"""

from dataclasses import dataclass
from typing import Final, Literal

from rubricate.core.words import content_words
from rubricate.nuggets.domain.rewards import LABEL_VALUES
from rubricate_client.schemas.nuggets import Label


def overlap(nugget: str, text: str) -> float:
    """Share of the nugget's content words found in `text`; 0 for a nugget with none."""
    wanted = content_words(nugget)
    if not wanted:
        return 0.0
    return len(wanted & content_words(text)) / len(wanted)


@dataclass(frozen=True)
class OverlapThresholds:
    """overlap ≥ `support` → support; ≥ `partial` → partial_support; else not_support."""

    support: float
    partial: float


def overlap_label(score: float, thresholds: OverlapThresholds) -> Label:
    if score >= thresholds.support:
        return "support"
    if score >= thresholds.partial:
        return "partial_support"
    return "not_support"


PriorRule = Literal["soften", "promote", "max"]
PRIOR_RULES: Final[tuple[PriorRule, ...]] = ("soften", "promote", "max")


def with_prior(
    model: Label, score: float, thresholds: OverlapThresholds, *, rule: PriorRule = "soften"
) -> Label:
    """The model's label corrected by what the overlap says.

    - `soften`: a two-step disagreement (support vs not_support) becomes partial_support;
    - `promote`: the overlap can only raise the label, by at most one step;
    - `max`: the better of the two labels.
    """
    lexical = overlap_label(score, thresholds)
    gap = LABEL_VALUES[lexical] - LABEL_VALUES[model]
    if rule == "soften":
        return "partial_support" if abs(gap) >= 1.0 else model
    if rule == "promote":
        if gap <= 0:
            return model
        return "partial_support" if model == "not_support" else "support"
    return lexical if gap > 0 else model
