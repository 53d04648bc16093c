import pytest

from rubricate.core.words import content_words
from rubricate.nuggets.domain.lexical import (
    OverlapThresholds,
    overlap,
    overlap_label,
    with_prior,
)
from rubricate_client.schemas.nuggets import Label

TH = OverlapThresholds(support=0.75, partial=0.4)


def test_content_words_drop_stop_words_and_stem() -> None:
    assert content_words("The surveys were conducted in 2004") == {"survey", "conduct", "2004"}
    assert content_words("Pew's polling") == {"pew", "poll"}


def test_overlap_is_the_share_of_nugget_words_found() -> None:
    text = "Pew Research Center conducts public opinion surveys."
    assert overlap("conducts public opinion polls", text) == pytest.approx(3 / 4)
    assert overlap("founded in 2004", text) == 0.0
    assert overlap("the of and", text) == 0.0


@pytest.mark.parametrize(
    ("score", "label"),
    [(1.0, "support"), (0.75, "support"), (0.5, "partial_support"), (0.1, "not_support")],
)
def test_overlap_label(score: float, label: str) -> None:
    assert overlap_label(score, TH) == label


def test_the_prior_only_softens_two_step_disagreements() -> None:
    assert with_prior("not_support", 1.0, TH) == "partial_support"
    assert with_prior("support", 0.0, TH) == "partial_support"
    assert with_prior("not_support", 0.5, TH) == "not_support"
    assert with_prior("partial_support", 1.0, TH) == "partial_support"
    assert with_prior("support", 0.9, TH) == "support"


@pytest.mark.parametrize(
    ("model", "score", "soften", "promote", "maximum"),
    [
        ("not_support", 1.0, "partial_support", "partial_support", "support"),
        ("not_support", 0.5, "not_support", "partial_support", "partial_support"),
        ("partial_support", 1.0, "partial_support", "support", "support"),
        ("support", 0.0, "partial_support", "support", "support"),
        ("partial_support", 0.0, "partial_support", "partial_support", "partial_support"),
    ],
)
def test_prior_rules(model: Label, score: float, soften: str, promote: str, maximum: str) -> None:
    assert with_prior(model, score, TH, rule="soften") == soften
    assert with_prior(model, score, TH, rule="promote") == promote
    assert with_prior(model, score, TH, rule="max") == maximum
